package gitedits

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-git/go-git/v5/plumbing/transport/http"
	"go.uber.org/goleak"

	"github.com/configbutler/gitops-reverser/gitops"
	"github.com/configbutler/gitops-reverser/layout"
	"github.com/configbutler/gitops-reverser/testenv"
)

// TestMain fails the package when a goroutine outlives its test: every worker a test starts must
// be joined by its Run.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// net/http keeps idle keep-alive connections to the test Git servers in the default
		// transport; they are the standard library's, not ours.
		goleak.IgnoreTopFunction("net/http.(*persistConn).readLoop"),
		goleak.IgnoreTopFunction("net/http.(*persistConn).writeLoop"),
		goleak.IgnoreTopFunction("internal/poll.runtime_pollWait"),
	)
}

var testBot = gitops.Signature{Name: "gitops-reverser", Email: "bot@configbutler.ai"}

// ours recognises the test workers' commits by the identity's trailer.
func ours(message string) bool {
	return strings.Contains(message, "\nX-ConfigButler-ClusterUID: uid-1\n")
}

// MustGitServer starts a smart-HTTP Git server for the test.
func MustGitServer(tb testing.TB) *testenv.GitServer {
	tb.Helper()
	return testenv.MustGitServer(tb, "user", "pass")
}

// MustRepo creates an empty repository and returns its URL.
func MustRepo(tb testing.TB, srv *testenv.GitServer, name string) string {
	tb.Helper()
	url, err := srv.CreateRepo(name)
	if err != nil {
		tb.Fatal(err)
	}
	return url
}

// testWorker is a running worker on the branch main, read through Branch.
type testWorker struct {
	*gitops.Worker
	branch Branch
}

// oneWorker is Git with the one worker, whatever the remote and branch asked for.
type oneWorker struct{ w *gitops.Worker }

func (o oneWorker) Fetch(ctx context.Context, _, _ string) (gitops.FetchResult, error) {
	return o.w.Fetch(ctx)
}

func (o oneWorker) Read(ctx context.Context, _, _ string, fn func(gitops.Reader) error) error {
	return o.w.Read(ctx, fn)
}

func (w *testWorker) Edits(ctx context.Context, q Query) (Result, error) {
	return w.branch.Edits(ctx, q)
}
func (w *testWorker) File(ctx context.Context, commit, path string) ([]byte, error) {
	return w.branch.File(ctx, commit, path)
}

// StartWorker runs a worker on url/main until the test ends.
func StartWorker(tb testing.TB, url string) *testWorker {
	tb.Helper()
	return startWorkerWith(tb, url, gitops.BatchLimits{})
}

// startWorkerWith is StartWorker with the given batch limits, and whatever opts change.
func startWorkerWith(tb testing.TB, url string, limits gitops.BatchLimits, opts ...func(*gitops.WorkerConfig)) *testWorker {
	tb.Helper()
	cfg := gitops.WorkerConfig{
		Remote:  gitops.Remote{URL: url, Branch: "main", Auth: &http.BasicAuth{Username: "user", Password: "pass"}},
		WorkDir: tb.TempDir(),
		Limits:  limits,
		Identity: gitops.Identity{Committer: testBot, Bot: testBot, Trailers: [][2]string{
			{"X-ConfigButler-ClusterUID", "uid-1"}, {"X-ConfigButler-InstanceID", "pod-0"},
		}},
		Log: slog.New(slog.DiscardHandler),
	}
	for _, o := range opts {
		o(&cfg)
	}
	w := gitops.NewWorker(cfg)
	testenv.Run(tb, w)
	return &testWorker{Worker: w, branch: Branch{Git: oneWorker{w}, URL: url, Name: "main"}}
}

// startPool runs a pool without workers until the test ends.
func startPool(tb testing.TB) *gitops.Pool {
	tb.Helper()
	p := gitops.NewPool(gitops.PoolConfig{WorkDir: tb.TempDir()})
	testenv.Run(tb, p)
	return p
}

// MustEnqueue enqueues changes and fails the test on error.
func MustEnqueue(tb testing.TB, w *testWorker, changes ...gitops.Change) {
	tb.Helper()
	for _, c := range changes {
		if err := w.Enqueue(c); err != nil {
			tb.Fatal(err)
		}
	}
}

