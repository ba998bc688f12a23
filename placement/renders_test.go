package placement

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
)

// productionDeployment is the production overlay's Deployment as it renders, as a fresh copy
// read back from JSON: other maps, numbers as float64.
func productionDeployment(t *testing.T) map[string]any {
	t.Helper()
	obj := rendered(t, MustBuild(t, kustomizeFiles(t), "apps/production"), podinfoDeployment)
	data, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	var out map[string]any
	if err := json.Unmarshal(data, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// setField puts v at the field path of obj (fields only), creating mappings on the way.
func setField(obj map[string]any, v any, fields ...string) {
	m := obj
	for _, f := range fields[:len(fields)-1] {
		next, ok := m[f].(map[string]any)
		if !ok {
			next = map[string]any{}
			m[f] = next
		}
		m = next
	}
	m[fields[len(fields)-1]] = v
}

func container(obj map[string]any) map[string]any {
	return renderedAt(obj, "spec.template.spec.containers[name=podinfod]").(map[string]any)
}

func TestRendersEqualObject(t *testing.T) {
	files := kustomizeFiles(t)
	cases := map[string]func(map[string]any){
		"the same object":        func(map[string]any) {},
		"a null as absent":       func(o map[string]any) { setField(o, nil, "metadata", "annotations") },
		"a quantity by value":    func(o map[string]any) { setField(container(o), "1024Mi", "resources", "limits", "memory") },
		"an integer as a float":  func(o map[string]any) { setField(o, 3.0, "spec", "replicas") },
		"an integer as an int64": func(o map[string]any) { setField(o, int64(3), "spec", "replicas") },
	}
	for name, change := range cases {
		t.Run(name, func(t *testing.T) {
			want := productionDeployment(t)
			change(want)
			if err := Renders(files, "apps/production", want); err != nil {
				t.Fatalf("Renders: %v, want nil", err)
			}
		})
	}
}

// TestRendersEqualObjectInAnotherKeyOrder: a want read from a document that orders its keys
// otherwise than the render is the same object.
func TestRendersEqualObjectInAnotherKeyOrder(t *testing.T) {
	want := object(t, `kind: Service
metadata:
  namespace: podinfo-production
  name: podinfo
spec:
  ports:
    - targetPort: http
      protocol: TCP
      port: 9898
      name: http
  type: ClusterIP
  selector: {app: podinfo}
apiVersion: v1
`)
	if err := Renders(kustomizeFiles(t), "apps/production", want); err != nil {
		t.Fatalf("Renders: %v, want nil", err)
	}
}

func TestRendersReportsFirstDifference(t *testing.T) {
	cases := []struct {
		name   string
		change func(map[string]any)
		says   string
	}{
		{"a differing image", func(o map[string]any) { container(o)["image"] = "ghcr.io/stefanprodan/podinfo:6.6.0" },
			`spec.template.spec.containers[name=podinfod].image = "ghcr.io/stefanprodan/podinfo:6.5.4", want "ghcr.io/stefanprodan/podinfo:6.6.0"`},
		{"replicas the overlay does not set", func(o map[string]any) { setField(o, 5, "spec", "replicas") },
			"spec.replicas = 3, want 5"},
		{"a field the render has and want has not", func(o map[string]any) { delete(container(o), "env") },
			`spec.template.spec.containers[name=podinfod].env = [{"name":"PODINFO_UI_MESSAGE","value":"production"}], want nothing`},
		{"a label want has and the render has not", func(o map[string]any) { setField(o, "x", "metadata", "labels", "team") },
			`metadata.labels = nothing, want {"team":"x"}`},
		{"a list of another length", func(o map[string]any) { container(o)["command"] = []any{"./podinfo"} },
			`spec.template.spec.containers[name=podinfod].command = ["./podinfo","--port=9898","--level=info"], want ["./podinfo"]`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			want := productionDeployment(t)
			c.change(want)
			err := Renders(kustomizeFiles(t), "apps/production", want)
			if err == nil {
				t.Fatal("Renders: nil, want the difference")
			}
			say := "the kustomization in apps/production renders Deployment.apps podinfo-production/podinfo with " + c.says
			if err.Error() != say {
				t.Errorf("Renders:\n %v\nwant\n %s", err, say)
			}
		})
	}
}

func TestRendersMissingObject(t *testing.T) {
	want := productionDeployment(t)
	setField(want, "podinfo", "metadata", "namespace") // the base's namespace: the overlay moves it
	err := Renders(kustomizeFiles(t), "apps/production", want)
	if !errors.Is(err, ErrNotRendered) || !strings.Contains(err.Error(), "renders no Deployment.apps podinfo/podinfo") {
		t.Fatalf("Renders: %v, want ErrNotRendered naming the object", err)
	}
}

func TestRendersPassesBuildRefusals(t *testing.T) {
	files := withFiles(kustomizeFiles(t), map[string]string{
		"apps/production/kustomization.yaml": "resources: [https://example.com/podinfo.yaml]\n",
	})
	if err := Renders(files, "apps/production", productionDeployment(t)); !errors.Is(err, ErrRemote) {
		t.Fatalf("Renders: %v, want ErrRemote", err)
	}
	if err := Renders(files, "apps/production", map[string]any{"kind": "Deployment"}); err == nil ||
		!strings.Contains(err.Error(), "want: an object without") {
		t.Fatalf("Renders of an object without identity: %v, want an error saying so", err)
	}
}

// BenchmarkBuild renders a kustomization of 50 objects (25 Deployments, 25 Services) with a
// namespace, a label and an image override.
func BenchmarkBuild(b *testing.B) {
	files := map[string][]byte{}
	var resources []string
	for i := range 25 {
		name := fmt.Sprintf("app-%02d", i)
		resources = append(resources, name+".yaml")
		files["bench/"+name+".yaml"] = fmt.Appendf(nil, `apiVersion: apps/v1
kind: Deployment
metadata:
  name: %[1]s
spec:
  replicas: 2
  selector:
    matchLabels: {app: %[1]s}
  template:
    metadata:
      labels: {app: %[1]s}
    spec:
      containers:
        - name: web
          image: nginx:1.27
          ports: [{containerPort: 8080, name: http}]
          resources: {requests: {cpu: 100m, memory: 64Mi}}
---
apiVersion: v1
kind: Service
metadata:
  name: %[1]s
spec:
  selector: {app: %[1]s}
  ports: [{port: 80, targetPort: http}]
`, name)
	}
	files["bench/kustomization.yaml"] = []byte("namespace: bench\nlabels:\n  - pairs: {team: bench}\nimages:\n  - name: nginx\n    newTag: \"1.28\"\nresources: [" + strings.Join(resources, ", ") + "]\n")
	if objs := MustBuild(b, files, "bench"); len(objs) != 50 {
		b.Fatalf("rendered %d objects, want 50", len(objs))
	}
	for b.Loop() {
		if _, err := Build(files, "bench"); err != nil {
			b.Fatal(err)
		}
	}
}
