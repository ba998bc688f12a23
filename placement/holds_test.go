package placement

import "testing"

// TestPassesThroughOnlyAKustomizationOfResources: a kustomization of resources and a namespace
// renders its files' values as written; any other field may decide one, and so does the
// namespace transformer for an op that sets a namespace.
func TestPassesThroughOnlyAKustomizationOfResources(t *testing.T) {
	image := []Op{{Path: Path{{Field: "spec"}, {Field: "template"}, {Field: "spec"}, {Field: "containers"}, {Match: "name", Value: "web"}, {Field: "image"}}, Value: "nginx:1.27"}}
	base := "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nnamespace: apps # the team's\nresources:\n- web.yaml\n"
	for _, c := range []struct {
		name          string
		kustomization string
		ops           []Op
		want          bool
	}{
		{"resources and a namespace", base, image, true},
		{"no apiVersion or kind", "resources:\n- web.yaml\n", image, true},
		{"images decide a tag", base + "images:\n- name: nginx\n  newTag: \"1.25\"\n", image, false},
		{"replicas", base + "replicas:\n- name: web\n  count: 3\n", image, false},
		{"a patch", base + "patches:\n- path: patch.yaml\n", image, false},
		{"labels", base + "labels:\n- pairs: {team: a}\n", image, false},
		{"a name prefix", base + "namePrefix: prod-\n", image, false},
		{"a generator", base + "configMapGenerator:\n- name: cfg\n  literals: [a=b]\n", image, false},
		{"an op that sets a namespace", base, []Op{{Path: Path{{Field: "subjects"}, {Index: 0}, {Field: "namespace"}}, Value: "x"}}, false},
		{"not YAML", "resources: [\n", image, false},
		{"two documents", base + "---\n" + base, image, false},
	} {
		if got := PassesThrough([]byte(c.kustomization), c.ops); got != c.want {
			t.Errorf("%s: PassesThrough = %v, want %v", c.name, got, c.want)
		}
	}
}
