package daemon

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/client-go/rest"

	"github.com/configbutler/gitops-reverser/restore"
)

// BenchmarkRestore restores a folder of 2,000 and of 10,000 ConfigMaps (~1 KiB of data each, in
// one namespace, as the mirror writes them) into the test control plane, then restores it again
// (nothing to change), and prints the wall time and the requests a second. Each object is an apply,
// or for one that exists a dry-run apply (and a real one only when that changes it); what exists
// is read with one list a resource and namespace.
func BenchmarkRestore(b *testing.B) {
	cp := planes.Lend(b)
	for range b.N {
		for _, n := range []int{2000, 10000} {
			dir := b.TempDir()
			ns := fmt.Sprintf("restore-%d-%d", n, time.Now().UnixNano())
			writeConfigMapFolder(b, dir, ns, n)
			for _, run := range []string{"into an empty namespace", "again, nothing to change"} {
				var requests atomic.Int64
				cfg := rest.CopyConfig(cp.AdminConfig())
				cfg.QPS, cfg.Burst = 0, 0 // restore's own limits, as from a kubeconfig
				cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
					return roundTripFunc(func(r *http.Request) (*http.Response, error) {
						requests.Add(1)
						return rt.RoundTrip(r)
					})
				})
				start := time.Now()
				sum, err := restore.Run(context.Background(), restore.Options{Config: cfg, Source: restore.Source{Dir: dir}})
				took := time.Since(start)
				if err != nil {
					b.Fatal(err)
				}
				if f := sum.Count(restore.Failed); f > 0 {
					b.Fatalf("%d of %d failed", f, len(sum.Results))
				}
				fmt.Printf("restore: %d ConfigMaps %s: %.2f s, %d requests, %.0f requests/s (created %d, unchanged %d)\n",
					n, run, took.Seconds(), requests.Load(), float64(requests.Load())/took.Seconds(),
					sum.Count(restore.Created), sum.Count(restore.Unchanged))
			}
		}
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// writeConfigMapFolder writes the files of namespace ns and n ConfigMaps in it, as the mirror lays
// them out.
func writeConfigMapFolder(b *testing.B, dir, ns string, n int) {
	b.Helper()
	write := func(path, doc string) {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	write(filepath.Join(dir, "_cluster", "namespaces", ns+".yaml"), "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: "+ns+"\n")
	value := fmt.Sprintf("%01000d", 7)
	for i := range n {
		name := fmt.Sprintf("cm-%05d", i)
		write(filepath.Join(dir, ns, "configmaps", name+".yaml"), fmt.Sprintf(
			"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: %s\n  namespace: %s\ndata:\n  value: \"%s\"\n", name, ns, value))
	}
}
