package daemon

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"k8s.io/client-go/kubernetes"

	"github.com/configbutler/gitops-reverser/testenv"
)

// BenchmarkShardThroughput mirrors 20 destinations, each with a namespace and a repository of its
// own, by 1, 2 and 3 replicas that share them (--shards=auto), and prints the updates per second
// they followed: 500 ConfigMaps per destination, each updated 3 times (30,000 updates, encoded
// beforehand) as fast as etcdWriters goroutines write them straight into etcd (through the
// apiserver, the writers are the limit on two cores), from the first update to every remote
// holding the last ones. On 2 cores the replicas, the apiserver, etcd and the Git server share the
// same CPUs, so the figure says what sharing costs here more than what it gains on a real cluster.
func BenchmarkShardThroughput(b *testing.B) {
	cp := planes.Lend(b)
	const dests, perDest, rounds = 20, 500, 3
	kube := kubernetes.NewForConfigOrDie(cp.AdminConfig())
	etcd := etcdClient(b)
	for range b.N {
		for replicas := 1; replicas <= 3; replicas++ {
			run := fmt.Sprintf("tput-%d-%d", replicas, time.Now().UnixNano()%1e6)
			ms := make([]*mirrorBench, dests)
			for i := range ms {
				ms[i] = newMirrorBench(b, fmt.Sprintf("%s-%02d", run, i))
				ms[i].seed(etcd, 0, perDest)
			}
			pods := make([]string, replicas)
			for i := range pods {
				pods[i] = fmt.Sprintf("%s-%c", run, 'a'+i)
			}
			replicaPods(b, kube, pods...)
			start := time.Now()
			rs := make([]*replica, replicas)
			for i, pod := range pods {
				rs[i] = startShardReplica(b, pod, run)
			}
			shares := make([]int, replicas)
			for i := range dests {
				shares[i%replicas]++
			}
			for _, m := range ms {
				m.converged(start)
			}
			seeded := time.Since(start)
			testenv.Eventually(b, 2*time.Minute, "the shards shared out", sharedAs(b, dests, rs, shares...))

			updates := prepareUpdates(b, ms, perDest, rounds)
			start = time.Now()
			writeUpdates(b, etcd, updates)
			written := time.Since(start)
			for _, m := range ms {
				m.converged(start)
			}
			took := time.Since(start)
			var rss, cpu float64
			for _, r := range rs {
				peak, c := usage(b, r.Pid())
				rss, cpu = max(rss, peak), cpu+c
			}
			fmt.Printf("shards: %d replicas, %d destinations on %d repositories: seed of %d objects %.1f s; %d updates followed at %.0f/s "+
				"(written in %.1f s, all on the remotes %.1f s after the first); CPU of all replicas %.1f s, largest peak RSS %.0f MiB\n",
				replicas, dests, dests, dests*perDest, seeded.Seconds(), dests*perDest*rounds, float64(dests*perDest*rounds)/took.Seconds(),
				written.Seconds(), took.Seconds(), cpu, rss)
			for _, r := range rs {
				r.Stop(b)
			}
			for _, m := range ms {
				m.forget() // the next round's replicas share only their own 20
			}
		}
	}
}

// etcdUpdate is one update prepared for etcd, and what it makes Git's target.
type etcdUpdate struct {
	m          *mirrorBench
	put        clientv3.Op
	path, hash string
}

// prepareUpdates encodes rounds updates of every object of every destination, the destinations
// interleaved, before the clock starts: encoding them while writing makes the writers the limit.
func prepareUpdates(b *testing.B, ms []*mirrorBench, perDest, rounds int) []etcdUpdate {
	out := make([]etcdUpdate, 0, len(ms)*perDest*rounds)
	for round := 1; round <= rounds; round++ {
		for i := range perDest {
			for _, m := range ms {
				put, path, hash, err := m.putOp(i, round)
				if err != nil {
					b.Fatal(err)
				}
				out = append(out, etcdUpdate{m, put, path, hash})
			}
		}
	}
	return out
}

// writeUpdates writes the updates straight into etcd on etcdWriters goroutines.
func writeUpdates(b *testing.B, etcd *clientv3.Client, updates []etcdUpdate) {
	var next atomic.Int64
	var wg sync.WaitGroup
	var failed atomic.Pointer[error]
	for range etcdWriters {
		wg.Go(func() {
			for k := int(next.Add(1) - 1); k < len(updates); k = int(next.Add(1) - 1) {
				u := updates[k]
				if _, err := etcd.Do(context.Background(), u.put); err != nil {
					failed.CompareAndSwap(nil, &err)
					return
				}
				u.m.record(u.path, u.hash)
			}
		})
	}
	wg.Wait()
	if err := failed.Load(); err != nil {
		b.Fatal(*err)
	}
}
