package daemon

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// waitMatched polls the remote without pause until it holds exactly what the cluster holds and
// returns when it did: the poll interval of the tests would add up to 50 ms to every figure.
func (m *mirrorBench) waitMatched(deadline time.Duration) time.Time {
	end := time.Now().Add(deadline)
	for time.Now().Before(end) {
		if got, err := m.srv.FileHashes("state", "main"); err == nil && m.matches(got) {
			return time.Now()
		}
		time.Sleep(2 * time.Millisecond) // pacing the git subprocesses, not synchronising
	}
	m.tb.Fatalf("remote never matched the cluster within %v", deadline)
	return time.Time{}
}

// commits counts the commits on the remote branch.
func (m *mirrorBench) commits() int {
	log, err := m.srv.Log("state", "main")
	if err != nil {
		m.tb.Fatal(err)
	}
	return len(log)
}

func (m *mirrorBench) patch(name string, round int) {
	patch := fmt.Sprintf(`{"data":{"payload":%q}}`, payload(0, round)["payload"])
	got, err := m.dyn.Patch(context.Background(), name, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
	if err != nil {
		m.tb.Fatal(err)
	}
	m.expect(name, got)
}

// BenchmarkChangeLatency measures, with default settings, how long a single change after a
// quiet spell takes to reach the remote, how long 500 creates take to be matched after the last
// write, and how many commits steady streams of updates make.
func BenchmarkChangeLatency(b *testing.B) {
	planes.Lend(b)
	for range b.N {
		m := newMirrorBench(b, fmt.Sprintf("bench-latency-%d", time.Now().UnixNano()))
		m.create(0, 1)
		startDaemon(b, b.TempDir())
		m.waitMatched(time.Minute)

		var single []time.Duration
		for round := range 20 {
			time.Sleep(2 * time.Second) // a quiet spell longer than the 1.5 s quiet period
			start := time.Now()
			m.patch("cm-00000", round+1)
			single = append(single, m.waitMatched(time.Minute).Sub(start))
		}
		slices.Sort(single)
		report("one change after a quiet spell → on the remote: median %d ms, max %d ms (20 changes)",
			single[len(single)/2].Milliseconds(), single[len(single)-1].Milliseconds())

		before := m.commits()
		m.create(1, 501)
		last := time.Now()
		report("500 creates (8 writers): last write → remote matches: %d ms; %d commits",
			m.waitMatched(time.Minute).Sub(last).Milliseconds(), m.commits()-before)

		for _, every := range []time.Duration{200 * time.Millisecond, time.Second} {
			time.Sleep(2 * time.Second)
			before := m.commits()
			n := int(20 * time.Second / every)
			tick := time.NewTicker(every)
			for i := range n {
				<-tick.C
				m.patch(fmt.Sprintf("cm-%05d", 1+i%50), 1000+i)
			}
			tick.Stop()
			m.waitMatched(time.Minute)
			report("steady stream, one update every %v for 20 s (%d updates): %d commits", every, n, m.commits()-before)
		}
	}
}
