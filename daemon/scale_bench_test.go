package daemon

import (
	"fmt"
	"testing"
	"time"
)

// BenchmarkScale seeds 10,000, 50,000 and 100,000 ConfigMaps of ~1 KiB into one destination each
// (issue 24's scale table) and prints, for each, the daemon's start → every file on the remote,
// its peak RSS and its CPU per object. Each size has a namespace of its own; a namespaced rule
// lists and watches only its own namespace, so the sizes do not add up.
func BenchmarkScale(b *testing.B) {
	for range b.N {
		for _, n := range []int{10000, 50000, 100000} {
			m := newMirrorBench(b, fmt.Sprintf("scale-%d-%d", n, time.Now().UnixNano()%1e6))
			created := time.Now()
			m.create(0, n)
			createTook := time.Since(created)
			start := time.Now()
			d := startDaemon(b, b.TempDir())
			took := m.convergedPaced(start, time.Second)
			rss, cpu := usage(b, d.Pid())
			report("scale %d: daemon start → all files on the remote %.1f s (polled every second); peak RSS %.0f MiB; CPU %.2f s, %.0f µs per object (the %d objects were created in %.1f s)",
				n, took.Seconds(), rss, cpu, cpu*1e6/float64(n), n, createTook.Seconds())
			d.Stop(b)
		}
	}
}

// convergedPaced is converged for remotes so large that reading every file is work: it reads
// them once per pace (pacing the polls, not synchronising) and gives up after ten minutes.
func (m *mirrorBench) convergedPaced(start time.Time, pace time.Duration) time.Duration {
	m.tb.Helper()
	for {
		got, err := m.srv.FileHashes("state", "main")
		if err == nil && m.matches(got) {
			return time.Since(start)
		}
		if time.Since(start) > 10*time.Minute {
			m.tb.Fatalf("the remote does not match the cluster after 10 minutes: %d files, want %d (err %v)", len(got), len(m.want), err)
		}
		time.Sleep(pace)
	}
}
