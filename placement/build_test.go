package placement

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// kustomizeFiles is the folder testdata/kustomize as Build takes it: paths relative to it.
func kustomizeFiles(tb testing.TB) map[string][]byte {
	tb.Helper()
	const root = "testdata/kustomize"
	files := map[string][]byte{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, p)
		files[filepath.ToSlash(rel)] = data
		return err
	})
	if err != nil {
		tb.Fatal(err)
	}
	return files
}

// withFiles is files and the extra files, which replace files' own of the same path.
func withFiles(files map[string][]byte, extra map[string]string) map[string][]byte {
	out := make(map[string][]byte, len(files)+len(extra))
	for p, data := range files {
		out[p] = data
	}
	for p, text := range extra {
		out[p] = []byte(text)
	}
	return out
}

// MustBuild builds dir of files and fails the test on an error.
func MustBuild(tb testing.TB, files map[string][]byte, dir string) map[Key]map[string]any {
	tb.Helper()
	objs, err := Build(files, dir)
	if err != nil {
		tb.Fatal(err)
	}
	return objs
}

// rendered is the object k of objs; the test fails when it is missing.
func rendered(tb testing.TB, objs map[Key]map[string]any, k Key) map[string]any {
	tb.Helper()
	obj, ok := objs[k]
	if !ok {
		tb.Fatalf("%s is not rendered; rendered: %v", k, keysOf(objs))
	}
	return obj
}

func keysOf(objs map[Key]map[string]any) []string {
	var out []string
	for k := range objs {
		out = append(out, k.String())
	}
	return out
}

// renderedAt is the value at path p (as P reads it) of obj, nil when absent.
func renderedAt(obj map[string]any, p string) any {
	var v any = obj
	for _, s := range P(p) {
		switch {
		case s.Field != "":
			m, _ := v.(map[string]any)
			v = m[s.Field]
		case s.Match != "":
			v = itemWith(v, s.Match, s.Value)
		default:
			l, _ := v.([]any)
			if s.Index >= len(l) {
				return nil
			}
			v = l[s.Index]
		}
	}
	return v
}

func itemWith(list any, field string, value any) any {
	l, _ := list.([]any)
	for _, it := range l {
		if m, ok := it.(map[string]any); ok && canonical(m[field]) == canonical(value) {
			return m
		}
	}
	return nil
}

// expect checks the values of obj at paths; a want of int is an int64 the render must hold.
func expect(tb testing.TB, obj map[string]any, want map[string]any) {
	tb.Helper()
	for p, w := range want {
		if i, ok := w.(int); ok {
			w = int64(i)
		}
		if got := renderedAt(obj, p); got != w {
			tb.Errorf("%s = %#v, want %#v", p, got, w)
		}
	}
}

var (
	podinfoDeployment = Key{Group: "apps", Kind: "Deployment", Namespace: "podinfo-production", Name: "podinfo"}
	podinfoService    = Key{Kind: "Service", Namespace: "podinfo-production", Name: "podinfo"}
	podinfoNamespace  = Key{Kind: "Namespace", Name: "podinfo-production"}
)

func TestBuildRendersOverlayOnSiblingBase(t *testing.T) {
	objs := MustBuild(t, kustomizeFiles(t), "apps/production")
	if len(objs) != 3 {
		t.Errorf("rendered %v, want the namespace, the deployment and the service", keysOf(objs))
	}
	expect(t, rendered(t, objs, podinfoDeployment), map[string]any{
		"spec.replicas":        3, // replicas:
		"spec.minReadySeconds": 3, // the base's, untouched
		"spec.template.spec.containers[name=podinfod].image":                              "ghcr.io/stefanprodan/podinfo:6.5.4", // images:
		"spec.template.spec.containers[name=podinfod].env[name=PODINFO_UI_MESSAGE].value": "production",                         // the patch
		"spec.template.spec.containers[name=podinfod].resources.limits.memory":            "1Gi",                                // the patch over the base
		"spec.template.spec.containers[name=podinfod].resources.limits.cpu":               "2000m",                              // the base's, kept
		"spec.template.spec.containers[name=podinfod].ports[name=http].containerPort":     9898,
	})
	expect(t, rendered(t, objs, podinfoService), map[string]any{
		"spec.ports[name=http].port":       9898,
		"spec.ports[name=http].targetPort": "http",
		"spec.selector.app":                "podinfo",
	})
	// kustomize's namespace: renames a Namespace object of the build to the namespace it sets.
	expect(t, rendered(t, objs, podinfoNamespace), map[string]any{"metadata.namespace": nil})
}

