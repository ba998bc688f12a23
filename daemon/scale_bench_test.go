package daemon

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/configbutler/gitops-reverser/crds"
)

// BenchmarkScale prints issue 24's scale table: the daemon's start → every file on the remote,
// its peak RSS and CPU per object, for 10,000, 50,000 and 100,000 ConfigMaps of ~1 KiB in one
// destination and for 100,000 spread over 20 destinations (20 repositories); then the rates of
// updates the mirror follows with the remote at most 2 s behind (see sustainedRates). The
// ConfigMaps are written straight into etcd (see etcd_bench_test.go). Each case has namespaces of
// its own and retires its WatchRules and destinations when done, so a later daemon lists only its
// own objects and opens only its own repositories.
func BenchmarkScale(b *testing.B) {
	planes.Lend(b)
	etcd := etcdClient(b)
	for range b.N {
		for _, n := range []int{10000, 50000, 100000} {
			m := newMirrorBench(b, fmt.Sprintf("scale-%d-%d", n, time.Now().UnixNano()%1e6))
			seeded := time.Now()
			m.seed(etcd, 0, n)
			seedTook := time.Since(seeded)
			start := time.Now()
			d := startDaemon(b, b.TempDir())
			took := m.mustLand(10 * time.Minute).Sub(start)
			rss, cpu := usage(b, d.Pid())
			report("scale %d in 1 destination: daemon start → all files on the remote %.1f s (the tips read every 10 ms); peak RSS %.0f MiB; CPU %.2f s, %.0f µs per object (written to etcd in %.1f s) (%s)",
				n, took.Seconds(), rss, cpu, cpu*1e6/float64(n), seedTook.Seconds(), beforeScale[n])
			switch n {
			case 10000:
				sustainedRates(b, m, etcd, d)
			case 100000: // every commit rewrites the tree of a folder of 100,000 files
				r := m.driveRate(d, 2000, etcdWriters, m.etcdUpdates(etcd, 2000, n, 1))
				report("updates at 2000/s for %v into 1 destination of %d, straight into etcd by %d writers: %s (%s)",
					rateRun, n, etcdWriters, r, beforeLargeRate)
			}
			d.Stop(b)
			m.retire()
		}
		scaleDestinations(b, etcd, 20, 5000)
	}
}

// The figures of BenchmarkScale before issue 33's work on reading the cluster (decoding each
// object once, a list paced by its worker): one run of this benchmark, as it measured then (each
// push seen as it lands, each case's destinations retired after it, the tip read without starting
// git; the ConfigMaps written into etcd as JSON, which the apiserver decodes at more cost than
// its own protobuf, written since), with the daemon of d266646, alone on the same 2-core machine
// just before the run of the figures after it (single runs drift by a fifth or more, and the
// machine's speed from hour to hour by a third). make bench prints them beside today's.
var (
	beforeScale = map[int]string{
		10000:  "before: 4.0 s, 53 MiB, 214 µs per object",
		50000:  "before: 14.9 s, 83 MiB, 194 µs per object",
		100000: "before: 33.3 s, 134 MiB, 203 µs per object",
	}
	beforeRates = map[int]string{
		1000: "before: 0.2 s behind, 399 µs per update",
		2000: "before: 1.8 s behind, 318 µs per update",
		4000: "before: 2,523/s reached, 4.6 s behind, 350 µs per update",
	}
)

const (
	beforeDestinations = "before: 39.9 s, 171 MiB, 213 µs per object"
	beforeBestRate     = "before: 2000/s"
	beforeAPIRate      = "before: 222/s, 0.2 s behind, 1219 µs per update"
	beforeLargeRate    = "before: 1,626/s reached, 4.7 s behind, 370 µs per update"
)

// scaleDestinations seeds per ConfigMaps into each of n destinations, every one with its own
// namespace, GitRepoConfig and repository, and prints the start → every file on every remote,
// the peak RSS and the CPU per object of one daemon mirroring them all.
func scaleDestinations(b *testing.B, etcd *clientv3.Client, n, per int) {
	ms := make([]*mirrorBench, n)
	seeded := time.Now()
	for i := range ms {
		ms[i] = newMirrorBench(b, fmt.Sprintf("scale-dest%02d-%d", i, time.Now().UnixNano()%1e6))
		ms[i].seed(etcd, 0, per)
	}
	seedTook := time.Since(seeded)
	start := time.Now()
	d := startDaemon(b, b.TempDir())
	landed, errs := make([]time.Time, len(ms)), make([]error, len(ms))
	var wg sync.WaitGroup
	for i, m := range ms { // watched side by side, so each landing is seen when it happens
		wg.Go(func() { landed[i], errs[i] = m.landed(10 * time.Minute) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		b.Fatal(err)
	}
	took := slices.MaxFunc(landed, time.Time.Compare).Sub(start)
	rss, cpu := usage(b, d.Pid())
	report("scale %d in %d destinations (%d each, a repository each): daemon start → all files on all remotes %.1f s (the tips read every 10 ms); peak RSS %.0f MiB; CPU %.2f s, %.0f µs per object (set up and written to etcd in %.1f s) (%s)",
		n*per, n, per, took.Seconds(), rss, cpu, cpu*1e6/float64(n*per), seedTook.Seconds(), beforeDestinations)
	d.Stop(b)
	for _, m := range ms {
		m.retire()
	}
}

// retire deletes the namespace's WatchRules and its destination, so that later daemons neither
// list nor watch it, nor open its repository: a later case measures a daemon with only its own.
func (m *mirrorBench) retire() {
	dyn := dynamic.NewForConfigOrDie(planes.Of(m.tb).AdminConfig()).Resource(crds.WatchRules).Namespace(m.ns)
	if err := dyn.DeleteCollection(context.Background(), metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
		m.tb.Fatal(err)
	}
	m.forget()
}
