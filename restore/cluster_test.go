package restore

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/configbutler/gitops-reverser/sanitize"
	"github.com/configbutler/gitops-reverser/testenv"
)

var cp *testenv.ControlPlane

func TestMain(m *testing.M) { os.Exit(testenv.RunMain(m, &cp)) }

var (
	configMaps = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	secrets    = schema.GroupVersionResource{Version: "v1", Resource: "secrets"}
)

// folder writes files (path → content) into a new folder, as a mirror's checkout would hold them.
func folder(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for path, content := range files {
		full := filepath.Join(dir, path)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// run restores dir into the test's control plane as the admin.
func run(t *testing.T, dir string, change func(*Options)) Summary {
	t.Helper()
	opts := Options{Config: cp.AdminConfig(), Source: Source{Dir: dir}}
	if change != nil {
		change(&opts)
	}
	sum, err := Run(context.Background(), opts)
	if err != nil {
		t.Fatalf("restore: %v", err)
	}
	return sum
}

// result is the result for the object kind namespace/name.
func result(t *testing.T, sum Summary, kind, namespace, name string) Result {
	t.Helper()
	for _, r := range sum.Results {
		if r.Kind == kind && r.Namespace == namespace && r.Name == name {
			return r
		}
	}
	t.Fatalf("no result for %s %s/%s in %+v", kind, namespace, name, sum.Results)
	return Result{}
}

func namespaceFile(name string) string {
	return "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: " + name + "\n"
}

// TestEveryValueComesBackExactly: a ConfigMap holding every class of character a string may hold
// and a custom resource holding the integer edges, empty strings, nulls and YAML 1.1 keys, written
// as the mirror writes them, are restored with every value exactly as it was.
func TestEveryValueComesBackExactly(t *testing.T) {
	data := map[string]any{}
	for class, s := range testenv.EdgeStrings {
		data[class] = s
	}
	data["on"], data["no"], data["y"] = "yes", "", "n"
	spec := map[string]any{"empty": "", "null": nil, "float": 0.1, "big": 1e21, "on": true, "nested": map[string]any{"y": []any{"", nil}}}
	for name, n := range testenv.EdgeIntegers {
		spec[name] = n
	}
	cm := map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "edges", "namespace": "exact"}, "data": data}
	widget := map[string]any{"apiVersion": "example.com/v1", "kind": "Sprocket", "metadata": map[string]any{"name": "edges", "namespace": "exact"}, "spec": spec}
	files := map[string]string{
		"_cluster/namespaces/exact.yaml": namespaceFile("exact"),
		"_cluster/customresourcedefinitions.apiextensions.k8s.io/sprockets.example.com.yaml": crdFile("sprockets", "Sprocket", "SprocketList"),
	}
	for path, obj := range map[string]map[string]any{"exact/configmaps/edges.yaml": cm, "exact/sprockets.example.com/edges.yaml": widget} {
		b, err := sanitize.YAML(obj)
		if err != nil {
			t.Fatal(err)
		}
		files[path] = string(b)
	}
	sum := run(t, folder(t, files), nil)
	if n := sum.Count(Failed); n != 0 {
		t.Fatalf("%d failed: %+v", n, sum.Results)
	}
	dyn := dynamic.NewForConfigOrDie(cp.AdminConfig())
	for gvr, want := range map[schema.GroupVersionResource]map[string]any{
		configMaps: cm, {Group: "example.com", Version: "v1", Resource: "sprockets"}: widget,
	} {
		live, err := dyn.Resource(gvr).Namespace("exact").Get(context.Background(), "edges", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		got := sanitize.Object(live.Object)
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s changed on the way back: %s", gvr.Resource, cmp.Diff(want, got))
		}
	}
}

// crdFile is a CRD of group example.com whose spec keeps any field.
func crdFile(plural, kind, listKind string) string {
	return fmt.Sprintf(`apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: %[1]s.example.com
spec:
  group: example.com
  names: {plural: %[1]s, kind: %[2]s, listKind: %[3]s}
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec: {type: object, x-kubernetes-preserve-unknown-fields: true}
`, plural, kind, listKind)
}

