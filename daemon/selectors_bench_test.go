package daemon

import (
	"context"
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	"github.com/configbutler/gitops-reverser/crds"
)

// BenchmarkSelectors seeds 2,000 ConfigMaps, half of them labelled mirror=yes, under a WatchRule
// that selects those: once by one objectSelector (the apiserver applies it), once by two rules on
// ConfigMaps whose selectors differ (the daemon lists and watches all 2,000 and matches each).
// Then 500 are relabelled out, until their files are gone.
func BenchmarkSelectors(b *testing.B) {
	cp := planes.Lend(b)
	cases := []struct{ name, rules string }{
		{"one selector, applied by the apiserver", `[{"resources":["configmaps"],"objectSelector":{"matchLabels":{"mirror":"yes"}}}]`},
		{"two selectors, matched by the daemon", `[{"resources":["configmaps"],"objectSelector":{"matchLabels":{"mirror":"yes"}}},` +
			`{"resources":["configmaps"],"objectSelector":{"matchLabels":{"tier":"none"}}}]`},
	}
	for range b.N {
		for _, c := range cases {
			m := newMirrorBench(b, fmt.Sprintf("bench-sel-%d", time.Now().UnixNano()))
			admin := dynamic.NewForConfigOrDie(cp.AdminConfig())
			if _, err := admin.Resource(crds.WatchRules).Namespace(m.ns).Patch(context.Background(), "cms", types.MergePatchType,
				[]byte(`{"spec":{"rules":`+c.rules+`}}`), metav1.PatchOptions{}); err != nil {
				b.Fatal(err)
			}
			m.parallel(0, 2000, func(ctx context.Context, i int) error {
				name := fmt.Sprintf("cm-%05d", i)
				meta := map[string]any{"name": name, "namespace": m.ns}
				if i%2 == 0 {
					meta["labels"] = map[string]any{"mirror": "yes"}
				}
				got, err := m.dyn.Create(ctx, &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
					"metadata": meta, "data": payload(i, 0)}}, metav1.CreateOptions{})
				if err == nil && i%2 == 0 {
					m.expect(name, got)
				}
				return err
			})
			start := time.Now()
			d := startDaemon(b, b.TempDir())
			seed := m.converged(start)
			m.parallel(0, 500, func(ctx context.Context, i int) error {
				name := fmt.Sprintf("cm-%05d", 2*i)
				_, err := m.dyn.Patch(ctx, name, types.MergePatchType, []byte(`{"metadata":{"labels":{"mirror":null}}}`), metav1.PatchOptions{})
				if err == nil {
					m.expect(name, nil)
				}
				return err
			})
			out := m.converged(time.Now())
			rss, cpu := usage(b, d.Pid())
			report("selectors, %s: seed 1,000 of 2,000: %.2f s; 500 relabelled out → their files gone: %.2f s; peak RSS %.0f MiB; CPU %.2f s",
				c.name, seed.Seconds(), out.Seconds(), rss, cpu)
			d.Stop(b)
			m.forget()
		}
	}
}
