package placement

import (
	"fmt"
	"strings"
	"testing"
)

// BenchmarkIndexPut indexes a folder of 2,000 objects in 200 files (ten documents each, a
// Deployment and a Service for five apps) and 20 kustomizations: one op is the whole folder, as
// at clone; ns/file is what one changed file costs at a fetch.
func BenchmarkIndexPut(b *testing.B) {
	type file struct {
		path string
		data []byte
	}
	var files []file
	for f := range 200 {
		dir := fmt.Sprintf("apps/team-%02d", f/10)
		var s strings.Builder
		for a := range 5 {
			name := fmt.Sprintf("app-%03d-%d", f, a)
			fmt.Fprintf(&s, "---\napiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: %s\n  labels:\n    app: %s\n", name, name)
			fmt.Fprintf(&s, "spec:\n  replicas: 2\n  selector:\n    matchLabels:\n      app: %s\n  template:\n    metadata:\n      labels:\n        app: %s\n", name, name)
			fmt.Fprintf(&s, "    spec:\n      containers:\n        - name: web\n          image: ghcr.io/example/%s:1.0.0 # pinned\n          ports:\n            - containerPort: 8080\n", name)
			fmt.Fprintf(&s, "---\napiVersion: v1\nkind: Service\nmetadata:\n  name: %s\nspec:\n  selector:\n    app: %s\n  ports:\n    - port: 80\n      targetPort: 8080\n", name, name)
		}
		files = append(files, file{fmt.Sprintf("%s/app-%03d.yaml", dir, f), []byte(s.String())})
		if f%10 == 0 {
			files = append(files, file{dir + "/kustomization.yaml", fmt.Appendf(nil, "namespace: team-%02d\nresources:\n  - app-%03d.yaml\n", f/10, f)})
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		x := NewIndex("apps")
		for _, f := range files {
			x.Put(f.path, f.data)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(files)), "ns/file")
	x := NewIndex("apps")
	for _, f := range files {
		x.Put(f.path, f.data)
	}
	if n := len(all(x)); n != 2000 {
		b.Fatalf("%d objects indexed, want 2000", n)
	}
}
