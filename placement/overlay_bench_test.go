package placement

import (
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"
)

// BenchmarkOverlayCommit200 is issue 60's figure: the CPU one live change costs in an overlay of
// 200 objects (100 Deployments and 100 Services of a base): placing it (Land) and rendering the
// overlay again to check it (Check), which is what a commit adds to the render the worker keeps.
// Goal: at most 50 ms a commit. Beside it, what kustomize's render of the same files costs
// alone, with no trace and no check: the floor no placement can go under, and what Flux's
// kustomize-controller spends on the same overlay at each reconcile.
//
// Two overlays: production with one images: entry, a replicas: entry, labels and a patch; and
// production pinning every app's image (100 images: entries), where kustomize runs its image
// transformer over every object once for each entry.
func BenchmarkOverlayCommit200(b *testing.B) {
	for range b.N {
		one := "images:\n  - name: ghcr.io/example/app-000\n    newTag: 1.0.1\n" +
			"replicas:\n  - name: app-000\n    count: 3\npatches:\n  - path: app-001-patch.yaml\n"
		var every strings.Builder
		every.WriteString("images:\n")
		for i := range 100 {
			fmt.Fprintf(&every, "  - name: ghcr.io/example/app-%03d\n    newTag: 1.0.1\n", i)
		}
		placeFigures(b, "one images: entry, replicas:, labels and a patch", one, 10)
		placeFigures(b, "an images: entry per app (100)", every.String(), 3)
	}
}

// placeFigures prints the CPU a commit of a replicas change costs in the overlay of 200 objects
// whose kustomization adds tail, over rounds commits, and kustomize's render of it alone.
func placeFigures(b *testing.B, shape, tail string, rounds int) {
	files := map[string][]byte{}
	resources := benchApps(files, "apps/base", 100, func(name string) string { return "ghcr.io/example/" + name + ":1.0.0" })
	files["apps/base/kustomization.yaml"] = []byte("resources: [" + strings.Join(resources, ", ") + "]\n")
	files["apps/production/kustomization.yaml"] = []byte("namespace: production\nresources: [../base]\nlabels:\n  - pairs: {env: production}\n" + tail)
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
	start := cpuTime()
	for n := range rounds {
		ops := []Op{{Path: Path{{Field: "spec"}, {Field: "replicas"}}, Value: int64(4 + n%5)}}
		if _, _, err := o.Place(k, ops, own); err != nil {
			b.Fatal(err)
		}
	}
	perCommit := (cpuTime() - start) / time.Duration(rounds)
	start = cpuTime()
	for range rounds {
		if _, err := newBuildFolder(o.Files).render(o.Dir); err != nil {
			b.Fatal(err)
		}
	}
	render := (cpuTime() - start) / time.Duration(rounds)
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	fmt.Printf("overlay of 200 objects, %s: %.1f ms of CPU a commit to place and check a live change (goal: at most 50 ms); kustomize's render of it alone: %.1f ms\n",
		shape, ms(perCommit), ms(render))
}

// cpuTime is the CPU the process has used, user and system.
func cpuTime() time.Duration {
	var u syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &u)
	return time.Duration(u.Utime.Nano() + u.Stime.Nano())
}