// MustFlush flushes and waits for the push, bounded by a deadline.
func MustFlush(tb testing.TB, w *testWorker) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := w.Flush(ctx); err != nil {
		tb.Fatalf("flush: %v (status %+v)", err, w.Status())
	}
}

// configMap renders a ConfigMap of about size bytes.
func configMap(name, value string, size int) []byte {
	head := fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: %s\n  namespace: default\ndata:\n  value: %q\n  pad: \"", name, value)
	pad := max(size-len(head)-2, 0)
	return []byte(head + strings.Repeat("x", pad) + "\"\n")
}

// cmPath is the file of ConfigMap name in namespace default.
func cmPath(name string) string {
	return layout.Path("clusters/prod", "", "configmaps", "default", name)
}

// mustLog lists the commits of main, newest first.
func mustLog(tb testing.TB, srv *testenv.GitServer, repo string) []testenv.Commit {
	tb.Helper()
	log, err := srv.Log(repo, "main")
	if err != nil {
		tb.Fatal(err)
	}
	return log
}

// mustPush is srv.PushCommit, failing the test on error; it returns the pushed commit.
func mustPush(tb testing.TB, srv *testenv.GitServer, repo, branch string, author testenv.Signature, message string,
	write map[string]string, remove []string) string {
	tb.Helper()
	sha, err := srv.PushCommit(repo, branch, author, message, write, remove)
	if err != nil {
		tb.Fatal(err)
	}
	return sha
}

// testenvSig is a competing user.
func testenvSig(name string) testenv.Signature {
	return testenv.Signature{Name: name, Email: name + "@example.com"}
}

// largePath is the file of ConfigMap i in namespace ns of the large repository.
func largePath(ns, i int) string {
	return layout.Path("clusters/prod", "", "configmaps", fmt.Sprintf("ns-%03d", ns), fmt.Sprintf("cm-%05d", i))
}

// MustLargeRepo creates a repository with namespaces×perNamespace ConfigMaps of ~1 KiB in one
// commit, with git fast-import straight into the bare repository.
func MustLargeRepo(tb testing.TB, srv *testenv.GitServer, name string, namespaces, perNamespace int) string {
	tb.Helper()
	url := MustRepo(tb, srv, name)
	var stream bytes.Buffer
	stream.WriteString("commit refs/heads/main\ncommitter seed <seed@example.com> 1700000000 +0000\ndata 5\nseed\n")
	for ns := range namespaces {
		for i := range perNamespace {
			content := configMap(fmt.Sprintf("cm-%05d", i), fmt.Sprint(ns), 1024)
			fmt.Fprintf(&stream, "M 100644 inline %s\ndata %d\n", largePath(ns, i), len(content))
			stream.Write(content)
			stream.WriteString("\n")
		}
	}
	cmd := exec.Command("git", "--git-dir="+filepath.Join(srv.Root, name+".git"), "fast-import", "--quiet")
	cmd.Stdin = &stream
	if out, err := cmd.CombinedOutput(); err != nil {
		tb.Fatalf("fast-import: %v\n%s", err, strings.TrimSpace(string(out)))
	}
	return url
}

// personClone clones repo as the person erin and returns a function running git in the clone
// (failing the test on error) and returning its output.
func personClone(t *testing.T, srv *testenv.GitServer, repo string) func(args ...string) string {
	t.Helper()
	home := t.TempDir()
	config := filepath.Join(home, "gitconfig")
	if err := os.WriteFile(config, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(home, "clone")
	env := append(os.Environ(), "HOME="+home, "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL="+config,
		"GIT_TERMINAL_PROMPT=0", "GIT_AUTHOR_NAME=erin", "GIT_AUTHOR_EMAIL=erin@example.com",
		"GIT_COMMITTER_NAME=erin", "GIT_COMMITTER_EMAIL=erin@example.com")
	run := func(wd string, args ...string) string {
		t.Helper()
		cmd := exec.Command("git", args...)
		cmd.Dir, cmd.Env = wd, env
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	run(home, "clone", "-q", "--branch", "main", srv.AuthURL(repo), dir)
	return func(args ...string) string {
		t.Helper()
		return run(dir, args...)
	}
}

// writeFile writes a file into the clone of git.
func writeFile(t *testing.T, git func(args ...string) string, path, content string) {
	t.Helper()
	dir := strings.TrimSpace(git("rev-parse", "--show-toplevel"))
	full := filepath.Join(dir, filepath.FromSlash(path))
	if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}
