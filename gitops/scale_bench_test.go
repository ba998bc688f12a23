package gitops

import (
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/configbutler/gitops-reverser/testenv"
)

// BenchmarkSeed100k is the Git side of the daemon's largest seed (issue 24): 100,000 ConfigMaps
// of ~1 KiB into one folder of one branch, enqueued at 5,000 a second (about the pace of the
// daemon's list of 100,000), with the default batch limits. It reports the time from the first
// enqueue until the remote accepted the last change, the commits it took, the CPU of this
// process (the worker) and that of the Git server's processes. With -cpuprofile it is the
// profile of the worker's per-object costs.
func BenchmarkSeed100k(b *testing.B) {
	const n, rate = 100000, 5000
	srv := MustGitServer(b)
	contents := make([][]byte, n)
	for i := range contents {
		contents[i] = configMap(fmt.Sprintf("cm-%06d", i), "1", 1024)
	}
	for round := range b.N {
		name := fmt.Sprintf("seed100k-%d", round)
		w := StartWorker(b, MustRepo(b, srv, name), "", BatchLimits{}, func(c *WorkerConfig) { c.Log = nil })
		MustFlush(b, w) // the initial fetch is done
		cpu0, server0 := cpuTime(), childrenCPUTime()
		start := time.Now()
		for i, c := range contents {
			if i%(rate/100) == 0 {
				time.Sleep(time.Until(start.Add(time.Duration(i) * time.Second / rate))) // the list's pace
			}
			MustEnqueue(b, w, Change{Path: cmPath(fmt.Sprintf("cm-%06d", i)), Content: c})
		}
		enqueued := time.Since(start)
		MustFlush(b, w)
		took := time.Since(start)
		cpu, server := cpuTime()-cpu0, childrenCPUTime()-server0
		commits := len(testenv.MustLog(b, srv, name))
		if files := testenv.MustFiles(b, srv, name); len(files) != n {
			b.Fatalf("remote has %d files, want %d", len(files), n)
		}
		_ = w.stop()
		fmt.Printf("gitops: seed 100,000 at %d/s (enqueued in %.1f s): last push landed %.1f s after the first enqueue; %d commits; worker CPU %.1f s (%.0f µs per object), Git server CPU %.1f s (%s)\n",
			rate, enqueued.Seconds(), took.Seconds(), commits, cpu.Seconds(), cpu.Seconds()*1e6/n, server.Seconds(), beforeSeed100k)
	}
}

// beforeSeed100k is what BenchmarkSeed100k printed before issue 24's work on the Git side: the
// median of five runs on main at ab976e2, alternating with the new code on the same machine.
const beforeSeed100k = "before: 153 commits, worker CPU 15.0 s (150 µs per object), Git server CPU 7.8 s"

// childrenCPUTime is the user+system CPU time of the child processes that ended: the Git
// server's http-backend and the git commands under it.
func childrenCPUTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_CHILDREN, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
