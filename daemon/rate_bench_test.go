package daemon

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/configbutler/gitops-reverser/testenv"
)

// Bounds of the sustained-rate runs.
const (
	rateRun     = 10 * time.Second // how long each rate is kept up
	rateMaxLag  = 2 * time.Second  // the lag a rate is followed within
	etcdWriters = 32               // goroutines writing updates into etcd
	apiWriters  = 16               // client goroutines of the run through the apiserver
)

// sustainedRates updates m's objects (cm-00000… as seeded) at fixed rates for rateRun each, with
// the daemon d running, and prints for each the rate reached, the lag from the last update until
// the remote matched, and the daemon's CPU per update; then the highest rate followed within
// rateMaxLag, naming as not offered a rate the writers fell short of (under 95% of it) while the
// remote kept within rateMaxLag. These updates go straight into etcd from etcdWriters goroutines
// (the daemon sees them as watch events, like any), one put each: puts batched in etcd
// transactions would share a resourceVersion, which no write through the apiserver does, and a
// watch resumed among them would skip the rest (tried: at 4,000/s six files stayed stale). Through the apiserver the load
// generator is the limit on two cores, as the last run shows, which sends as fast as apiWriters
// clients can through the apiserver, whose writes also call the daemon's admission webhook.
func sustainedRates(b *testing.B, m *mirrorBench, etcd *clientv3.Client, d *testenv.Daemon) {
	n := len(m.want)
	best, unoffered := 0, ""
	for round, rate := range []int{1000, 2000, 4000} {
		r := m.driveRate(d, rate, etcdWriters, m.etcdUpdates(etcd, rate, n, 1+round*10))
		report("updates at %d/s for %v into 1 destination of %d, straight into etcd by %d writers: %s (%s)",
			rate, rateRun, n, etcdWriters, r, beforeRates[rate])
		switch {
		case r.lag > rateMaxLag:
		case r.reached >= 0.95*float64(rate):
			best = rate
		default: // the writers, on the same cores, fell short: the rate was not offered
			unoffered += fmt.Sprintf("; %d/s not offered: the writers reached %.0f/s, the remote %.1f s behind", rate, r.reached, r.lag.Seconds())
		}
	}
	report("highest rate of updates followed with the remote ≤ %v behind: %d/s (tried 1,000, 2,000, 4,000; reached ≥ 95%% of it%s; %s)",
		rateMaxLag, best, unoffered, beforeBestRate)
	r := m.driveRate(d, 4000, apiWriters, m.apiUpdates(4000, n, 100))
	report("updates through the apiserver by %d clients for %v, as fast as they go (up to 4,000/s): %s (%s)", apiWriters, rateRun, r, beforeAPIRate)
}

// rateResult is what one run at a fixed rate measured.
type rateResult struct {
	sent       int
	reached    float64       // updates per second sent
	lag        time.Duration // from the last update until the remote matched
	cpuPerItem float64       // the daemon's CPU µs per update, catching up included
}

func (r rateResult) String() string {
	return fmt.Sprintf("%d updates, %.0f/s reached; last update → remote matches %.1f s; daemon CPU %.0f µs per update",
		r.sent, r.reached, r.lag.Seconds(), r.cpuPerItem)
}

// driveRate has writers goroutines send updates at rate per second for rateRun, the k-th due
// at k/rate. A writer that falls behind sends at once, and none starts an update after rateRun,
// so reached says what they managed. The remote gets the upkeep its pushes would have started
// before the run (see newMirrorBench), not during it.
func (m *mirrorBench) driveRate(d *testenv.Daemon, rate, writers int, updates []func() error) rateResult {
	if err := m.srv.Upkeep("state"); err != nil {
		m.tb.Fatal(err)
	}
	_, cpu0 := usage(m.tb, d.Pid())
	var next, sent atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	start := time.Now()
	for range writers {
		wg.Go(func() {
			for k := int(next.Add(1) - 1); k < len(updates) && time.Since(start) < rateRun; k = int(next.Add(1) - 1) {
				time.Sleep(time.Until(start.Add(time.Duration(k) * time.Second / time.Duration(rate)))) // the rate's pace
				if err := updates[k](); err != nil {
					errs <- err
					return
				}
				sent.Add(1)
			}
		})
	}
	wg.Wait()
	last := time.Now()
	close(errs)
	if err := <-errs; err != nil {
		m.tb.Fatal(err)
	}
	matched := m.mustLand(2 * time.Minute)
	_, cpu1 := usage(m.tb, d.Pid())
	return rateResult{sent: int(sent.Load()), reached: float64(sent.Load()) / last.Sub(start).Seconds(), lag: matched.Sub(last),
		cpuPerItem: (cpu1 - cpu0) * 1e6 / float64(sent.Load())}
}

// etcdUpdates are the updates of a run of rateRun at rate straight into etcd: the k-th gives
// object k mod n payload round+k/n. Their encodings and Git's targets are made beforehand, so
// that the writers only write.
func (m *mirrorBench) etcdUpdates(etcd *clientv3.Client, rate, n, round int) []func() error {
	updates := make([]func() error, rate*int(rateRun/time.Second))
	m.parallel(0, len(updates), func(ctx context.Context, k int) error {
		put, path, hash, err := m.putOp(k%n, round+k/n)
		updates[k] = func() error {
			if _, err := etcd.Do(ctx, put); err != nil {
				return fmt.Errorf("write etcd: %w", err)
			}
			m.record(path, hash)
			return nil
		}
		return err
	})
	return updates
}

// apiUpdates are the updates of a run of rateRun at rate through the apiserver, unthrottled by
// the client: the k-th patches object k mod n with payload round+k/n.
func (m *mirrorBench) apiUpdates(rate, n, round int) []func() error {
	cfg := planes.Of(m.tb).AdminConfig()
	cfg.QPS = -1 // no client-side rate limit: the apiserver is what is measured
	dyn := dynamic.NewForConfigOrDie(cfg).Resource(configMaps).Namespace(m.ns)
	updates := make([]func() error, rate*int(rateRun/time.Second))
	for k := range updates {
		updates[k] = func() error {
			name := fmt.Sprintf("cm-%05d", k%n)
			patch, err := json.Marshal(map[string]any{"data": payload(k%n, round+k/n)})
			if err != nil {
				return err
			}
			got, err := dyn.Patch(context.Background(), name, types.MergePatchType, patch, metav1.PatchOptions{})
			if err != nil {
				return fmt.Errorf("patch %s: %w", name, err)
			}
			m.expect(name, got)
			return nil
		}
	}
	return updates
}
