package gitops

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/ProtonMail/go-crypto/openpgp"
	"github.com/ProtonMail/go-crypto/openpgp/armor"
	"github.com/ProtonMail/go-crypto/openpgp/packet"
	"github.com/go-git/go-git/v5/plumbing"
	"golang.org/x/crypto/ssh"

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

func mustSigner(tb testing.TB, format string, key []byte, passphrase string) Signer {
	tb.Helper()
	s, err := NewSigner(format, key, []byte(passphrase))
	if err != nil {
		tb.Fatal(err)
	}
	return s
}

// TestNewSignerNamesWhatIsWrong: an unknown format and an encrypted key without its passphrase
// are told apart, so the reader of the key's Secret can say what to fix; with the passphrase
// the key signs.
func TestNewSignerNamesWhatIsWrong(t *testing.T) {
	encryptedPGP, _ := newOpenPGPKey(t, "s3cret")
	encryptedSSH := newSSHKey(t, "s3cret")
	if _, err := NewSigner("x509", newSSHKey(t, ""), nil); !errors.Is(err, ErrUnknownSigningFormat) {
		t.Errorf("format x509: %v, want ErrUnknownSigningFormat", err)
	}
	for format, key := range map[string][]byte{SigningSSH: encryptedSSH, SigningOpenPGP: encryptedPGP} {
		if _, err := NewSigner(format, key, nil); !errors.Is(err, ErrKeyEncrypted) {
			t.Errorf("%s key without its passphrase: %v, want ErrKeyEncrypted", format, err)
		}
		if s := mustSigner(t, format, key, "s3cret"); s.Public().Fingerprint == "" {
			t.Errorf("encrypted %s: no fingerprint", format)
		}
	}
}

// signedWorker starts a worker that signs with s and returns it with its bare repository.
func signedWorker(t *testing.T, srv *testenv.GitServer, repo string, s Signer) (*testWorker, string) {
	t.Helper()
	url := MustRepo(t, srv, repo)
	w := StartWorker(t, url, "", BatchLimits{Quiet: 10 * time.Millisecond}, func(c *WorkerConfig) { c.Signer = s })
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
		signer Signer
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
			if out, err := c.verify(t, gitDir, "main", c.signer.Public().PublicKey); err != nil {
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
	if out, err := testenv.VerifySSHCommit(t, gitDir, "main", other.Public().PublicKey); err == nil {
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
