package receiver

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Shape of BenchmarkHandlerGitHubPush.
const (
	benchSenders  = 8
	benchDuration = 2 * time.Second
)

// BenchmarkHandlerGitHubPush sends signed GitHub push deliveries (the recorded payload, each with
// a new delivery id) through the real server on loopback, from 8 senders with keep-alive
// connections, for about 2 s per run, and reports requests/s and the p99 latency (goal:
// ≥ 2,000/s, p99 ≤ 10 ms). ns/op is the wall time per request over all senders.
func BenchmarkHandlerGitHubPush(b *testing.B) {
	body := mustPayload(b, "github-commit-event.json")
	sig := "sha256=" + sha256Hex(testToken, body)
	r := newRig(b)
	var triggers atomic.Int64
	r.handler = NewHandler(HandlerConfig{Index: r.index, Trigger: func(string, string, string) { triggers.Add(1) },
		Metrics: r.metrics})
	path := r.add(&Entry{Name: "bench", Type: TypeGitHub,
		Targets: []Target{{Namespace: "apps", Name: "d", RepoURL: "https://github.com/jessesuen/test-repo.git"}}})
	url := r.serve(b) + path
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: benchSenders, MaxConnsPerHost: benchSenders}}
	defer client.CloseIdleConnections()

	var seq atomic.Int64
	send := func() (time.Duration, error) {
		req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
		if err != nil {
			return 0, err
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-GitHub-Event", "push")
		req.Header.Set("X-GitHub-Delivery", "bench-"+strconv.FormatInt(seq.Add(1), 10))
		req.Header.Set("X-Hub-Signature-256", sig)
		start := time.Now()
		resp, err := client.Do(req)
		if err != nil {
			return 0, err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusAccepted {
			return 0, fmt.Errorf("status %d", resp.StatusCode)
		}
		return time.Since(start), nil
	}

	var latencies []time.Duration
	var elapsed time.Duration
	b.ResetTimer()
	for range b.N {
		start := time.Now()
		deadline := start.Add(benchDuration)
		var (
			wg   sync.WaitGroup
			mu   sync.Mutex
			errs []error
		)
		for range benchSenders {
			wg.Go(func() {
				var mine []time.Duration
				for time.Now().Before(deadline) {
					d, err := send()
					if err != nil {
						mu.Lock()
						errs = append(errs, err)
						mu.Unlock()
						return
					}
					mine = append(mine, d)
				}
				mu.Lock()
				latencies = append(latencies, mine...)
				mu.Unlock()
			})
		}
		wg.Wait()
		elapsed += time.Since(start)
		if len(errs) > 0 {
			b.Fatalf("delivery failed: %v", errs[0])
		}
	}
	b.StopTimer()
	n := len(latencies)
	if n == 0 || triggers.Load() != int64(n) {
		b.Fatalf("%d deliveries, %d triggers", n, triggers.Load())
	}
	slices.Sort(latencies)
	p99 := latencies[min(n-1, n*99/100)]
	rate := float64(n) / elapsed.Seconds()
	b.ReportMetric(float64(elapsed.Nanoseconds())/float64(n), "ns/op")
	b.ReportMetric(rate, "req/s")
	b.ReportMetric(float64(p99.Microseconds())/1000, "p99-ms")
	fmt.Printf("receiver: signed GitHub pushes on loopback: %.0f req/s, p99 %.2f ms\n", rate, float64(p99.Microseconds())/1000)
}