// TestARefusedCRDFailsAloneAndSaysSo: a CRD whose names the cluster refuses (its list kind is
// another CRD's) fails saying so, and its custom resources fail saying that their CRD was
// refused, not that the cluster does not serve them; a CRD that is not Established in time fails
// alone (before, one slow CRD ended the whole restore with no summary); the rest is restored.
func TestARefusedCRDFailsAloneAndSaysSo(t *testing.T) {
	dyn := dynamic.NewForConfigOrDie(cp.AdminConfig())
	taken := folder(t, map[string]string{"crd.yaml": crdFile("things", "Thing", "GadgetList")})
	if sum := run(t, taken, nil); sum.Count(Failed) != 0 {
		t.Fatalf("the CRD that takes the name: %+v", sum.Results)
	}
	dir := folder(t, map[string]string{
		"_cluster/namespaces/crds.yaml": namespaceFile("crds"),
		"_cluster/crds/gadgets.yaml":    crdFile("gadgets", "Gadget", "GadgetList"),
		"crds/gadgets/g.yaml":           "apiVersion: example.com/v1\nkind: Gadget\nmetadata: {name: g, namespace: crds}\nspec: {a: 1}\n",
		"crds/configmaps/c.yaml":        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c, namespace: crds}\ndata: {k: v}\n",
	})
	sum := run(t, dir, nil)
	if r := result(t, sum, "CustomResourceDefinition", "", "gadgets.example.com"); r.Outcome != Failed ||
		!strings.Contains(r.Reason, "refused its names (NamesAccepted=False)") || !strings.Contains(r.Reason, "GadgetList") {
		t.Errorf("the CRD whose names are taken: %+v", r)
	}
	if r := result(t, sum, "Gadget", "crds", "g"); r.Outcome != Failed || !strings.Contains(r.Reason, "its CRD gadgets.example.com was refused: ") {
		t.Errorf("its custom resource: %+v", r)
	}
	if r := result(t, sum, "ConfigMap", "crds", "c"); r.Outcome != Created {
		t.Errorf("the ConfigMap beside them: %+v", r)
	}

	// A CRD that is not Established in time: the wait ends for it alone.
	slow := folder(t, map[string]string{
		"_cluster/crds/bolts.yaml": crdFile("bolts", "Bolt", "BoltList"),
		"crds/configmaps/d.yaml":   "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: d, namespace: crds}\ndata: {k: v}\n",
	})
	sum = run(t, slow, func(o *Options) { o.crdTimeout = time.Nanosecond })
	if r := result(t, sum, "CustomResourceDefinition", "", "bolts.example.com"); r.Outcome != Failed || !strings.Contains(r.Reason, "not Established within 1ns") {
		t.Errorf("the CRD not Established in time: %+v", r)
	}
	if _, err := dyn.Resource(configMaps).Namespace("crds").Get(context.Background(), "d", metav1.GetOptions{}); err != nil {
		t.Errorf("the rest was not restored after a CRD's wait ran out: %v", err)
	}
}

// TestRefusalsSayWhatAndWhatToDo: a hand-written file with a raw control character is refused
// naming its line and column and the escape to write; a dry run checks the objects of a
// namespace it would create (in namespace default), so an invalid one fails there instead of
// being reported as would-be-created.
func TestRefusalsSayWhatAndWhatToDo(t *testing.T) {
	dir := folder(t, map[string]string{
		"raw/configmaps/raw.yaml":        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: raw, namespace: raw}\ndata:\n  k: a\x7fb\n",
		"_cluster/namespaces/fresh.yaml": namespaceFile("fresh"),
		"fresh/configmaps/bad.yaml":      "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: bad, namespace: fresh}\ndata:\n  \"not a key!\": v\n",
		"fresh/configmaps/ok.yaml":       "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: ok, namespace: fresh}\ndata: {k: v}\n",
	})
	sum := run(t, dir, func(o *Options) { o.DryRun = true })
	raw := slices.IndexFunc(sum.Results, func(r Result) bool { return r.Path == "raw/configmaps/raw.yaml" })
	if raw < 0 || sum.Results[raw].Outcome != Failed ||
		!strings.Contains(sum.Results[raw].Reason, `line 5, column 7: the character U+007F cannot stand unescaped in YAML: write the value in double quotes with \x7F`) {
		t.Errorf("the file with a raw DEL: %+v", sum.Results)
	}
	if r := result(t, sum, "ConfigMap", "fresh", "bad"); r.Outcome != Failed || !strings.Contains(r.Reason, "not a key!") {
		t.Errorf("the invalid ConfigMap in a namespace the dry run would create: %+v", r)
	}
	if r := result(t, sum, "ConfigMap", "fresh", "ok"); r.Outcome != Created || r.Reason != notCheckedNamespace {
		t.Errorf("the valid ConfigMap in a namespace the dry run would create: %+v", r)
	}
}

// TestServiceAccountTokensComeBackWithoutTheirToken: a token Secret is restored for the
// ServiceAccount it names, without the old cluster's token and uid, for the new cluster's token
// controller to fill.
func TestServiceAccountTokensComeBackWithoutTheirToken(t *testing.T) {
	dir := folder(t, map[string]string{
		"_cluster/namespaces/tokens.yaml": namespaceFile("tokens"),
		"tokens/serviceaccounts/ci.yaml":  "apiVersion: v1\nkind: ServiceAccount\nmetadata: {name: ci, namespace: tokens}\n",
		"tokens/secrets/ci-token.yaml": "apiVersion: v1\nkind: Secret\ntype: kubernetes.io/service-account-token\n" +
			"metadata:\n  name: ci-token\n  namespace: tokens\n  annotations:\n    kubernetes.io/service-account.name: ci\n" +
			"    kubernetes.io/service-account.uid: 0b1e5f6a-old\ndata:\n  token: b2xk\n  ca.crt: b2xk\n  namespace: dG9rZW5z\n",
	})
	sum := run(t, dir, nil)
	if r := result(t, sum, "Secret", "tokens", "ci-token"); r.Outcome != Created {
		t.Fatalf("the token Secret: %+v", r)
	}
	live, err := dynamic.NewForConfigOrDie(cp.AdminConfig()).Resource(secrets).Namespace("tokens").Get(context.Background(), "ci-token", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if data, _, _ := unstructured.NestedMap(live.Object, "data"); len(data) != 0 {
		t.Errorf("the old token came back: %v", data)
	}
	if want := map[string]string{"kubernetes.io/service-account.name": "ci"}; !reflect.DeepEqual(live.GetAnnotations(), want) {
		t.Errorf("annotations %v, want %v", live.GetAnnotations(), want)
	}
}
