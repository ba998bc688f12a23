package daemon

import (
	"context"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/configbutler/gitops-reverser/crds"
	"github.com/configbutler/gitops-reverser/testenv"
)

// deepCRD keeps whatever its instances hold (x-kubernetes-preserve-unknown-fields), so one of
// them can nest as deep as the apiserver allows.
var deepGVR = schema.GroupVersionResource{Group: "e2e.configbutler.ai", Version: "v1", Resource: "deeps"}

func installDeepCRD(t *testing.T) {
	t.Helper()
	ext := apiextensionsclient.NewForConfigOrDie(planes.Of(t).AdminConfig())
	preserve := true
	crd := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: deepGVR.Resource + "." + deepGVR.Group},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: deepGVR.Group, Scope: apiextensionsv1.NamespaceScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "deeps", Singular: "deep", Kind: "Deep", ListKind: "DeepList"},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{Name: "v1", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type: "object", XPreserveUnknownFields: &preserve}}}},
		},
	}
	ctx := context.Background()
	if _, err := ext.ApiextensionsV1().CustomResourceDefinitions().Create(ctx, crd, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = ext.ApiextensionsV1().CustomResourceDefinitions().Delete(ctx, crd.Name, metav1.DeleteOptions{})
	})
	testenv.Eventually(t, time.Minute, "the CRD established", func() (bool, string) {
		got, err := ext.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, crd.Name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		for _, c := range got.Status.Conditions {
			if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
				return true, ""
			}
		}
		return false, "not established"
	})
}

// nested is {"a": {"a": ... {"a": "bottom"}}} depth levels deep.
func nested(depth int) map[string]any {
	v := map[string]any{"a": "bottom"}
	for range depth - 1 {
		v = map[string]any{"a": v}
	}
	return v
}

// TestDeeplyNestedObjectIsWrittenSmall: a custom resource nested 9,000 deep (54 KB of JSON, which
// block-style YAML once turned into an 81 MB file) is written as a small file, its admission
// review does not blow up the webhook, and the daemon's peak memory stays under 100 MiB.
func TestDeeplyNestedObjectIsWrittenSmall(t *testing.T) {
	cp := planes.Lend(t)
	ns := "deep"
	srv, _ := mirrorSetup(t, ns)
	installDeepCRD(t)
	dyn := dynamic.NewForConfigOrDie(cp.AdminConfig())
	rule, err := crds.ToUnstructured(&crds.WatchRule{ObjectMeta: metav1.ObjectMeta{Name: "deeps", Namespace: ns},
		Spec: crds.WatchRuleSpec{DestinationRef: crds.NamespacedReference{Name: "dest"},
			Rules: []crds.ResourceRule{{APIGroups: []string{deepGVR.Group}, Resources: []string{"deeps"}}}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dyn.Resource(crds.WatchRules).Namespace(ns).Create(context.Background(), rule, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	d := startDaemon(t, t.TempDir(), "--git-batch-quiet-ms", "200")
	testenv.Eventually(t, time.Minute, "the daemon watching deeps", metricAtLeast(t, d, "gitops_reverser_watches", 2), d.FailFast())

	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": deepGVR.GroupVersion().String(), "kind": "Deep",
		"metadata": map[string]any{"name": "abyss", "namespace": ns},
		"spec":     nested(9000),
	}}
	if _, err := dyn.Resource(deepGVR).Namespace(ns).Create(context.Background(), obj, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create the 9,000-deep object: %v", err)
	}
	path := "live/" + ns + "/deeps." + deepGVR.Group + "/abyss.yaml"
	testenv.Eventually(t, time.Minute, "the deep object in Git", remoteHas(srv, path), d.FailFast())
	content, err := srv.ReadFile("state", "main", path)
	if err != nil {
		t.Fatal(err)
	}
	if len(content) > 1<<20 {
		t.Errorf("the file is %d bytes: it must grow linearly with the object (54 KB of JSON)", len(content))
	}
	if peak, _ := usage(t, d.Pid()); peak >= 100 {
		t.Errorf("the daemon's peak RSS is %.0f MiB, want under 100 MiB", peak)
	} else {
		t.Logf("file %d bytes; daemon peak RSS %.0f MiB", len(content), peak)
	}
}
