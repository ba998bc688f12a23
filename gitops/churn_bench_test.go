package gitops

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/configbutler/gitops-reverser/gitstore"
	"github.com/configbutler/gitops-reverser/testenv"
)

// BenchmarkChurnBytes is issue 33's measure of what a commit costs as a folder churns: n
// ConfigMaps in one folder, then 30 rounds of 50 updates, each round one commit. Per commit it
// prints the growth of the worker's clone, the bytes pushed (receive-pack requests), what git
// needs for the same history (a copy of the remote repacked with deltas found afresh), and the
// median time and worker CPU of a round; each beside the figure before the change.
func BenchmarkChurnBytes(b *testing.B) {
	for _, n := range []int{2000, 100000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			for round := range b.N {
				churnBytes(b, n, fmt.Sprintf("churn%d-%d", n, round))
			}
		})
	}
}

func churnBytes(b *testing.B, n int, repo string) {
	const rounds, perRound = 30, 50
	srv := MustGitServer(b)
	url := MustRepo(b, srv, repo)
	workDir := b.TempDir()
	clone, remote := filepath.Join(workDir, WorkerKey(url, "main")), filepath.Join(srv.Root, repo+".git")
	w := StartWorker(b, url, workDir, BatchLimits{}, func(c *WorkerConfig) { c.Log = nil })
	name := func(i int) string { return fmt.Sprintf("cm-%06d", i) }
	for i := range n {
		MustEnqueue(b, w, Change{Path: cmPath(name(i)), Content: configMap(name(i), "0", 512)})
	}
	MustFlush(b, w)
	cloneBefore, pushedBefore, gcBefore := testenv.DirSize(b, clone), srv.PushedBytes(), testenv.GCSize(b, remote)
	var times []time.Duration
	cpu0 := cpuTime()
	for r := 1; r <= rounds; r++ {
		start := time.Now()
		for k := range perRound {
			i := (r*perRound*7 + k*97) % n
			MustEnqueue(b, w, Change{Path: cmPath(name(i)), Content: configMap(name(i), fmt.Sprint(r), 512)})
		}
		MustFlush(b, w)
		times = append(times, time.Since(start))
	}
	cpu := cpuTime() - cpu0
	_ = w.stop()
	grew, pushed, gc := testenv.DirSize(b, clone)-cloneBefore, srv.PushedBytes()-pushedBefore, testenv.GCSize(b, remote)-gcBefore
	slices.Sort(times)
	fmt.Printf("gitops: churn in a folder of %d, 30 commits of 50 files: per commit the clone grew %.1f KiB, %.1f KiB were pushed, git needs %.1f KiB; a round took %.0f ms (median), worker CPU %.1f ms (%s)\n",
		n, float64(grew)/rounds/1024, float64(pushed)/rounds/1024, float64(gc)/rounds/1024,
		float64(times[len(times)/2].Microseconds())/1000, float64(cpu.Microseconds())/1000/rounds, beforeChurn[n])
}

// beforeChurn is what BenchmarkChurnBytes printed on main before issue 33's deltas (ffd97b7,
// with this benchmark and the Git server's byte count copied in), on the same machine.
var beforeChurn = map[int]string{
	2000:   "before: clone 57.3 KiB, pushed 55.9 KiB, git 5.6 KiB; 118 ms, CPU 8.6 ms",
	100000: "before: clone 2515.3 KiB, pushed 2514.0 KiB, git 78.6 KiB; 559 ms, CPU 103.2 ms",
}

// BenchmarkCloneOverTime is a week of churn, compressed: the clone's size as commits pile up in a
// folder of 2,000 ConfigMaps, 1,000 commits of 50 written. A week at one commit every 2.5 s is
// 241,920 commits, and the clone keeps the newest 10,000 (gitstore.KeptCommits) once it passed
// 256 MiB (renewFloor); here both are scaled down a hundredfold (100 commits, 2.5 MiB), so that
// the thousand commits renew the clone as a week would. It prints the size every 100 commits, the
// largest in the second half against the first (levelled off: about the same), and what the
// clone would grow to in a week without renewals.
func BenchmarkCloneOverTime(b *testing.B) {
	const files, commits, perCommit, every = 2000, 1000, 50, 100
	for round := range b.N {
		srv := MustGitServer(b)
		url := MustRepo(b, srv, fmt.Sprint("week-", round))
		w := StartWorker(b, url, "", BatchLimits{}, func(c *WorkerConfig) {
			c.Log, c.KeepCommits, c.RenewFloor = nil, gitstore.KeptCommits/100, renewFloor/100
		})
		name := func(i int) string { return fmt.Sprintf("cm-%06d", i) }
		for i := range files {
			MustEnqueue(b, w, Change{Path: cmPath(name(i)), Content: configMap(name(i), "0", 512)})
		}
		MustFlush(b, w)
		seeded := cloneSize(b, w)
		sizes := []string{fmt.Sprintf("seed %.1f MiB", float64(seeded)/(1<<20))}
		var firstHalf, secondHalf, grown int64
		for c := 1; c <= commits; c++ {
			for k := range perCommit {
				i := (c*perCommit*7 + k*97) % files
				MustEnqueue(b, w, Change{Path: cmPath(name(i)), Content: configMap(name(i), fmt.Sprint(c), 512)})
			}
			before := cloneSize(b, w)
			MustFlush(b, w)
			size := cloneSize(b, w)
			if size > before { // a renewal swapped in between shrinks it
				grown += size - before
			}
			if c <= commits/2 {
				firstHalf = max(firstHalf, size)
			} else {
				secondHalf = max(secondHalf, size)
			}
			if c%every == 0 {
				sizes = append(sizes, fmt.Sprintf("%d: %.1f", c, float64(size)/(1<<20)))
			}
		}
		_ = w.stop()
		fmt.Printf("gitops: the clone over a week compressed, %d commits of %d files in a folder of %d, keeping %d commits past %.1f MiB: %s MiB; "+
			"largest %.1f MiB in the first half, %.1f MiB in the second; without renewals %.1f KiB a commit, %.1f GiB a week (%s)\n",
			commits, perCommit, files, gitstore.KeptCommits/100, float64(renewFloor/100)/(1<<20), strings.Join(sizes, ", "),
			float64(firstHalf)/(1<<20), float64(secondHalf)/(1<<20), float64(grown)/commits/1024, float64(grown)/commits*241920/(1<<30), beforeCloneOverTime)
	}
}

// cloneSize is the size of w's clone, measured on the worker's goroutine: a renewal swaps the
// directory on it.
func cloneSize(tb testing.TB, w *testWorker) int64 {
	tb.Helper()
	var n int64
	err := w.Read(context.Background(), func(Reader) error {
		var err error
		n, err = w.repo.Size()
		return err
	})
	if err != nil {
		tb.Fatal(err)
	}
	return n
}

// beforeCloneOverTime is what BenchmarkCloneOverTime printed before issue 33 (ffd97b7, the
// benchmark copied in) and after its deltas (d266646), on the same machine.
const beforeCloneOverTime = "before the deltas: 250: 14.4 MiB, 500: 28.4 MiB, 750: 42.4 MiB, 1000: 56.4 MiB; 57.4 KiB a commit, 13.2 GiB a week; " +
	"with the deltas, before the renewals: 250: 2.6 MiB, 500: 4.9 MiB, 750: 7.2 MiB, 1000: 9.5 MiB, 9.4 KiB a commit, 2.2 GiB a week"