func TestBuildRendersGeneratorLabelsAndPrefix(t *testing.T) {
	objs := MustBuild(t, kustomizeFiles(t), "apps/generated")
	var config map[string]any
	for k, obj := range objs {
		if k.Kind == "ConfigMap" && k.Namespace == "web" && strings.HasPrefix(k.Name, "team-web-config-") {
			config = obj
		}
	}
	if config == nil || len(objs) != 2 {
		t.Fatalf("rendered %v, want the deployment and a generated team-web-config-<hash>", keysOf(objs))
	}
	expect(t, config, map[string]any{
		"data.LOG_LEVEL":       "debug",
		"metadata.labels.team": "web",
		"metadata.labels.tier": "frontend",
		"metadata.namespace":   "web",
	})
	if got := config["data"].(map[string]any)["settings.ini"]; got != "[server]\nport = 8080\n" {
		t.Errorf("data[settings.ini] = %q, want the file's text", got) // a key with a dot: not through P
	}
	deploy := rendered(t, objs, Key{Group: "apps", Kind: "Deployment", Namespace: "web", Name: "team-web"})
	expect(t, deploy, map[string]any{
		"spec.replicas":                      2,
		"metadata.labels.team":               "web",
		"metadata.labels.tier":               "frontend",
		"spec.selector.matchLabels.team":     "web", // commonLabels reach selectors
		"spec.selector.matchLabels.tier":     nil,   // labels with includeSelectors: false do not
		"spec.template.metadata.labels.team": "web",
		"spec.template.spec.containers[name=web].envFrom[0].configMapRef.name": config["metadata"].(map[string]any)["name"],
	})
}

// TestBuildLoadsFilesOfSiblingFolders: a patch outside the kustomization's folder, inside the
// adopted folder, renders as Flux renders it (no root-only load restriction).
func TestBuildLoadsFilesOfSiblingFolders(t *testing.T) {
	files := withFiles(kustomizeFiles(t), map[string]string{
		"apps/staging/kustomization.yaml": "resources: [../base/podinfo]\npatches:\n  - path: ../shared/replicas.yaml\n",
		"apps/shared/replicas.yaml":       "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: podinfo\n  namespace: podinfo\nspec:\n  replicas: 2\n",
	})
	objs := MustBuild(t, files, "./apps/staging/")
	expect(t, rendered(t, objs, Key{Group: "apps", Kind: "Deployment", Namespace: "podinfo", Name: "podinfo"}),
		map[string]any{"spec.replicas": 2, "spec.template.spec.containers[name=podinfod].image": "ghcr.io/stefanprodan/podinfo:6.5.0"})
}

// TestBuildGivesSanitizeTypes: the rendered objects hold what sanitize.ObjectOf reads from the
// same text: int64 integers, strings that look like other things kept as strings.
func TestBuildGivesSanitizeTypes(t *testing.T) {
	files := map[string][]byte{
		"k/kustomization.yaml": []byte("resources: [cm.yaml]\n"),
		"k/cm.yaml": []byte(`apiVersion: v1
kind: ConfigMap
metadata:
  name: types
data:
  on: "on"
  date: "2024-01-02"
  number: "012"
binaryData: {}
immutable: true
`),
	}
	obj := rendered(t, MustBuild(t, files, "k"), Key{Kind: "ConfigMap", Name: "types"})
	expect(t, obj, map[string]any{"data.on": "on", "data.date": "2024-01-02", "data.number": "012", "immutable": true})
	deploy := rendered(t, MustBuild(t, kustomizeFiles(t), "apps/production"), podinfoDeployment)
	if r, ok := renderedAt(deploy, "spec.replicas").(int64); !ok || r != 3 {
		t.Errorf("spec.replicas = %#v, want int64(3)", renderedAt(deploy, "spec.replicas"))
	}
}

// benchApps writes n apps into dir of files, each a Deployment (its image image(name)) and a
// Service in one file, and returns the files' names, for a kustomization's resources.
func benchApps(files map[string][]byte, dir string, n int, image func(name string) string) []string {
	var resources []string
	for i := range n {
		name := fmt.Sprintf("app-%02d", i)
		if n >= 100 {
			name = fmt.Sprintf("app-%03d", i)
		}
		resources = append(resources, name+".yaml")
		files[dir+"/"+name+".yaml"] = fmt.Appendf(nil, `apiVersion: apps/v1
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
          image: %[2]s
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
`, name, image(name))
	}
	return resources
}

// BenchmarkBuild renders a kustomization of 50 objects (25 Deployments, 25 Services) with a
// namespace, a label and an image override.
func BenchmarkBuild(b *testing.B) {
	files := map[string][]byte{}
	resources := benchApps(files, "bench", 25, func(string) string { return "nginx:1.27" })
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
