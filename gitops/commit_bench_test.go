package gitops

import (
	"fmt"
	"testing"

	"github.com/go-git/go-git/v5/plumbing"

	"github.com/configbutler/gitops-reverser/gitstore"
)

// offlineWorker is a worker with an empty clone and no remote, for building commits without
// Run. Its clone is closed when the test ends.
func offlineWorker(tb testing.TB) *Worker {
	tb.Helper()
	w := NewWorker(WorkerConfig{Remote: Remote{URL: "http://example.invalid/r.git", Branch: "main"}, WorkDir: tb.TempDir()})
	rp, err := gitstore.Open(w.dir, w.remote.clone(), w.renew.keep, w.log)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(rp.Close)
	w.repo, w.store = rp, rp.Store()
	return w
}

// BenchmarkWorkerCommitRun measures the hot path between a batch and a push: resolving a run of
// 200 changes (one Sync among them) into tree ops and building the commit, on a tree of 2,000
// files, without the remote.
func BenchmarkWorkerCommitRun(b *testing.B) { benchmarkCommitRun(b, 0) }

// BenchmarkWorkerCommitRunWithHolds is BenchmarkWorkerCommitRun with 10 held paths, 2 of which
// the run writes.
func BenchmarkWorkerCommitRunWithHolds(b *testing.B) { benchmarkCommitRun(b, 10) }

func benchmarkCommitRun(b *testing.B, holds int) {
	w := offlineWorker(b)
	var seed []item
	live := map[string]struct{}{}
	for i := range 2000 {
		p := cmPath(fmt.Sprintf("cm-%04d", i))
		live[p] = struct{}{}
		seed = append(seed, item{change: Change{Path: p, Content: configMap(fmt.Sprintf("cm-%04d", i), "seed", 1024)}})
	}
	var stats buildStats
	base, err := w.commitRun(plumbing.ZeroHash, run{author: testBot, items: seed}, &stats)
	if err != nil {
		b.Fatal(err)
	}
	items := make([]item, 0, 201)
	for i := range 200 {
		items = append(items, item{change: Change{Path: cmPath(fmt.Sprintf("cm-%04d", i*7)), Content: configMap("x", fmt.Sprint(i), 1024)}})
	}
	items = append(items, item{sync: &Sync{Scopes: []string{"clusters/prod/default/configmaps/"}, Live: live}})
	w.holds = newHoldTable().forKey(w.remote.URL, w.remote.Branch)
	for i := range holds {
		w.holds.hold(cmPath(fmt.Sprintf("cm-%04d", i*70)))
	}
	// The same objects every time: the overlay keeps the base and stops growing after one round.
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if _, err := w.commitRun(base, run{author: testBot, items: items}, &stats); err != nil {
			b.Fatal(err)
		}
	}
}
