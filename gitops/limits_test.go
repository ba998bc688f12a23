package gitops

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-git/go-git/v5/plumbing/transport/http"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/configbutler/gitops-reverser/metrics"
	"github.com/configbutler/gitops-reverser/testenv"
)

// holders counts the goroutines holding a slot now and the most that ever held one at once.
type holders struct{ cur, peak atomic.Int64 }

func (h *holders) add(delta int64) {
	n := h.cur.Add(delta)
	for p := h.peak.Load(); n > p && !h.peak.CompareAndSwap(p, n); p = h.peak.Load() {
	}
}

func TestSlotsBoundConcurrentWorkers(t *testing.T) {
	cases := []struct {
		name                  string
		slots                 *Slots
		maxGlobal, maxPerRepo int // 0 = unbounded
		repos, branches       int
	}{
		{"one per repo, two globally", NewSlots(2, 1), 2, 1, 2, 4},
		{"global bound tighter than the repos", NewSlots(2, 2), 2, 2, 3, 4},
		{"per-repo bound only", NewSlots(0, 2), 0, 2, 3, 4},
		{"global bound only", NewSlots(3, 0), 3, 0, 2, 4},
		{"nil slots never block", nil, 0, 0, 2, 3},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := startSlotHolders(t, c.slots, c.repos, c.branches)
			// Let go of one holder at a time, each once every free slot is taken, so the bounds
			// are reached at every step and a slot handed out twice would show.
			saturated := func() int {
				n := 0
				for r := range h.left {
					n += bounded(int(h.left[r].Load()), c.maxPerRepo)
				}
				return bounded(n, c.maxGlobal)
			}
			for step := range c.repos * c.branches {
				testenv.Eventually(t, 10*time.Second, "every free slot taken", func() (bool, string) {
					if err := h.err(); err != nil {
						t.Fatal(err)
					}
					return int(h.global.cur.Load()) >= saturated(), fmt.Sprint(h.global.cur.Load())
				})
				h.release <- struct{}{}
				testenv.Eventually(t, 10*time.Second, "the released holder to finish", func() (bool, string) {
					return h.finished.Load() == int64(step+1), fmt.Sprint(h.finished.Load())
				})
			}

			want := bounded(c.repos*bounded(c.branches, c.maxPerRepo), c.maxGlobal)
			if got := int(h.global.peak.Load()); got != want {
				t.Errorf("%d goroutines held slots at once, want the bound of exactly %d", got, want)
			}
			for r := range h.perRepo {
				if got := int(h.perRepo[r].peak.Load()); got > bounded(c.branches, c.maxPerRepo) {
					t.Errorf("repo %d: %d goroutines held slots at once, want at most %d", r, got, c.maxPerRepo)
				}
			}
		})
	}
}

// slotHolders are goroutines, branches per repository, that each take a slot and hold it until
// told to let go, counting the holders globally and per repository.
type slotHolders struct {
	global   holders
	perRepo  []holders
	left     []atomic.Int64 // holders per repository not finished yet
	finished atomic.Int64
	release  chan struct{}
	errs     chan error
}

func startSlotHolders(t *testing.T, slots *Slots, repos, branches int) *slotHolders {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	h := &slotHolders{perRepo: make([]holders, repos), left: make([]atomic.Int64, repos),
		release: make(chan struct{}), errs: make(chan error, repos*branches)}
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	for r := range repos {
		h.left[r].Store(int64(branches))
		for range branches {
			wg.Go(func() { h.hold(ctx, slots, r) })
		}
	}
	return h
}

func (h *slotHolders) hold(ctx context.Context, slots *Slots, r int) {
	done, err := slots.acquire(ctx, fmt.Sprintf("https://git.example.com/repo-%d.git", r))
	if err != nil {
		h.errs <- err
		return
	}
	h.global.add(1)
	h.perRepo[r].add(1)
	select {
	case <-h.release:
	case <-ctx.Done(): // the test failed
	}
	h.perRepo[r].add(-1)
	h.global.add(-1)
	done()
	h.left[r].Add(-1)
	h.finished.Add(1)
}

// err is the first acquire that failed, if any.
func (h *slotHolders) err() error {
	select {
	case err := <-h.errs:
		return err
	default:
		return nil
	}
}

// bounded is min(n, limit), where a limit ≤ 0 means unbounded.
func bounded(n, limit int) int {
	if limit > 0 {
		return min(n, limit)
	}
	return n
}

func TestSlotsCancelledWaitGivesBackRepoSlot(t *testing.T) {
	slots := NewSlots(1, 1)
	const a, b = "https://git.example.com/a.git", "https://git.example.com/b.git"
	releaseA, err := slots.acquire(t.Context(), a)
	if err != nil {
		t.Fatal(err)
	}
	cancelled, cancel := context.WithCancel(t.Context())
	cancel()
	// b's repository slot is free but the global one is not: the wait ends with ctx, and the
	// repository slot taken meanwhile must be given back.
	if _, err := slots.acquire(cancelled, b); err == nil {
		t.Fatal("acquire with a full global slot and a cancelled context succeeded")
	}
	releaseA()
	ctx, cancelWait := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancelWait()
	releaseB, err := slots.acquire(ctx, b)
	if err != nil {
		t.Fatalf("acquire b after the cancelled wait: %v (its repository slot leaked)", err)
	}
	defer releaseB()
	if _, err := slots.acquire(cancelled, b); err == nil {
		t.Fatal("a second holder of b's only repository slot")
	}
}

