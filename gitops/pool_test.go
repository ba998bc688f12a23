package gitops

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/configbutler/gitops-reverser/testenv"
)

// testPool is a running pool whose OnChange calls are counted.
type testPool struct {
	*Pool
	changes atomic.Int64
}

func startPool(t *testing.T) *testPool {
	t.Helper()
	tp := &testPool{}
	tp.Pool = NewPool(PoolConfig{
		WorkDir:  t.TempDir(),
		Limits:   BatchLimits{Quiet: 10 * time.Millisecond},
		Identity: Identity{Committer: testBot, Bot: testBot, Trailers: testTrailers},
		Log:      testLogger(t),
		OnChange: func() { tp.changes.Add(1) },
	})
	testenv.Run(t, tp)
	return tp
}

// TestPoolOwnsOneWorkerPerBranch: a sink per (repository, branch), fetch on demand, a status
// snapshot, and workers stopped when no longer asked for.
func TestPoolOwnsOneWorkerPerBranch(t *testing.T) {
	srv := MustGitServer(t)
	MustRepo(t, srv, "state")
	url := srv.AuthURL("state")
	tp := startPool(t)
	tp.SetRepositories([]Repository{{Name: "ns/state", URL: url}})
	tp.SetWorkers([]Branch{{Repo: "ns/state", Branch: "main"}, {Repo: "ns/state", Branch: "main"}, {Repo: "ns/missing", Branch: "main"}})
	if got := len(tp.Status()); got != 1 {
		t.Fatalf("%d workers, want one for the one branch of a known repository", got)
	}
	sink, ok := tp.Sink(url, "main")
	if !ok {
		t.Fatal("no sink for the branch")
	}
	if err := sink.Enqueue(Change{Path: cmPath("web"), Content: configMap("web", "1", 100)}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 30*time.Second, "the change on the remote", func() (bool, string) {
		files := testenv.MustFiles(t, srv, "state")
		return slices.Contains(files, cmPath("web")), fmt.Sprint(files)
	})
	testenv.Eventually(t, 10*time.Second, "the status to show the push", func() (bool, string) {
		s, _ := tp.WorkerStatus(url, "main")
		return s.LastPushed != "" && s.Pending == 0, fmt.Sprintf("%+v", s)
	})

	theirs, err := srv.PushCommit("state", "main", testenvSig("dave"), "manual edit", map[string]string{"README.md": "hi\n"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	got, err := tp.Fetch(context.Background(), url, "main")
	if err != nil || got.Tip != theirs {
		t.Fatalf("fetch now = %+v, %v; want the other user's tip %s", got, err, theirs)
	}

	tp.SetWorkers(nil)
	if _, ok := tp.Sink(url, "main"); ok {
		t.Error("the worker is still offered after it was no longer asked for")
	}
	if _, err := tp.Fetch(context.Background(), url, "main"); !errors.Is(err, ErrStopped) {
		t.Errorf("fetch without a worker: %v, want ErrStopped", err)
	}
}

// TestPoolStartsWhatWasAskedForBeforeRun: a pool is built, told its repository and branches and
// handed a change before it runs (the watch may get there first); Run starts the worker, which
// pushes the change. A branch asked for and dropped before Run does not hold up its successor.
func TestPoolStartsWhatWasAskedForBeforeRun(t *testing.T) {
	srv := MustGitServer(t)
	MustRepo(t, srv, "early")
	url := srv.AuthURL("early")
	p := NewPool(PoolConfig{
		WorkDir:  t.TempDir(),
		Limits:   BatchLimits{Quiet: 10 * time.Millisecond},
		Identity: Identity{Committer: testBot, Bot: testBot, Trailers: testTrailers},
		Log:      testLogger(t),
	})
	p.SetRepositories([]Repository{{Name: "ns/early", URL: url}})
	p.SetWorkers([]Branch{{Repo: "ns/early", Branch: "other"}})
	p.SetWorkers([]Branch{{Repo: "ns/early", Branch: "main"}})
	p.SetWorkers([]Branch{{Repo: "ns/early", Branch: "main"}, {Repo: "ns/early", Branch: "other"}})
	sink, ok := p.Sink(url, "main")
	if !ok {
		t.Fatal("no sink for the branch asked for before Run")
	}
	if err := sink.Enqueue(Change{Path: cmPath("early"), Content: configMap("early", "1", 100)}); err != nil {
		t.Fatal(err)
	}
	testenv.Run(t, p)
	testenv.Eventually(t, 30*time.Second, "the change on the remote", func() (bool, string) {
		files := testenv.MustFiles(t, srv, "early")
		return slices.Contains(files, cmPath("early")), fmt.Sprint(files)
	})
	if _, err := p.Fetch(t.Context(), url, "other"); err != nil {
		t.Errorf("the branch dropped and asked for again before Run does not run: %v", err)
	}
}
