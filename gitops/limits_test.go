package gitops

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
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
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			var global holders
			perRepo := make([]holders, c.repos)
			left := make([]atomic.Int64, c.repos) // goroutines per repo not done yet
			var finished atomic.Int64
			release := make(chan struct{})
			errs := make(chan error, c.repos*c.branches)
			var wg sync.WaitGroup
			for r := range c.repos {
				left[r].Store(int64(c.branches))
				for range c.branches {
					wg.Go(func() {
						done, err := c.slots.acquire(ctx, fmt.Sprintf("https://git.example.com/repo-%d.git", r))
						if err != nil {
							errs <- err
							return
						}
						global.add(1)
						perRepo[r].add(1)
						<-release
						perRepo[r].add(-1)
						global.add(-1)
						done()
						left[r].Add(-1)
						finished.Add(1)
					})
				}
			}
			// Hand out releases one at a time, each once every free slot is taken, so the
			// bounds are reached at every step and a slot handed over twice would show.
			saturated := func() int {
				n := 0
				for r := range left {
					n += bounded(int(left[r].Load()), c.maxPerRepo)
				}
				return bounded(n, c.maxGlobal)
			}
			for step := range c.repos * c.branches {
				eventually(t, 10*time.Second, "every free slot taken", func() (bool, error) {
					select {
					case err := <-errs:
						return false, err
					default:
					}
					return int(global.cur.Load()) >= saturated(), nil
				})
				release <- struct{}{}
				eventually(t, 10*time.Second, "the released holder to finish", func() (bool, error) {
					return finished.Load() == int64(step+1), nil
				})
			}
			wg.Wait()

			want := bounded(c.repos*bounded(c.branches, c.maxPerRepo), c.maxGlobal)
			if got := int(global.peak.Load()); got != want {
				t.Errorf("at most %d goroutines held slots at once, want exactly %d", got, want)
			}
			for r := range perRepo {
				if got := int(perRepo[r].peak.Load()); got > bounded(c.branches, c.maxPerRepo) {
					t.Errorf("repo %d: %d goroutines held slots at once, want at most %d", r, got, c.maxPerRepo)
				}
			}
		})
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
		branches, files       = 4, 10
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
	for _, repo := range []string{"slots-a", "slots-b"} {
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
				if err := bw.w.Enqueue(t.Context(), Change{Path: path, Content: data}); err != nil {
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
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- w.Run(ctx) }()
	tb.Cleanup(func() {
		cancel()
		if err := <-errc; err != nil {
			tb.Errorf("stop worker %s: %v", branch, err)
		}
	})
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

// Builders of pending intents for the coalesce tests.
var (
	alice = Signature{Name: "alice", Email: "alice@example.com"}
	bob   = Signature{Name: "bob", Email: "bob@example.com"}
)

func write(author Signature, path, content string) item {
	return item{change: Change{Path: path, Content: []byte(content), Author: author, Summary: "update " + path}}
}

func del(author Signature, path string) item {
	return item{change: Change{Path: path, Author: author, Summary: "delete " + path}}
}

func syncProd(live ...string) item {
	s := &Sync{Scopes: []string{"clusters/prod/"}, Live: map[string]struct{}{}}
	for _, p := range live {
		s.Live[p] = struct{}{}
	}
	return item{sync: s}
}

func TestCoalesceKeepsLatestContentPerPath(t *testing.T) {
	a, b, c := cmPath("a"), cmPath("b"), cmPath("c")
	staging, notes := Path("clusters/staging", "", "configmaps", "default", "x"), "clusters/prod/notes.txt"
	type want struct {
		path    string
		content *string // nil = delete
	}
	v := func(s string) *string { return &s }
	cases := []struct {
		name  string
		runs  []run
		syncs int // the first items of the result
		want  []want
	}{
		{"latest write per path across authors", []run{
			{alice, []item{write(alice, a, "a1"), write(alice, b, "b1")}},
			{bob, []item{write(bob, a, "a2"), write(bob, c, "c1")}},
			{alice, []item{write(alice, b, "b2")}},
		}, 0, []want{{a, v("a2")}, {b, v("b2")}, {c, v("c1")}}},
		{"a delete after writes is kept", []run{
			{alice, []item{write(alice, a, "a1"), write(alice, b, "b1")}},
			{bob, []item{del(bob, a)}},
		}, 0, []want{{a, nil}, {b, v("b1")}}},
		{"a write after a delete wins", []run{
			{alice, []item{del(alice, a)}},
			{bob, []item{write(bob, a, "a2")}},
		}, 0, []want{{a, v("a2")}}},
		{"a sync goes first and turns the writes it orphaned into deletes", []run{
			{alice, []item{write(alice, a, "a1"), write(alice, b, "b1")}},
			{testBot, []item{syncProd(b)}},
			{bob, []item{write(bob, c, "c1")}},
		}, 1, []want{{a, nil}, {b, v("b1")}, {c, v("c1")}}},
		{"a write after a sync survives it", []run{
			{testBot, []item{syncProd()}},
			{alice, []item{write(alice, a, "a1")}},
			{testBot, []item{syncProd(a)}},
		}, 2, []want{{a, v("a1")}}},
		{"a sync orphans only yaml files in its scope", []run{
			{alice, []item{write(alice, staging, "s1"), write(alice, notes, "n1")}},
			{testBot, []item{syncProd()}},
		}, 1, []want{{staging, v("s1")}, {notes, v("n1")}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := coalesce(tc.runs, testBot)
			if len(got) != 1 || got[0].author != testBot {
				t.Fatalf("coalesce = %d runs (first by %v), want one run by the bot", len(got), got[0].author)
			}
			items := got[0].items
			if len(items) != tc.syncs+len(tc.want) {
				t.Fatalf("coalesced run has %d items, want %d syncs then %d changes: %s",
					len(items), tc.syncs, len(tc.want), describe(got))
			}
			for i, it := range items[:tc.syncs] {
				if it.sync == nil {
					t.Errorf("item %d is a change to %s, want a sync", i, it.change.Path)
				}
			}
			for i, w := range tc.want {
				it := items[tc.syncs+i]
				switch {
				case it.sync != nil:
					t.Errorf("change %d is a sync, want %s", i, w.path)
				case it.change.Path != w.path:
					t.Errorf("change %d is to %s, want %s", i, it.change.Path, w.path)
				case !it.change.Author.IsZero():
					t.Errorf("%s keeps author %v, want the bot", w.path, it.change.Author)
				case w.content == nil && it.change.Content != nil:
					t.Errorf("%s = %q, want a delete", w.path, it.change.Content)
				case w.content != nil && !bytes.Equal(it.change.Content, []byte(*w.content)):
					t.Errorf("%s = %q, want %q", w.path, describeContent(it.change.Content), *w.content)
				}
			}
		})
	}
}

// TestCoalescedRunsReplayToTheSameTree checks coalesce against its contract on random
// histories: applying the one coalesced run gives the tree that replaying every run gives.
func TestCoalescedRunsReplayToTheSameTree(t *testing.T) {
	pool := []string{cmPath("a"), cmPath("b"), cmPath("c"), cmPath("d"),
		Path("clusters/staging", "", "configmaps", "default", "x"), "clusters/prod/notes.txt"}
	rnd := rand.New(rand.NewPCG(1, 2))
	authors := []Signature{alice, bob, {}}
	for n := range 2000 {
		start := map[string]string{}
		for _, p := range pool {
			if rnd.IntN(2) == 0 {
				start[p] = "seed"
			}
		}
		var runs []run
		for r := range 1 + rnd.IntN(6) {
			author := authors[rnd.IntN(len(authors))]
			var items []item
			for i := range 1 + rnd.IntN(6) {
				p := pool[rnd.IntN(len(pool))]
				switch k := rnd.IntN(10); {
				case k < 6:
					items = append(items, write(author, p, fmt.Sprintf("v%d.%d", r, i)))
				case k < 9:
					items = append(items, del(author, p))
				default:
					var live []string
					for _, p := range pool {
						if rnd.IntN(2) == 0 {
							live = append(live, p)
						}
					}
					items = append(items, syncProd(live...))
				}
			}
			runs = append(runs, run{author: author, items: items})
		}
		want := replay(start, runs)
		merged := coalesce(runs, testBot)
		if got := replay(start, merged); !maps.Equal(got, want) {
			t.Fatalf("history %d: coalesced tree %v, replayed tree %v\nstart %v\nruns %s\ncoalesced %s",
				n, got, want, start, describe(runs), describe(merged))
		}
	}
}

// replay applies runs to a tree of path → content the way commits do: item by item, a sync
// deleting the orphans of the tree as it stands.
func replay(start map[string]string, runs []run) map[string]string {
	tree := maps.Clone(start)
	for _, r := range runs {
		for _, it := range r.items {
			switch {
			case it.sync != nil:
				maps.DeleteFunc(tree, func(p, _ string) bool { return orphaned(p, it.sync) })
			case it.change.Content == nil:
				delete(tree, it.change.Path)
			default:
				tree[it.change.Path] = string(it.change.Content)
			}
		}
	}
	return tree
}

// describe renders runs for a failure message.
func describe(runs []run) string {
	var sb strings.Builder
	for _, r := range runs {
		fmt.Fprintf(&sb, "\n  %s:", r.author.Name)
		for _, it := range r.items {
			if it.sync != nil {
				fmt.Fprintf(&sb, " sync(live %v)", slices.Sorted(maps.Keys(it.sync.Live)))
				continue
			}
			fmt.Fprintf(&sb, " %s=%s", it.change.Path, describeContent(it.change.Content))
		}
	}
	return sb.String()
}

func describeContent(c []byte) string {
	if c == nil {
		return "<delete>"
	}
	return string(c)
}

func TestPendingStaysBoundedDuringOutage(t *testing.T) {
	const paths, changes = 300, 3000
	limits := BatchLimits{MaxFiles: 100, MaxWait: time.Hour, Quiet: time.Hour}
	// What a worker holds: the pending runs, merged past maxPendingItems into one change per
	// path, plus the batch being filled.
	bound := max(maxPendingItems, paths) + limits.MaxFiles
	srv := MustGitServer(t)
	w := StartWorker(t, MustRepo(t, srv, "bounded"), "", limits)
	want := map[string]string{}
	change := func(p, round int) Change {
		name := fmt.Sprintf("cm-%03d", p)
		c := Change{Path: cmPath(name), Summary: "update " + name}
		if round == changes/paths-1 && p%10 == 0 {
			delete(want, c.Path)
			return c // the last round deletes every tenth object
		}
		c.Content = configMap(name, fmt.Sprint(round), 200)
		want[c.Path] = testenv.BlobHash(c.Content)
		return c
	}
	for p := range paths {
		MustEnqueue(t, w, change(p, -1))
	}
	MustFlush(t, w)

	srv.SetAvailable(false)
	authors := []Signature{alice, bob, {}}
	peak := 0
	for i := range changes {
		c := change(i%paths, i/paths)
		c.Author = authors[i/paths%len(authors)]
		MustEnqueue(t, w, c)
		peak = max(peak, w.Status().Pending)
	}
	// Once the queue is empty every change was taken by the worker; it reports its status after
	// each push attempt, so after two more failures the status counts them all.
	eventually(t, 30*time.Second, "the queue to drain", func() (bool, error) { return len(w.in) == 0, nil })
	failures := w.metric(t, "push_failures_total")
	eventually(t, 30*time.Second, "two more failed pushes", func() (bool, error) {
		return w.metric(t, "push_failures_total") >= failures+2, nil
	})
	s := w.Status()
	peak = max(peak, s.Pending)
	if peak > bound {
		t.Errorf("%d changes pending during the outage, want at most %d", peak, bound)
	}
	if s.Pending == 0 || s.LastError == nil {
		t.Errorf("status during outage = %+v, want pending changes and an error", s)
	}

	srv.SetAvailable(true)
	MustFlush(t, w)
	mustTree(t, srv, "bounded", "main", want)
	if s := w.Status(); s.Pending != 0 || s.LastError != nil {
		t.Errorf("status after the outage = %+v, want nothing pending and no error", s)
	}
	mustFsck(t, srv, "bounded")
}
