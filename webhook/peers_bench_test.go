package webhook

import (
	"fmt"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/configbutler/gitops-reverser/metrics"
)

// BenchmarkAdmissionWithPeers measures one UPDATE review (~3.5 KiB) in the handler, in process,
// with its record forwarded over TLS on loopback to 0 and to 2 peer replicas, one review at a
// time as the apiserver's call waits for it. It reports p50/p99 of the handler's latency; the
// difference is what forwarding costs each admission.
func BenchmarkAdmissionWithPeers(b *testing.B) {
	const objects = 1024
	bodies := make([][]byte, objects)
	for i := range bodies {
		name := fmt.Sprintf("app-%04d", i)
		bodies[i] = reviewCase{op: "UPDATE", namespace: "team-a", name: name,
			object: benchConfigMap(name, 2), oldObject: benchConfigMap(name, 1)}.review(b)
	}
	certs := newStaticCerts(b, peerService)
	for _, peers := range []int{0, 2} {
		b.Run(fmt.Sprintf("peers=%d", peers), func(b *testing.B) {
			var addrs []string
			for range peers {
				r := startReplica(b, certs)
				addrs = append(addrs, r.addr)
			}
			a := startReplica(b, certs, addrs...)
			post(a.handler, http.MethodPost, "application/json", bodies[0]) // connections up before timing
			latencies := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for i := range b.N {
				t0 := time.Now()
				rec := post(a.handler, http.MethodPost, "application/json", bodies[i%objects])
				latencies = append(latencies, time.Since(t0))
				if rec.Code != http.StatusOK {
					b.Fatalf("status %d: %s", rec.Code, rec.Body)
				}
			}
			b.StopTimer()
			if lost := a.forwarded(metrics.ForwardFailed) + a.forwarded(metrics.ForwardTimeout) + a.forwarded(metrics.ForwardRefused); lost != 0 {
				b.Errorf("%v forwards did not arrive", lost)
			}
			slices.Sort(latencies)
			pct := func(p float64) float64 {
				return float64(latencies[int(p*float64(len(latencies)-1))].Nanoseconds()) / 1e3
			}
			p50, p99 := pct(0.50), pct(0.99)
			b.ReportMetric(p50, "p50-µs")
			b.ReportMetric(p99, "p99-µs")
			fmt.Printf("webhook: admission with %d peers: p50 %.0f µs, p99 %.0f µs (%d reviews)\n", peers, p50, p99, len(latencies))
		})
	}
}
