package gitops

import (
	"fmt"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/configbutler/gitops-reverser/testenv"
)

// BenchmarkSeed2000 seeds 2,000 ConfigMaps of ~1 KiB into an empty remote with the default
// batch limits and reports the time from the first enqueue until the last push landed.
func BenchmarkSeed2000(b *testing.B) {
	srv := MustGitServer(b)
	contents := make([][]byte, 2000)
	for i := range contents {
		contents[i] = configMap(fmt.Sprintf("cm-%04d", i), "1", 1024)
	}
	var total time.Duration
	for n := 0; n < b.N; n++ {
		b.StopTimer()
		name := fmt.Sprintf("seed%d", n)
		w := StartWorker(b, MustRepo(b, srv, name), "", BatchLimits{})
		MustFlush(b, w) // the initial fetch is done
		b.StartTimer()
		start := time.Now()
		for i, c := range contents {
			MustEnqueue(b, w, Change{Path: cmPath(fmt.Sprintf("cm-%04d", i)), Content: c})
		}
		MustFlush(b, w)
		total += time.Since(start)
		b.StopTimer()
		if files := testenv.MustFiles(b, srv, name); len(files) != len(contents) {
			b.Fatalf("remote has %d files, want %d", len(files), len(contents))
		}
		_ = w.stop()
		b.StartTimer()
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	b.ReportMetric(float64(total.Milliseconds())/float64(b.N), "ms/seed")
	b.ReportMetric(float64(ms.HeapSys)/(1<<20), "MiB-heap-sys")
}

// BenchmarkOneChangeInto50kRepo commits and pushes one changed object into a repository of
// 50,000 files and reports the median of 10 changes.
func BenchmarkOneChangeInto50kRepo(b *testing.B) {
	srv := MustGitServer(b)
	for n := 0; n < b.N; n++ {
		b.StopTimer()
		name := fmt.Sprintf("large%d", n)
		url := MustLargeRepo(b, srv, name, 50, 1000)
		start := time.Now()
		w := StartWorker(b, url, "", BatchLimits{})
		MustFlush(b, w) // the clone is done
		b.Logf("initial clone of 50,000 files: %v", time.Since(start))
		b.StartTimer()
		var times []time.Duration
		for i := range 10 {
			start := time.Now()
			MustEnqueue(b, w, Change{Path: largePath(i*5, i*97), Content: configMap("changed", fmt.Sprint(i), 1024)})
			MustFlush(b, w)
			times = append(times, time.Since(start))
		}
		b.StopTimer()
		slices.Sort(times)
		b.ReportMetric(float64(times[len(times)/2].Microseconds())/1000, "ms/change")
		b.Logf("change times: %v", times)
		_ = w.stop()
	}
}

// BenchmarkMirrorWorkload runs the daemon's reference workload through one worker: seed 2,000
// ConfigMaps, update 2,000, create 500, delete 500, and reports the CPU time it took (the Git
// server's processes excluded). Peak memory is measured on the whole daemon by the daemon
// package's BenchmarkMirror2000: this test process also holds the other benchmarks' fixtures.
func BenchmarkMirrorWorkload(b *testing.B) {
	srv := MustGitServer(b)
	for n := 0; n < b.N; n++ {
		name := fmt.Sprintf("workload%d", n)
		w := StartWorker(b, MustRepo(b, srv, name), "", BatchLimits{})
		cpu0 := cpuTime()
		phase := func(from, to int, value string) {
			for i := from; i < to; i++ {
				c := Change{Path: cmPath(fmt.Sprintf("cm-%04d", i))}
				if value != "" {
					c.Content = configMap(fmt.Sprintf("cm-%04d", i), value, 1024)
				}
				MustEnqueue(b, w, c)
			}
			MustFlush(b, w)
		}
		phase(0, 2000, "seed")
		phase(0, 2000, "updated")
		phase(2000, 2500, "created")
		phase(0, 500, "")
		if files := testenv.MustFiles(b, srv, name); len(files) != 2000 {
			b.Fatalf("remote has %d files, want 2000", len(files))
		}
		b.ReportMetric(cpuTime().Seconds()-cpu0.Seconds(), "cpu-s")
		_ = w.stop()
	}
}
