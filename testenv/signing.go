package testenv

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// The signatures of the daemon's commits are judged by plain git, as a user checking them would:
// git runs ssh-keygen for SSH signatures (gpg.format=ssh) and gpg for OpenPGP ones. These are the
// oldest versions that can, checked at run time because the Makefile installs whatever Debian has
// (make signing-tools) rather than a pinned version.
const (
	// SSHSignerPrincipal is the principal VerifySSHCommit trusts the given key for.
	SSHSignerPrincipal = "gitops-reverser"
	// git 2.34 added gpg.format=ssh.
	minGitSSHMajor, minGitSSHMinor = 2, 34
	// OpenSSH 8.2 has ssh-keygen -Y find-principals, which git runs to match the allowed signers.
	minOpenSSHMajor, minOpenSSHMinor = 8, 2
	// GnuPG 2.2 is the oldest maintained series and verifies ed25519 and RSA signatures alike.
	minGPGMajor, minGPGMinor = 2, 2
)

// VerifySSHCommit runs `git verify-commit` on rev in the (bare or not) git directory gitDir,
// trusting exactly publicKey (an authorized_keys line) for the principal "gitops-reverser" through
// an allowed signers file. It returns git's combined output, and an error when the commit does not
// verify: unsigned, signed badly, or signed by another key (git then finds no principal, which it
// would report as a good signature of nobody, so the output is checked for the principal too).
func VerifySSHCommit(tb testing.TB, gitDir, rev, publicKey string) (string, error) {
	tb.Helper()
	requireGitSSH(tb)
	requireSSHKeygen(tb)
	allowed := filepath.Join(tb.TempDir(), "allowed_signers")
	line := SSHSignerPrincipal + ` namespaces="git" ` + strings.TrimSpace(publicKey) + "\n"
	if err := os.WriteFile(allowed, []byte(line), 0o600); err != nil {
		tb.Fatalf("write the allowed signers file: %v", err)
	}
	out, err := verifyCommit(gitDir, rev, nil,
		"-c", "gpg.format=ssh",
		"-c", "gpg.ssh.allowedSignersFile="+allowed,
		// A key found in the allowed signers file is trusted "fully"; anything less fails in git.
		"-c", "gpg.minTrustLevel=fully")
	if err != nil {
		return out, err
	}
	if want := `Good "git" signature for ` + SSHSignerPrincipal + ` with `; !strings.Contains(out, want) {
		return out, fmt.Errorf("verify %s: git verify-commit succeeded without %q:\n%s", rev, want, out)
	}
	return out, nil
}

// VerifyOpenPGPCommit runs `git verify-commit` on rev in gitDir with a fresh GNUPGHOME that holds
// only armoredPublicKey (one key or more), trusted ultimately. It returns git's output (gpg's
// status lines, --raw) and an error when the commit does not verify or the signature is not good
// and valid from a trusted key. gpg runs in batch mode and starts neither agent nor dirmngr, so it
// needs no TTY and never reaches the network.
func VerifyOpenPGPCommit(tb testing.TB, gitDir, rev, armoredPublicKey string) (string, error) {
	tb.Helper()
	gpg := requireGPG(tb)
	home := newGnupgHome(tb)
	conf := "batch\nno-tty\nno-autostart\nno-auto-key-retrieve\nno-auto-key-locate\ntrust-model pgp\n"
	if err := os.WriteFile(filepath.Join(home, "gpg.conf"), []byte(conf), 0o600); err != nil {
		tb.Fatalf("write gpg.conf: %v", err)
	}
	env := []string{"GNUPGHOME=" + home}
	if out, err := runTool(env, strings.NewReader(armoredPublicKey), gpg, "--import"); err != nil {
		tb.Fatalf("import the OpenPGP public key: %v\n%s", err, out)
	}
	listing, err := runTool(env, nil, gpg, "--with-colons", "--fingerprint", "--list-keys")
	if err != nil {
		tb.Fatalf("list the imported OpenPGP keys: %v\n%s", err, listing)
	}
	fprs := primaryFingerprints(listing)
	if len(fprs) == 0 {
		tb.Fatalf("the armored public key holds no OpenPGP key:\n%s", armoredPublicKey)
	}
	var trust strings.Builder
	for _, fpr := range fprs {
		trust.WriteString(fpr + ":6:\n") // 6: ultimate
	}
	if out, err := runTool(env, strings.NewReader(trust.String()), gpg, "--import-ownertrust"); err != nil {
		tb.Fatalf("trust the OpenPGP key: %v\n%s", err, out)
	}
	out, err := verifyCommit(gitDir, rev, env,
		"-c", "gpg.format=openpgp", "-c", "gpg.program="+gpg, "-c", "gpg.minTrustLevel=fully")
	if err != nil {
		return out, err
	}
	for _, want := range []string{"[GNUPG:] GOODSIG ", "[GNUPG:] VALIDSIG "} {
		if !strings.Contains(out, want) {
			return out, fmt.Errorf("verify %s: git verify-commit succeeded without %q:\n%s", rev, want, out)
		}
	}
	if !strings.Contains(out, "[GNUPG:] TRUST_ULTIMATE") && !strings.Contains(out, "[GNUPG:] TRUST_FULLY") {
		return out, fmt.Errorf("verify %s: the signing key is not trusted:\n%s", rev, out)
	}
	return out, nil
}

