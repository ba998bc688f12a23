package gitsecrets

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/configbutler/gitops-reverser/gitops"
	"github.com/configbutler/gitops-reverser/layout"
	"github.com/configbutler/gitops-reverser/testenv"
)

// remotes is a running pool and Repositories wired as the daemon wires them, for repositories
// that name no Secret; the OnChange calls of both are counted.
type remotes struct {
	pool    *gitops.Pool
	repos   *Repositories
	changes atomic.Int64
}

func startRemotes(t *testing.T) *remotes {
	t.Helper()
	rm := &remotes{}
	rm.pool = gitops.NewPool(gitops.PoolConfig{
		WorkDir:  t.TempDir(),
		Limits:   gitops.BatchLimits{Quiet: 10 * time.Millisecond},
		Identity: gitops.Identity{Committer: testBot, Bot: testBot},
		OnChange: func() { rm.changes.Add(1) },
	})
	rm.repos = New(Config{Pool: rm.pool, WorkDir: t.TempDir(), OnChange: func() { rm.changes.Add(1) }})
	rm.pool.OnRemoteWorks(rm.repos.RemoteWorks)
	testenv.Run(t, rm.pool)
	testenv.Run(t, rm.repos)
	return rm
}

// state declares one repository and returns its state.
func (rm *remotes) state(r Repository) RepoState {
	return rm.repos.SetRepositories(context.Background(), []Repository{r})[r.Name]
}

func mustRepo(t *testing.T, srv *testenv.GitServer, name string) {
	t.Helper()
	if _, err := srv.CreateRepo(name); err != nil {
		t.Fatal(err)
	}
}

func TestRemotesAreCheckedInTheBackground(t *testing.T) {
	srv := testenv.MustGitServer(t, "user", "pass")
	mustRepo(t, srv, "up")
	rm := startRemotes(t)
	up := Repository{Name: "ns/up", URL: srv.AuthURL("up")}
	if s := rm.state(up); !s.Usable || s.Reason != "Checking" {
		t.Fatalf("first state = %+v, want usable while the first check runs", s)
	}
	testenv.Eventually(t, 30*time.Second, "the remote found reachable", func() (bool, string) {
		s := rm.state(up)
		return s.Checked && s.Reachable && s.Reason == "Reachable", fmt.Sprintf("%+v", s)
	})
	if rm.changes.Load() == 0 {
		t.Error("the owner was not told that the check ended")
	}

	down := Repository{Name: "ns/down", URL: "http://" + testenv.FreeAddr(t) + "/nothing.git"}
	testenv.Eventually(t, 30*time.Second, "a remote where nothing listens found unreachable", func() (bool, string) {
		s := rm.state(down)
		return s.Checked && !s.Reachable && s.Reason == "Unreachable" && s.Usable, fmt.Sprintf("%+v", s)
	})
}

// TestPushesTellTheOwnerAndProveTheRemote: the owner hears at once when a worker starts and
// stops failing, without polling, and a push that lands proves the remote reachable again.
func TestPushesTellTheOwnerAndProveTheRemote(t *testing.T) {
	srv := testenv.MustGitServer(t, "user", "pass")
	mustRepo(t, srv, "flaky")
	url := srv.AuthURL("flaky")
	rm := startRemotes(t)
	repo := Repository{Name: "ns/flaky", URL: url}
	testenv.Eventually(t, 30*time.Second, "the remote found reachable", func() (bool, string) {
		s := rm.state(repo)
		return s.Reachable, fmt.Sprintf("%+v", s)
	})
	rm.pool.SetWorkers([]gitops.Branch{{Repo: "ns/flaky", Branch: "main"}})
	sink, _ := rm.pool.Sink(url, "main")
	enqueue := func(name string) {
		t.Helper()
		c := gitops.Change{Path: layout.Path("clusters/prod", "", "configmaps", "default", name), Content: []byte("name: " + name + "\n")}
		if err := sink.Enqueue(c); err != nil {
			t.Fatal(err)
		}
	}
	status := func() gitops.WorkerStatus {
		s, _ := rm.pool.WorkerStatus(url, "main")
		return s
	}
	enqueue("before")
	testenv.Eventually(t, 30*time.Second, "the first push", func() (bool, string) {
		s := status()
		return s.LastPushed != "", fmt.Sprintf("%+v", s)
	})

	srv.SetAvailable(false)
	rm.repos.Recheck()
	testenv.Eventually(t, 30*time.Second, "the remote found unreachable", func() (bool, string) {
		s := rm.state(repo)
		return s.Checked && !s.Reachable, fmt.Sprintf("%+v", s)
	})
	told := rm.changes.Load()
	enqueue("during")
	testenv.Eventually(t, 30*time.Second, "the owner told of the failing push", func() (bool, string) {
		s := status()
		return rm.changes.Load() > told && s.LastError != nil && !s.FailingSince.IsZero() && s.Failures > 0, fmt.Sprintf("%+v", s)
	})

	told = rm.changes.Load()
	srv.SetAvailable(true)
	testenv.Eventually(t, 30*time.Second, "the owner told the push landed", func() (bool, string) {
		s := status()
		return rm.changes.Load() > told && s.LastError == nil && s.Failures == 0 && s.Pending == 0, fmt.Sprintf("%+v", s)
	})
	if s := rm.state(repo); !s.Reachable {
		t.Errorf("after a push landed the repository is %+v, want reachable without waiting for a recheck", s)
	}
}

// TestChecksAskedForBeforeRunStartWithIt: a repository declared before Run is checked once Run
// starts, not before (New and SetRepositories start nothing), and is then found reachable.
func TestChecksAskedForBeforeRunStartWithIt(t *testing.T) {
	srv := testenv.MustGitServer(t, "user", "pass")
	mustRepo(t, srv, "early")
	var changes atomic.Int64
	repos := New(Config{WorkDir: t.TempDir(), Pool: gitops.NewPool(gitops.PoolConfig{WorkDir: t.TempDir()}),
		OnChange: func() { changes.Add(1) }})
	early := Repository{Name: "ns/early", URL: srv.AuthURL("early")}
	if s := repos.SetRepositories(context.Background(), []Repository{early})[early.Name]; s.Checked || s.Reason != "Checking" {
		t.Fatalf("state before Run = %+v, want a check waiting", s)
	}
	testenv.Run(t, repos)
	testenv.Eventually(t, 30*time.Second, "the remote found reachable once Run started", func() (bool, string) {
		s := repos.SetRepositories(context.Background(), []Repository{early})[early.Name]
		return s.Checked && s.Reachable, fmt.Sprintf("%+v", s)
	})
	if changes.Load() == 0 {
		t.Error("the owner was not told that the check ended")
	}
}
