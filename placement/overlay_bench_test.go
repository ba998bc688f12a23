package placement

import (
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"
)

// BenchmarkOverlayCommit200 is issue 60's figure: the CPU one live change costs in an overlay of
// 200 objects (100 Deployments and 100 Services of a base, with images:, replicas:, labels and a
// patch in the overlay): placing it (Land) and rendering the overlay again to check it (Check),
// which is what a commit adds to the render the worker keeps. Goal: at most 50 ms a commit.
func BenchmarkOverlayCommit200(b *testing.B) {
	files := map[string][]byte{}
	resources := benchApps(files, "apps/base", 100, func(name string) string { return "ghcr.io/example/" + name + ":1.0.0" })
	files["apps/base/kustomization.yaml"] = []byte("resources: [" + strings.Join(resources, ", ") + "]\n")
	files["apps/production/kustomization.yaml"] = []byte(`namespace: production
resources: [../base]
labels:
  - pairs: {env: production}
images:
  - name: ghcr.io/example/app-000
    newTag: 1.0.1
replicas:
  - name: app-000
    count: 3
patches:
  - path: app-001-patch.yaml
`)
	files["apps/production/app-001-patch.yaml"] = []byte("apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: app-001}\nspec:\n  template:\n    spec:\n      containers:\n        - name: web\n          resources: {limits: {memory: 512Mi}}\n")
	o, err := RenderOverlay(files, "apps/production")
	if err != nil {
		b.Fatal(err)
	}
	if len(o.Objects) != 200 {
		b.Fatalf("rendered %d objects, want 200", len(o.Objects))
	}
	own := func(p string) bool { return strings.HasPrefix(p, "apps/production/") }
	k := Key{Group: "apps", Kind: "Deployment", Namespace: "production", Name: "app-000"}
	start, n := cpuTime(), 0
	for b.Loop() {
		n++
		ops := []Op{{Path: Path{{Field: "spec"}, {Field: "replicas"}}, Value: int64(4 + n%5)}}
		if _, _, err := o.Place(k, ops, own); err != nil {
			b.Fatal(err)
		}
	}
	perCommit := (cpuTime() - start) / time.Duration(n)
	b.ReportMetric(float64(perCommit.Microseconds())/1000, "cpu-ms/commit")
	fmt.Printf("overlay of 200 objects: %.1f ms of CPU a commit to place and check a live change (goal: at most 50 ms)\n", float64(perCommit.Microseconds())/1000)
}

// cpuTime is the CPU the process has used, user and system.
func cpuTime() time.Duration {
	var u syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &u)
	return time.Duration(u.Utime.Nano() + u.Stime.Nano())
}
