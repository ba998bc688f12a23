package gitsecrets

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-git/go-git/v5/plumbing/transport/http"
	"golang.org/x/crypto/ssh"

	"github.com/configbutler/gitops-reverser/gitops"
	"github.com/configbutler/gitops-reverser/layout"
	"github.com/configbutler/gitops-reverser/metrics"
	"github.com/configbutler/gitops-reverser/testenv"
)

// testWorker is a running worker with its metrics.
type testWorker struct {
	*gitops.Worker
	reg *metrics.Registry
}

// signedWorker starts a worker on main that signs with s until the test ends, and returns it
// with its bare repository.
func signedWorker(t *testing.T, srv *testenv.GitServer, repo string, s gitops.Signer) (*testWorker, string) {
	t.Helper()
	url, err := srv.CreateRepo(repo)
	if err != nil {
		t.Fatal(err)
	}
	reg := metrics.New()
	w := gitops.NewWorker(gitops.WorkerConfig{
		Remote:   gitops.Remote{URL: url, Branch: "main", Auth: &http.BasicAuth{Username: "user", Password: "pass"}},
		WorkDir:  t.TempDir(),
		Limits:   gitops.BatchLimits{Quiet: 10 * time.Millisecond},
		Identity: gitops.Identity{Committer: testBot, Bot: testBot},
		Metrics:  reg.Mirror,
		Signer:   s,
	})
	testenv.Run(t, w)
	return &testWorker{Worker: w, reg: reg}, filepath.Join(srv.Root, repo+".git")
}

var testBot = gitops.Signature{Name: "gitops-reverser", Email: "bot@configbutler.ai"}

// metric returns the current value of a mirror collector by its short name.
func (w *testWorker) metric(tb testing.TB, name string) float64 {
	tb.Helper()
	values, err := w.reg.Gather()
	if err != nil {
		tb.Fatal(err)
	}
	return values[metrics.Namespace+"_"+name]
}

// mustCommit enqueues a file and waits until it is pushed.
func mustCommit(t *testing.T, w *testWorker, name string) {
	t.Helper()
	p := layout.Path("clusters/prod", "", "configmaps", "default", name)
	if err := w.Enqueue(gitops.Change{Path: p, Content: []byte("name: " + name + "\n")}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := w.Flush(ctx); err != nil {
		t.Fatalf("flush: %v (status %+v)", err, w.Status())
	}
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
		signer gitops.Signer
		public string // derived here, not by the code under test
		verify func(tb testing.TB, gitDir, rev, publicKey string) (string, error)
	}{
		{gitops.SigningSSH, mustSigner(t, gitops.SigningSSH, sshPrivate, ""), string(ssh.MarshalAuthorizedKey(parsed.PublicKey())), testenv.VerifySSHCommit},
		{gitops.SigningOpenPGP, mustSigner(t, gitops.SigningOpenPGP, pgpPrivate, ""), string(pgpPublic), testenv.VerifyOpenPGPCommit},
	} {
		t.Run(c.format, func(t *testing.T) {
			srv := testenv.MustGitServer(t, "user", "pass")
			repo := "signed-" + c.format
			w, gitDir := signedWorker(t, srv, repo, c.signer)
			mustCommit(t, w, "a")
			theirs, err := srv.PushCommit(repo, "main", testenv.Signature{Name: "dave", Email: "dave@example.com"}, "by hand", map[string]string{"manual.txt": "x\n"}, nil)
			if err != nil {
				t.Fatal(err)
			}
			mustCommit(t, w, "b")
			if got := w.metric(t, "rebase_retries_total"); got == 0 {
				t.Fatal("the second push was not replayed on the other writer's tip")
			}
			ours := 0
			log, err := srv.Log(repo, "main")
			if err != nil {
				t.Fatal(err)
			}
			for _, commit := range log {
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
	srv := testenv.MustGitServer(t, "user", "pass")
	w, gitDir := signedWorker(t, srv, "other-key", mustSigner(t, gitops.SigningSSH, newSSHKey(t, ""), ""))
	mustCommit(t, w, "a")
	other := mustSigner(t, gitops.SigningSSH, newSSHKey(t, ""), "")
	if out, err := testenv.VerifySSHCommit(t, gitDir, "main", other.Public().PublicKey); err == nil {
		t.Fatalf("a commit verifies with a key that did not sign it:\n%s", out)
	}
}

// BenchmarkSignCommit measures signing one commit of the usual size, per format.
func BenchmarkSignCommit(b *testing.B) {
	private, _ := newOpenPGPKey(b, "")
	commit := []byte("tree 4b825dc642cb6eb9a060e54bf8d69288fbee4904\nparent 0123456789abcdef0123456789abcdef01234567\n" +
		"author Alice <alice@example.com> 1700000000 +0000\ncommitter gitops-reverser <bot@configbutler.ai> 1700000000 +0000\n\n" +
		"update configmaps/default/web\n\nX-Trailer: yes\n")
	for _, c := range []struct {
		format string
		key    []byte
	}{{gitops.SigningSSH, newSSHKey(b, "")}, {gitops.SigningOpenPGP, private}} {
		s := mustSigner(b, c.format, c.key, "")
		b.Run(c.format+"-ed25519", func(b *testing.B) {
			for b.Loop() {
				if _, err := s.Sign(commit); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