// peakGauge is a gauge that also remembers its highest value and adds to a parent: the workers
// of one repository share one, whose parent is shared by every worker. Workers only call Add.
type peakGauge struct {
	prometheus.Gauge
	parent *peakGauge
	holders
}

func (g *peakGauge) Add(delta float64) {
	g.Gauge.Add(delta)
	g.add(int64(delta))
	if g.parent != nil {
		g.parent.Add(delta)
	}
}

func TestSlotsBoundConcurrentWorkersEndToEnd(t *testing.T) {
	const (
		maxGlobal, maxPerRepo = 2, 1
		branches, files       = 3, 10
		rounds                = 3
	)
	srv := MustGitServer(t)
	slots := NewSlots(maxGlobal, maxPerRepo)
	global := &peakGauge{Gauge: prometheus.NewGauge(prometheus.GaugeOpts{Name: "global_active"})}
	type branchWorker struct {
		repo, branch string
		w            *Worker
		active       *peakGauge
	}
	var workers []branchWorker
	for _, repo := range []string{"slots-a", "slots-b", "slots-c"} {
		url := MustRepo(t, srv, repo)
		reg := metrics.New()
		active := &peakGauge{Gauge: reg.Mirror.ActiveWorkers, parent: global}
		reg.Mirror.ActiveWorkers = active
		for b := range branches {
			branch := fmt.Sprintf("env-%d", b)
			w := startBranchWorker(t, url, branch, slots, reg.Mirror)
			workers = append(workers, branchWorker{repo, branch, w, active})
		}
	}
	content := func(bw branchWorker, i, round int) (string, []byte) {
		name := fmt.Sprintf("%s-%d", bw.branch, i)
		return cmPath(name), configMap(name, fmt.Sprint(round), 200)
	}
	for round := range rounds {
		for _, bw := range workers {
			for i := range files {
				path, data := content(bw, i, round)
				if err := bw.w.Enqueue(Change{Path: path, Content: data}); err != nil {
					t.Fatal(err)
				}
			}
		}
		var ws []*Worker
		for _, bw := range workers {
			ws = append(ws, bw.w)
		}
		flushAll(t, ws)
	}

	if got := global.peak.Load(); got > maxGlobal || got < 1 {
		t.Errorf("%d workers pushed at once, want between 1 and %d", got, maxGlobal)
	}
	for _, bw := range workers {
		if got := bw.active.peak.Load(); got > maxPerRepo {
			t.Errorf("%s: %d workers pushed at once, want at most %d", bw.repo, got, maxPerRepo)
		}
		want := map[string]string{}
		for i := range files {
			path, data := content(bw, i, rounds-1)
			want[path] = testenv.BlobHash(data)
		}
		mustTree(t, srv, bw.repo, bw.branch, want)
	}
	if n := global.cur.Load(); n != 0 {
		t.Errorf("active workers = %d after every flush, want 0", n)
	}
}

// startBranchWorker runs a worker on url/branch with shared slots and metrics until the test
// ends. Only Flush and the size limits commit: the batch timers are an hour.
func startBranchWorker(tb testing.TB, url, branch string, slots *Slots, m *metrics.Mirror) *Worker {
	tb.Helper()
	w := NewWorker(WorkerConfig{
		Remote:   Remote{URL: url, Branch: branch, Auth: &http.BasicAuth{Username: "user", Password: "pass"}},
		WorkDir:  tb.TempDir(),
		Limits:   BatchLimits{MaxWait: time.Hour, Quiet: time.Hour},
		Identity: Identity{Committer: testBot, Bot: testBot, Trailers: testTrailers},
		Slots:    slots,
		Metrics:  m,
		Log:      slog.New(slog.NewTextHandler(testLogWriter{tb}, &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	w.retry = testRetry
	testenv.Run(tb, w)
	return w
}

// flushAll flushes every worker at once and waits for every push to land.
func flushAll(tb testing.TB, workers []*Worker) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(tb.Context(), 60*time.Second)
	defer cancel()
	errs := make([]error, len(workers))
	var wg sync.WaitGroup
	for i, w := range workers {
		wg.Go(func() { errs[i] = w.Flush(ctx) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			tb.Fatalf("flush worker %d: %v (status %+v)", i, err, workers[i].Status())
		}
	}
}

// mustTree checks that branch of repo holds exactly the files of want (path → blob hash).
func mustTree(tb testing.TB, srv *testenv.GitServer, repo, branch string, want map[string]string) {
	tb.Helper()
	got, err := srv.FileHashes(repo, branch)
	if err != nil {
		tb.Fatal(err)
	}
	for path, h := range want {
		if got[path] != h {
			tb.Errorf("%s@%s: %s has blob %q, want %q", repo, branch, path, got[path], h)
		}
	}
	for path := range got {
		if _, ok := want[path]; !ok {
			tb.Errorf("%s@%s: unexpected file %s", repo, branch, path)
		}
	}
}
