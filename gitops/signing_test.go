package gitops

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ProtonMail/go-crypto/openpgp"
	"github.com/ProtonMail/go-crypto/openpgp/armor"
	"github.com/ProtonMail/go-crypto/openpgp/packet"
	"github.com/go-git/go-git/v5/plumbing"
	"golang.org/x/crypto/ssh"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/configbutler/gitops-reverser/testenv"
)

// newSSHKey is a new ed25519 key as an OpenSSH private key file, encrypted when passphrase is set.
func newSSHKey(tb testing.TB, passphrase string) []byte {
	tb.Helper()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		tb.Fatal(err)
	}
	var block *pem.Block
	if passphrase == "" {
		block, err = ssh.MarshalPrivateKey(priv, "test")
	} else {
		block, err = ssh.MarshalPrivateKeyWithPassphrase(priv, "test", []byte(passphrase))
	}
	if err != nil {
		tb.Fatal(err)
	}
	return pem.EncodeToMemory(block)
}

// newOpenPGPKey is a new ed25519 OpenPGP key, armored: the private key (encrypted when passphrase is
// set) and the public key.
func newOpenPGPKey(tb testing.TB, passphrase string) (private, public []byte) {
	tb.Helper()
	cfg := &packet.Config{Algorithm: packet.PubKeyAlgoEdDSA}
	e, err := openpgp.NewEntity("gitops-reverser", "test", "bot@example.com", cfg)
	if err != nil {
		tb.Fatal(err)
	}
	if passphrase != "" {
		if err := e.EncryptPrivateKeys([]byte(passphrase), cfg); err != nil {
			tb.Fatal(err)
		}
	}
	armored := func(typ string, write func(w *bytes.Buffer) error) []byte {
		var buf bytes.Buffer
		w, err := armor.Encode(&buf, typ, nil)
		if err != nil {
			tb.Fatal(err)
		}
		var raw bytes.Buffer
		if err := write(&raw); err != nil {
			tb.Fatal(err)
		}
		if _, err := w.Write(raw.Bytes()); err != nil {
			tb.Fatal(err)
		}
		if err := w.Close(); err != nil {
			tb.Fatal(err)
		}
		return buf.Bytes()
	}
	private = armored(openpgp.PrivateKeyType, func(w *bytes.Buffer) error { return e.SerializePrivateWithoutSigning(w, nil) })
	public = armored(openpgp.PublicKeyType, func(w *bytes.Buffer) error { return e.Serialize(w) })
	return private, public
}

func signingSecret(data map[string][]byte) *corev1.Secret {
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "signing"}, Data: data}
}

func mustSigner(tb testing.TB, format string, key []byte, passphrase string) signer {
	tb.Helper()
	data := map[string][]byte{keySigningKey: key}
	if passphrase != "" {
		data[keyPassphrase] = []byte(passphrase)
	}
	s, err := signerFrom(format, signingSecret(data))
	if err != nil {
		tb.Fatal(err)
	}
	return s
}

func TestUnusableSigningKeysAreRefusedWithTheReason(t *testing.T) {
	openPGPPrivate, openPGPPublic := newOpenPGPKey(t, "")
	encryptedPGP, _ := newOpenPGPKey(t, "s3cret")
	cases := []struct {
		name, format string
		data         map[string][]byte
		want         string
	}{
		{"no key", SigningSSH, map[string][]byte{"other": []byte("x")}, "has no signingKey"},
		{"not a key", SigningSSH, map[string][]byte{keySigningKey: []byte("hello")}, "not a usable ssh signing key"},
		{"an ssh key for openpgp", SigningOpenPGP, map[string][]byte{keySigningKey: newSSHKey(t, "")}, "not a usable openpgp signing key"},
		{"an openpgp key for ssh", SigningSSH, map[string][]byte{keySigningKey: openPGPPrivate}, "not a usable ssh signing key"},
		{"an encrypted ssh key without its passphrase", SigningSSH, map[string][]byte{keySigningKey: newSSHKey(t, "s3cret")}, "add its passphrase"},
		{"a wrong ssh passphrase", SigningSSH, map[string][]byte{keySigningKey: newSSHKey(t, "s3cret"), keyPassphrase: []byte("nope")}, "not a usable ssh"},
		{"an encrypted openpgp key without its passphrase", SigningOpenPGP, map[string][]byte{keySigningKey: encryptedPGP}, "add its passphrase"},
		{"a wrong openpgp passphrase", SigningOpenPGP, map[string][]byte{keySigningKey: encryptedPGP, keyPassphrase: []byte("nope")}, "decrypt"},
		{"a public openpgp key", SigningOpenPGP, map[string][]byte{keySigningKey: openPGPPublic}, "public key only"},
		{"an unknown format", "x509", map[string][]byte{keySigningKey: newSSHKey(t, "")}, "unknown commit signing format"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := signerFrom(c.format, signingSecret(c.data))
			if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "team/signing") && c.format != "x509" {
				t.Fatalf("err = %v, want one naming the Secret and saying %q", err, c.want)
			}
			if !errors.As(err, new(errSecret)) {
				t.Errorf("err is a %T, want errSecret (the user must fix the Secret)", err)
			}
		})
	}
	for name, c := range map[string]struct {
		format, passphrase string
		key                []byte
	}{
		"encrypted ssh":     {SigningSSH, "s3cret", newSSHKey(t, "s3cret")},
		"encrypted openpgp": {SigningOpenPGP, "s3cret", encryptedPGP},
	} {
		if s := mustSigner(t, c.format, c.key, c.passphrase); s.public().Fingerprint == "" {
			t.Errorf("%s: no fingerprint", name)
		}
	}
}

