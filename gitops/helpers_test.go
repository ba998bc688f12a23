package gitops

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/go-git/go-git/v5/plumbing/transport/http"

	"github.com/configbutler/gitops-reverser/layout"
	"github.com/configbutler/gitops-reverser/metrics"
	"github.com/configbutler/gitops-reverser/testenv"
)

var (
	testBot      = Signature{Name: "gitops-reverser", Email: "bot@configbutler.ai"}
	testTrailers = [][2]string{
		{"X-ConfigButler-ClusterUID", "uid-1"},
		{"X-ConfigButler-ControllerNS", "gitops-system"},
		{"X-ConfigButler-ControllerName", "gitops-reverser"},
		{"X-ConfigButler-InstanceID", "pod-0"},
	}
	// testRetry keeps retries quick so outage tests converge fast.
	testRetry = retryPolicy{min: 50 * time.Millisecond, max: time.Second, maxReplays: 5}
)

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

// testWorker is a running worker with its metrics.
type testWorker struct {
	*Worker
	reg  *metrics.Registry
	stop func() error
}

// StartWorker runs a worker on url/main with workDir (a fresh dir when empty) until the test ends;
// opts change its configuration before it starts.
func StartWorker(tb testing.TB, url, workDir string, limits BatchLimits, opts ...func(*WorkerConfig)) *testWorker {
	tb.Helper()
	if workDir == "" {
		workDir = tb.TempDir()
	}
	reg := metrics.New()
	cfg := WorkerConfig{
		Remote:   Remote{URL: url, Branch: "main", Auth: &http.BasicAuth{Username: "user", Password: "pass"}},
		WorkDir:  workDir,
		Limits:   limits,
		Identity: Identity{Committer: testBot, Bot: testBot, Trailers: testTrailers},
		Slots:    NewSlots(4, 1),
		Metrics:  reg.Mirror,
		Log:      testLogger(tb),
	}
	for _, o := range opts {
		o(&cfg)
	}
	w := NewWorker(cfg)
	w.retry = testRetry
	return &testWorker{Worker: w, reg: reg, stop: testenv.Run(tb, w)}
}

// metric returns the current value of a mirror collector by its short name.
func (w *testWorker) metric(tb testing.TB, name string) float64 {
	tb.Helper()
	values, err := w.reg.Gather()
	if err != nil {
		tb.Fatal(err)
	}
	return values[metrics.Namespace+"_"+name]
}

// MustEnqueue enqueues changes and fails the test on error.
func MustEnqueue(tb testing.TB, w *testWorker, changes ...Change) {
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

// testenvSig is a competing user.
func testenvSig(name string) testenv.Signature {
	return testenv.Signature{Name: name, Email: name + "@example.com"}
}

func testLogger(tb testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(testLogWriter{tb}, &slog.HandlerOptions{Level: slog.LevelInfo}))
}

// testLogWriter sends the worker's log to the test log.
type testLogWriter struct{ tb testing.TB }

func (w testLogWriter) Write(p []byte) (int, error) {
	w.tb.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}