// newGnupgHome returns an empty GNUPGHOME that is removed, its gpg-agent stopped, when tb ends.
// It is made under the system's temporary directory, not tb.TempDir(): the agent's socket lives in
// it, and socket paths are limited to about 100 bytes.
func newGnupgHome(tb testing.TB) string {
	tb.Helper()
	home, err := os.MkdirTemp("", "gnupg")
	if err != nil {
		tb.Fatalf("make a GNUPGHOME: %v", err)
	}
	tb.Cleanup(func() {
		if gpgconf, err := exec.LookPath("gpgconf"); err == nil {
			_, _ = runTool([]string{"GNUPGHOME=" + home}, nil, gpgconf, "--kill", "all")
		}
		if err := os.RemoveAll(home); err != nil {
			tb.Errorf("remove GNUPGHOME: %v", err)
		}
	})
	return home
}

// primaryFingerprints lists the fingerprints of the primary keys in gpg's --with-colons listing.
func primaryFingerprints(listing string) []string {
	var fprs []string
	primary := false
	for _, line := range strings.Split(listing, "\n") {
		fields := strings.Split(line, ":")
		switch fields[0] {
		case "pub":
			primary = true
		case "sub":
			primary = false
		case "fpr":
			if primary && len(fields) > 9 {
				fprs = append(fprs, fields[9])
				primary = false
			}
		}
	}
	return fprs
}

// verifyCommit runs git verify-commit with config args and extra environment, ignoring the
// machine's and the user's git configuration, which could name another gpg program or key.
func verifyCommit(gitDir, rev string, env []string, config ...string) (string, error) {
	args := slices.Concat(config, []string{"--git-dir=" + gitDir, "verify-commit", "--raw", rev})
	env = slices.Concat(env, []string{"GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=" + os.DevNull})
	out, err := runTool(env, nil, "git", args...)
	if err != nil {
		return out, fmt.Errorf("git verify-commit %s: %w\n%s", rev, err, out)
	}
	return out, nil
}

// runTool runs name with args, stdin and env added to this process's environment (and LC_ALL=C,
// so messages are the ones checked for), and returns its combined output.
func runTool(env []string, stdin *strings.Reader, name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), gitCommandTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = append(append(os.Environ(), "LC_ALL=C"), env...)
	if stdin != nil {
		cmd.Stdin = stdin
	}
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &out
	err := cmd.Run()
	if err != nil {
		err = fmt.Errorf("%s: %w", name, err)
	}
	return out.String(), err
}

// requireGPG returns the path of gpg, failing tb when it is missing or too old.
func requireGPG(tb testing.TB) string {
	tb.Helper()
	gpg := requireTool(tb, "gpg")
	requireVersion(tb, gpg, []string{"--version"}, `^gpg \(GnuPG\) (\d+)\.(\d+)`, minGPGMajor, minGPGMinor)
	return gpg
}

// requireSSHKeygen returns the path of ssh-keygen, failing tb when it is missing or too old.
// ssh-keygen tells no version, so ssh's (the same Debian package, openssh-client) stands for it.
func requireSSHKeygen(tb testing.TB) string {
	tb.Helper()
	keygen := requireTool(tb, "ssh-keygen")
	ssh := requireTool(tb, "ssh")
	requireVersion(tb, ssh, []string{"-V"}, `^OpenSSH_(\d+)\.(\d+)`, minOpenSSHMajor, minOpenSSHMinor)
	return keygen
}

// requireGitSSH fails tb when git is too old to verify SSH signatures.
func requireGitSSH(tb testing.TB) {
	tb.Helper()
	git := requireTool(tb, "git")
	requireVersion(tb, git, []string{"version"}, `^git version (\d+)\.(\d+)`, minGitSSHMajor, minGitSSHMinor)
}

// requireTool returns the path of name, failing tb with the make target that installs it.
func requireTool(tb testing.TB, name string) string {
	tb.Helper()
	path, err := exec.LookPath(name)
	if err != nil {
		tb.Fatalf("%s is not installed: run `make signing-tools`", name)
	}
	return path
}

// requireVersion fails tb unless the first line of `tool args...` matches pattern with a
// major.minor of at least the given one.
func requireVersion(tb testing.TB, tool string, args []string, pattern string, major, minor int) {
	tb.Helper()
	out, err := runTool(nil, nil, tool, args...)
	if err != nil {
		tb.Fatalf("ask %s its version: %v\n%s", tool, err, out)
	}
	gotMajor, gotMinor, err := parseVersion(out, pattern)
	if err != nil {
		tb.Fatalf("%s: %v", tool, err)
	}
	if gotMajor < major || gotMajor == major && gotMinor < minor {
		tb.Fatalf("%s is %d.%d; these tests need %d.%d or newer", tool, gotMajor, gotMinor, major, minor)
	}
}

// parseVersion reads major.minor from the first line of out with pattern's two groups.
func parseVersion(out, pattern string) (int, int, error) {
	first, _, _ := strings.Cut(out, "\n")
	m := regexp.MustCompile(pattern).FindStringSubmatch(first)
	if m == nil {
		return 0, 0, errors.New("no version in " + strconv.Quote(first))
	}
	major, err := strconv.Atoi(m[1])
	if err != nil {
		return 0, 0, fmt.Errorf("parse the version in %q: %w", first, err)
	}
	minor, err := strconv.Atoi(m[2])
	if err != nil {
		return 0, 0, fmt.Errorf("parse the version in %q: %w", first, err)
	}
	return major, minor, nil
}
