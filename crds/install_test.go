package crds_test

import (
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/configbutler/gitops-reverser/crds"
)

func TestInstallTwiceIsNoOp(t *testing.T) {
	cfg := mustControlPlane(t).AdminConfig()
	ctx := testContext(t)
	client, err := clientset.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defs, err := crds.CRDs()
	if err != nil {
		t.Fatal(err)
	}
	// snapshot returns each CRD's resourceVersion and checks it is served.
	snapshot := func() map[string]string {
		t.Helper()
		rvs := map[string]string{}
		for _, d := range defs {
			got, err := client.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, d.Name, metav1.GetOptions{})
			if err != nil {
				t.Fatalf("get CRD %s: %v", d.Name, err)
			}
			for _, want := range []apiextensionsv1.CustomResourceDefinitionConditionType{apiextensionsv1.Established, apiextensionsv1.NamesAccepted} {
				if !hasCondition(got, want) {
					t.Errorf("CRD %s is not %s after Install", d.Name, want)
				}
			}
			if !appliedBy(got, crds.FieldManager) {
				t.Errorf("CRD %s: no server-side apply entry of field manager %q", d.Name, crds.FieldManager)
			}
			rvs[d.Name] = got.ResourceVersion
		}
		return rvs
	}

	if err := crds.Install(ctx, cfg, discardLogger()); err != nil {
		t.Fatalf("first install: %v", err)
	}
	first := snapshot()
	if err := crds.Install(ctx, cfg, discardLogger()); err != nil {
		t.Fatalf("second install: %v", err)
	}
	second := snapshot()
	for name, rv := range first {
		if second[name] != rv {
			t.Errorf("CRD %s changed on the second install: resourceVersion %s -> %s", name, rv, second[name])
		}
	}
}

func hasCondition(crd *apiextensionsv1.CustomResourceDefinition, t apiextensionsv1.CustomResourceDefinitionConditionType) bool {
	for _, c := range crd.Status.Conditions {
		if c.Type == t {
			return c.Status == apiextensionsv1.ConditionTrue
		}
	}
	return false
}

func appliedBy(crd *apiextensionsv1.CustomResourceDefinition, manager string) bool {
	for _, mf := range crd.ManagedFields {
		if mf.Manager == manager && mf.Operation == metav1.ManagedFieldsOperationApply {
			return true
		}
	}
	return false
}
