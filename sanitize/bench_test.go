package sanitize

import (
	"fmt"
	"strings"
	"testing"
)

// configMap1KiB is a ConfigMap with about 1 KiB of data: a few short values and one config file.
func configMap1KiB() map[string]any {
	data := map[string]any{}
	for i := range 8 {
		data[fmt.Sprintf("key-%d", i)] = fmt.Sprintf("value-%d", i)
	}
	var conf strings.Builder
	for i := 0; conf.Len() < 900; i++ {
		fmt.Fprintf(&conf, "setting_%d = %d # tuned for the benchmark\n", i, i*10)
	}
	data["app.conf"] = conf.String()
	return map[string]any{
		"apiVersion": "v1",
		"kind":       "ConfigMap",
		"metadata": map[string]any{
			"name": "app-config", "namespace": "team-a",
			"labels": map[string]any{"app": "web", "tier": "frontend"},
		},
		"data": data,
	}
}

func BenchmarkYAMLConfigMap1KiB(b *testing.B) {
	obj := configMap1KiB()
	out, err := YAML(obj)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(out)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := YAML(obj); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkObjectDeployment sanitizes a Deployment as the watch gets it from the apiserver, with its
// managedFields and a controller's status.
func BenchmarkObjectDeployment(b *testing.B) {
	obj := edit(mustLive(b).get(b, "deployment"), func(o, _ map[string]any) {
		o["status"] = map[string]any{
			"observedGeneration": int64(1), "replicas": int64(2), "readyReplicas": int64(2),
			"conditions": []any{map[string]any{"type": "Available", "status": "True", "reason": "MinimumReplicasAvailable"}},
		}
	})
	b.ReportAllocs()
	for b.Loop() {
		Object(obj)
	}
}

// BenchmarkSanitizeAndHashDeployment is the whole per-event cost: sanitize, render and hash.
func BenchmarkSanitizeAndHashDeployment(b *testing.B) {
	obj := mustLive(b).get(b, "deployment")
	b.ReportAllocs()
	for b.Loop() {
		y, err := YAML(Object(obj))
		if err != nil {
			b.Fatal(err)
		}
		Hash(y)
	}
}

// BenchmarkSanitizeDeepObject sanitizes and renders a custom resource nested 1,000, 3,000 and 9,000
// levels deep (6, 18 and 54 KB of JSON). It reports the bytes of JSON in and YAML out next to the
// bytes allocated, so a return of quadratic output or allocation shows in the figures.
func BenchmarkSanitizeDeepObject(b *testing.B) {
	for _, depth := range []int{1000, 3000, 9000} {
		b.Run(fmt.Sprintf("depth=%d", depth), func(b *testing.B) {
			obj := deepChain(depth)
			var out []byte
			b.ReportAllocs()
			for b.Loop() {
				var err error
				if out, err = YAML(Object(obj)); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(len(mustJSON(b, obj))), "json-B")
			b.ReportMetric(float64(len(out)), "yaml-B")
		})
	}
}