// signedWorker starts a worker that signs with s and returns it with its bare repository.
func signedWorker(t *testing.T, srv *testenv.GitServer, repo string, s signer) (*testWorker, string) {
	t.Helper()
	url := MustRepo(t, srv, repo)
	w := StartWorker(t, url, "", BatchLimits{Quiet: 10 * time.Millisecond}, func(c *WorkerConfig) { c.signer = s })
	return w, filepath.Join(srv.Root, repo+".git")
}

// TestSignedCommitsVerifyWithGit pushes commits signed with an ssh and an openpgp key, one of
// them replayed on a tip another writer pushed meanwhile, and verifies every commit the worker
// wrote with plain git verify-commit: ssh-keygen and gpg are the judges, not our code.
func TestSignedCommitsVerifyWithGit(t *testing.T) {
	sshPrivate := newSSHKey(t, "")
	parsed, err := ssh.ParsePrivateKey(sshPrivate)
	if err != nil {
		t.Fatal(err)
	}
	pgpPrivate, pgpPublic := newOpenPGPKey(t, "")
	for _, c := range []struct {
		format string
		signer signer
		public string // derived here, not by the code under test
		verify func(tb testing.TB, gitDir, rev, publicKey string) (string, error)
	}{
		{SigningSSH, mustSigner(t, SigningSSH, sshPrivate, ""), string(ssh.MarshalAuthorizedKey(parsed.PublicKey())), testenv.VerifySSHCommit},
		{SigningOpenPGP, mustSigner(t, SigningOpenPGP, pgpPrivate, ""), string(pgpPublic), testenv.VerifyOpenPGPCommit},
	} {
		t.Run(c.format, func(t *testing.T) {
			srv := MustGitServer(t)
			repo := "signed-" + c.format
			w, gitDir := signedWorker(t, srv, repo, c.signer)
			MustEnqueue(t, w, Change{Path: cmPath("a"), Content: configMap("a", "1", 100)})
			MustFlush(t, w)
			theirs, err := srv.PushCommit(repo, "main", testenvSig("dave"), "by hand", map[string]string{"manual.txt": "x\n"}, nil)
			if err != nil {
				t.Fatal(err)
			}
			MustEnqueue(t, w, Change{Path: cmPath("b"), Content: configMap("b", "1", 100)})
			MustFlush(t, w)
			if got := w.metric(t, "rebase_retries_total"); got == 0 {
				t.Fatal("the second push was not replayed on the other writer's tip")
			}
			ours := 0
			for _, commit := range mustLog(t, srv, repo) {
				out, err := c.verify(t, gitDir, commit.SHA, c.public)
				switch {
				case commit.SHA == theirs && err == nil:
					t.Errorf("the other writer's unsigned commit verifies: %s", out)
				case commit.SHA != theirs && err != nil:
					t.Errorf("commit %s by %s does not verify: %v\n%s", commit.SHA, commit.AuthorName, err, out)
				case commit.SHA != theirs:
					ours++
				}
			}
			if ours != 2 {
				t.Errorf("%d commits of the worker verified, want 2", ours)
			}
			// The key the status shows users is one that verifies.
			if out, err := c.verify(t, gitDir, "main", c.signer.public().PublicKey); err != nil {
				t.Errorf("the published public key does not verify the tip: %v\n%s", err, out)
			}
			if got := w.metric(t, "commits_signed_total"); got != 2 {
				t.Errorf("commits_signed_total = %v, want 2", got)
			}
		})
	}
}

// TestAnotherKeyDoesNotVerify: verification is against the key the status shows, not any key.
func TestAnotherKeyDoesNotVerify(t *testing.T) {
	srv := MustGitServer(t)
	w, gitDir := signedWorker(t, srv, "other-key", mustSigner(t, SigningSSH, newSSHKey(t, ""), ""))
	MustEnqueue(t, w, Change{Path: cmPath("a"), Content: configMap("a", "1", 100)})
	MustFlush(t, w)
	other := mustSigner(t, SigningSSH, newSSHKey(t, ""), "")
	if out, err := testenv.VerifySSHCommit(t, gitDir, "main", other.public().PublicKey); err == nil {
		t.Fatalf("a commit verifies with a key that did not sign it:\n%s", out)
	}
}

// BenchmarkSignCommit measures signing one commit of the usual size, per format.
func BenchmarkSignCommit(b *testing.B) {
	private, _ := newOpenPGPKey(b, "")
	tree, parent := plumbing.NewHash("4b825dc642cb6eb9a060e54bf8d69288fbee4904"), plumbing.NewHash("0123456789abcdef0123456789abcdef01234567")
	commit := encodeCommit(tree, parent, Signature{Name: "Alice", Email: "alice@example.com"}, testBot,
		"update configmaps/default/web\n\nX-Trailer: yes\n", time.Now())
	for _, c := range []struct {
		format string
		key    []byte
	}{{SigningSSH, newSSHKey(b, "")}, {SigningOpenPGP, private}} {
		s := mustSigner(b, c.format, c.key, "")
		b.Run(c.format+"-ed25519", func(b *testing.B) {
			for b.Loop() {
				if _, err := signCommit(commit, s); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
