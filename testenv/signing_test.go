package testenv

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// signingRepo is a work repository whose commits git itself signs, and a bare clone of it that
// the verifying helpers read, as they read the daemon's remotes.
type signingRepo struct {
	tb   testing.TB
	work string
	env  []string
}

func newSigningRepo(tb testing.TB, env ...string) *signingRepo {
	tb.Helper()
	home := tb.TempDir()
	r := &signingRepo{tb: tb, work: filepath.Join(home, "work"), env: append([]string{
		"HOME=" + home,
		"GIT_CONFIG_NOSYSTEM=1",
		"GIT_CONFIG_GLOBAL=" + os.DevNull,
		"GIT_AUTHOR_NAME=Test", "GIT_AUTHOR_EMAIL=t@example.com",
		"GIT_COMMITTER_NAME=Test", "GIT_COMMITTER_EMAIL=t@example.com",
	}, env...)}
	r.git("init", "-q", "-b", "main", r.work)
	return r
}

func (r *signingRepo) git(args ...string) string {
	r.tb.Helper()
	out, err := runTool(r.env, nil, "git", args...)
	if err != nil {
		r.tb.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(out)
}

// commit makes an empty commit with git's config args (signing ones, say) and returns its hash.
func (r *signingRepo) commit(message string, config ...string) string {
	r.tb.Helper()
	r.git(append(append(config, "-C", r.work), "commit", "-q", "--allow-empty", "-m", message)...)
	return r.git("-C", r.work, "rev-parse", "HEAD")
}

// bare clones the work repository bare and returns its git directory.
func (r *signingRepo) bare() string {
	r.tb.Helper()
	dir := filepath.Join(r.tb.TempDir(), "remote.git")
	r.git("clone", "-q", "--bare", r.work, dir)
	return dir
}

// sshKey generates an ed25519 key and returns the private key's path and the public key's line.
func sshKey(tb testing.TB, name string) (string, string) {
	tb.Helper()
	keygen := requireSSHKeygen(tb)
	path := filepath.Join(tb.TempDir(), name)
	if out, err := runTool(nil, nil, keygen, "-q", "-t", "ed25519", "-N", "", "-C", name, "-f", path); err != nil {
		tb.Fatalf("generate an SSH key: %v\n%s", err, out)
	}
	pub, err := os.ReadFile(path + ".pub")
	if err != nil {
		tb.Fatal(err)
	}
	return path, string(pub)
}

func TestVerifySSHCommit(t *testing.T) {
	t.Parallel()
	key, pub := sshKey(t, "signer")
	_, otherPub := sshKey(t, "other")
	r := newSigningRepo(t)
	signed := r.commit("signed", "-c", "gpg.format=ssh", "-c", "user.signingkey="+key, "-c", "commit.gpgsign=true")
	unsigned := r.commit("unsigned")
	gitDir := r.bare()

	out, err := VerifySSHCommit(t, gitDir, signed, pub)
	if err != nil {
		t.Fatalf("the signed commit does not verify with its key: %v", err)
	}
	if !strings.Contains(out, `Good "git" signature for gitops-reverser`) {
		t.Errorf("git's output names no good signature:\n%s", out)
	}
	if out, err := VerifySSHCommit(t, gitDir, signed, otherPub); err == nil {
		t.Errorf("the signed commit verifies with another key:\n%s", out)
	}
	if out, err := VerifySSHCommit(t, gitDir, unsigned, pub); err == nil {
		t.Errorf("an unsigned commit verifies:\n%s", out)
	}
	// The work repository's own git directory serves as well as a bare one.
	if _, err := VerifySSHCommit(t, filepath.Join(r.work, ".git"), signed, pub); err != nil {
		t.Errorf("the signed commit does not verify in the work repository: %v", err)
	}
}

// gpgKey generates an ed25519 signing key in the GNUPGHOME home and returns its fingerprint and
// its armored public key.
func gpgKey(tb testing.TB, home, uid string) (string, string) {
	tb.Helper()
	gpg := requireGPG(tb)
	env := []string{"GNUPGHOME=" + home}
	if out, err := runTool(env, nil, gpg, "--batch", "--passphrase", "", "--quick-gen-key", uid, "ed25519", "sign", "never"); err != nil {
		tb.Fatalf("generate an OpenPGP key: %v\n%s", err, out)
	}
	listing, err := runTool(env, nil, gpg, "--batch", "--with-colons", "--fingerprint", "--list-keys", "="+uid)
	if err != nil {
		tb.Fatalf("list the OpenPGP key: %v\n%s", err, listing)
	}
	fprs := primaryFingerprints(listing)
	if len(fprs) != 1 {
		tb.Fatalf("want one key for %q, got %v:\n%s", uid, fprs, listing)
	}
	armored, err := runTool(env, nil, gpg, "--batch", "--armor", "--export", fprs[0])
	if err != nil || !strings.HasPrefix(armored, "-----BEGIN PGP PUBLIC KEY BLOCK-----") {
		tb.Fatalf("export the OpenPGP key: %v\n%s", err, armored)
	}
	return fprs[0], armored
}

func TestVerifyOpenPGPCommit(t *testing.T) {
	t.Parallel()
	home := newGnupgHome(t)
	fpr, pub := gpgKey(t, home, "Test <t@example.com>")
	_, otherPub := gpgKey(t, home, "Other <o@example.com>")
	r := newSigningRepo(t, "GNUPGHOME="+home)
	signed := r.commit("signed", "-c", "gpg.program=gpg", "-c", "user.signingkey="+fpr, "-c", "commit.gpgsign=true")
	unsigned := r.commit("unsigned")
	gitDir := r.bare()

	out, err := VerifyOpenPGPCommit(t, gitDir, signed, pub)
	if err != nil {
		t.Fatalf("the signed commit does not verify with its key: %v", err)
	}
	if !strings.Contains(out, "[GNUPG:] VALIDSIG "+fpr) {
		t.Errorf("git's output names no valid signature by %s:\n%s", fpr, out)
	}
	if out, err := VerifyOpenPGPCommit(t, gitDir, signed, otherPub); err == nil {
		t.Errorf("the signed commit verifies with another key:\n%s", out)
	}
	if out, err := VerifyOpenPGPCommit(t, gitDir, unsigned, pub); err == nil {
		t.Errorf("an unsigned commit verifies:\n%s", out)
	}
}

func TestParseSigningToolVersions(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		out, pattern string
		major, minor int
	}{
		{"gpg (GnuPG) 2.2.40\nlibgcrypt 1.10.1\n", `^gpg \(GnuPG\) (\d+)\.(\d+)`, 2, 2},
		{"OpenSSH_9.2p1 Debian-2+deb12u6, OpenSSL 3.0.19 27 Jan 2026\n", `^OpenSSH_(\d+)\.(\d+)`, 9, 2},
		{"git version 2.39.5\n", `^git version (\d+)\.(\d+)`, 2, 39},
	} {
		major, minor, err := parseVersion(c.out, c.pattern)
		if err != nil || major != c.major || minor != c.minor {
			t.Errorf("parseVersion(%q) = %d.%d, %v; want %d.%d", c.out, major, minor, err, c.major, c.minor)
		}
	}
	if _, _, err := parseVersion("OpenSSH_for_Windows\n", `^OpenSSH_(\d+)\.(\d+)`); err == nil {
		t.Error("parseVersion read a version where there is none")
	}
}
