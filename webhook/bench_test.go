package webhook

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/configbutler/gitops-reverser/metrics"
)

// benchConfigMap is a ConfigMap of about 1 KiB of data as the apiserver hands it to a webhook:
// with uid, timestamps and managedFields.
func benchConfigMap(name string, rev int) map[string]any {
	data := map[string]any{}
	for i := range 8 {
		data[fmt.Sprintf("key-%d", i)] = fmt.Sprintf("value-%d-%d", i, rev)
	}
	var conf strings.Builder
	for i := 0; conf.Len() < 900; i++ {
		fmt.Fprintf(&conf, "setting_%d = %d # tuned for the benchmark\n", i, i*10)
	}
	data["app.conf"] = conf.String()
	return map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": name, "namespace": "team-a", "uid": "9b2e0c8e-4f1d-4c57-a3f4-1d2e3f4a5b6c",
			"resourceVersion": "48213", "creationTimestamp": "2025-10-20T12:00:00Z",
			"labels": map[string]any{"app": "web", "tier": "frontend"},
			"managedFields": []any{map[string]any{"manager": "kubectl-client-side-apply", "operation": "Update",
				"apiVersion": "v1", "time": "2025-10-20T12:00:00Z", "fieldsType": "FieldsV1",
				"fieldsV1": map[string]any{"f:data": map[string]any{".": map[string]any{}, "f:app.conf": map[string]any{}}}}}},
		"data": data}
}

// BenchmarkAdmissionHandler measures the handler in process (no TLS, no network): each iteration
// is a fixed batch of UPDATE reviews (object + oldObject, ~3.5 KiB each) over distinct objects,
// spread across GOMAXPROCS goroutines. It reports p50/p99 latency inside the handler and the
// reviews per second of the whole batch.
func BenchmarkAdmissionHandler(b *testing.B) {
	const reviews, objects = 20000, 1024
	bodies := make([][]byte, objects)
	for i := range bodies {
		name := fmt.Sprintf("app-%04d", i)
		bodies[i] = reviewCase{op: "UPDATE", namespace: "team-a", name: name,
			object: benchConfigMap(name, 2), oldObject: benchConfigMap(name, 1)}.review(b)
	}
	m := metrics.New().Attribution
	store := NewStore(StoreConfig{Metrics: m})
	runStore(b, store)
	var watched Watched
	watched.Set([]Resource{{GVR: configMaps, Namespaced: true}})
	h := NewAdmissionHandler(store, &watched, m, nil)

	workers := runtime.GOMAXPROCS(0)
	latencies := make([]time.Duration, 0, reviews*b.N)
	var elapsed time.Duration
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	cpuBefore := processCPU()
	b.ResetTimer()
	for range b.N {
		perWorker := make([][]time.Duration, workers)
		start := time.Now()
		var wg sync.WaitGroup
		for w := range workers {
			wg.Go(func() {
				lat := make([]time.Duration, 0, reviews/workers+1)
				req := httptest.NewRequest(http.MethodPost, AdmissionPath, nil)
				req.Header.Set("Content-Type", "application/json")
				for i := w; i < reviews; i += workers {
					body := bodies[i%objects]
					// One request per worker, refilled: the handler keeps nothing of it, and
					// building a fresh one (bufio, header parsing) would only feed the GC.
					req.Body, req.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
					rec := httptest.NewRecorder()
					t0 := time.Now()
					h.ServeHTTP(rec, req)
					lat = append(lat, time.Since(t0))
					if rec.Code != http.StatusOK {
						b.Errorf("status %d: %s", rec.Code, rec.Body)
						return
					}
				}
				perWorker[w] = lat
			})
		}
		wg.Wait()
		elapsed += time.Since(start)
		for _, lat := range perWorker {
			latencies = append(latencies, lat...)
		}
	}
	b.StopTimer()
	cpu := processCPU() - cpuBefore
	runtime.ReadMemStats(&after)

	slices.Sort(latencies)
	pct := func(p float64) float64 {
		return float64(latencies[int(p*float64(len(latencies)-1))].Nanoseconds()) / 1e3
	}
	n := float64(len(latencies))
	p50, p99, rate := pct(0.50), pct(0.99), n/elapsed.Seconds()
	b.ReportMetric(p50, "p50-µs")
	b.ReportMetric(p99, "p99-µs")
	b.ReportMetric(rate, "reviews/s")
	b.ReportMetric(float64(cpu.Microseconds())/n, "cpu-µs/review") // load-independent: what a review costs
	b.ReportMetric(float64(after.Mallocs-before.Mallocs)/n, "allocs/review")
	b.ReportMetric(float64(after.TotalAlloc-before.TotalAlloc)/n, "B/review")
	fmt.Printf("webhook: handler p50 %.0f µs, p99 %.0f µs, %.0f reviews/s\n", p50, p99, rate)
}

// processCPU is the user+system CPU time of this process, GC included.
func processCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
