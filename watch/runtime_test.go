package watch

import (
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/configbutler/gitops-reverser/crds"
	"github.com/configbutler/gitops-reverser/testenv"
)

func TestSecondSeedIsNoOp(t *testing.T) {
	e := newEnv(t)
	e.configMap("alpha", map[string]string{"k": "v"})
	e.configMap("beta", map[string]string{"k": "w"})
	e.watchRule("cms", "configmaps")
	stop := e.startManager()
	e.waitFiles(e.cmPath("alpha"), e.cmPath("beta"))
	stop()
	before := len(e.log())

	// A second manager seeds again over the same, unchanged cluster. The ConfigMap created after
	// it starts is the marker: once it is in Git, the seed before it has been committed too.
	e.startManager()
	e.configMap("marker", map[string]string{"k": "m"})
	e.waitFiles(e.cmPath("alpha"), e.cmPath("beta"), e.cmPath("marker"))
	log := e.log()
	if added := len(log) - before; added != 1 {
		t.Fatalf("%d commits after the second seed, want 1 (the marker): %v", added, subjects(log[:added]))
	}
}

func TestRulesAreFollowedAtRuntime(t *testing.T) {
	e := newEnv(t)
	e.startManager()
	e.configMap("early", map[string]string{"k": "v"})
	e.watchRule("svcs", "services") // stays throughout; its files are the marker below
	e.watchRule("cms", "configmaps")
	e.waitFiles(e.cmPath("early"))

	// Editing a rule: the ConfigMap rule also selects Deployments now.
	e.watchRule("cms", "configmaps", "deployments")
	testenv.Eventually(e.t, time.Minute, "edited rule followed", func() (bool, string) {
		got, _ := e.reg.Gather()
		return got["gitops_reverser_watches"] == 3, fmt.Sprintf("%v watches", got["gitops_reverser_watches"])
	})

	// Deleting the ConfigMap rule stops ConfigMaps being written; their files stay.
	if err := e.dyn.Resource(crds.WatchRules).Namespace(e.ns).Delete(e.ctx, "cms", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(e.t, time.Minute, "the ConfigMap watch stops", func() (bool, string) {
		got, _ := e.reg.Gather()
		return got["gitops_reverser_watches"] == 1, fmt.Sprintf("%v watches", got["gitops_reverser_watches"])
	})
	e.configMap("late", map[string]string{"k": "v"})
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: e.ns},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}}}
	if _, err := e.kube.CoreV1().Services(e.ns).Create(e.ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.waitFiles(e.cmPath("early"), e.ns+"/services/web.yaml")
}

func TestDiscoveryRefreshWatchesNewlyInstalledCRDs(t *testing.T) {
	e := newEnv(t)
	e.watchRule("gadgets", "gadgets")
	e.startManager()
	testenv.Eventually(e.t, time.Minute, "rule reports that nothing matches yet", func() (bool, string) {
		c := e.readyCondition(crds.WatchRules, e.ns, "gadgets")
		return c != nil && c.Reason == "NothingSelected", "no condition yet"
	})

	ext, err := apiextensionsclient.NewForConfig(cp.AdminConfig())
	if err != nil {
		t.Fatal(err)
	}
	crd := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "gadgets.example.com"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "example.com", Scope: apiextensionsv1.NamespaceScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "gadgets", Singular: "gadget", Kind: "Gadget", ListKind: "GadgetList"},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name: "v1", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type: "object", XPreserveUnknownFields: ptr(true)}},
			}},
		},
	}
	if _, err := ext.ApiextensionsV1().CustomResourceDefinitions().Create(e.ctx, crd, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = ext.ApiextensionsV1().CustomResourceDefinitions().Delete(e.ctx, crd.Name, metav1.DeleteOptions{})
	})
	gadgets := e.dyn.Resource(schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "gadgets"}).Namespace(e.ns)
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "example.com/v1", "kind": "Gadget",
		"metadata": map[string]any{"name": "g1", "namespace": e.ns}, "spec": map[string]any{"size": int64(3)},
	}}
	testenv.Eventually(e.t, time.Minute, "gadget created once the CRD is served", func() (bool, string) {
		_, err := gadgets.Create(e.ctx, obj, metav1.CreateOptions{})
		return err == nil, errString(err)
	})
	e.waitFiles(e.ns + "/gadgets.example.com/g1.yaml")

	// Removing the CRD stops its watch at the next refresh. (Its instances go with it; whether the
	// watch still sees their deletes before it stops is a race, so the files are not asserted.)
	if err := ext.ApiextensionsV1().CustomResourceDefinitions().Delete(e.ctx, crd.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(e.t, time.Minute, "the watch of the removed CRD stops", func() (bool, string) {
		got, _ := e.reg.Gather()
		c := e.readyCondition(crds.WatchRules, e.ns, "gadgets")
		return got["gitops_reverser_watches"] == 0 && c != nil && c.Reason == "NothingSelected",
			fmt.Sprintf("%v watches, condition %+v", got["gitops_reverser_watches"], c)
	})
}

func TestSecretsAreNeverWritten(t *testing.T) {
	e := newEnv(t)
	e.create(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: e.ns}, StringData: map[string]string{"password": "hunter2"}})
	e.configMap("visible", map[string]string{"k": "v"})
	e.watchRule("all", "secrets", "configmaps")
	e.startManager()
	e.waitFiles(e.cmPath("visible"))
	for _, f := range e.files() {
		if strings.Contains(f, "secrets") {
			t.Errorf("a Secret reached Git: %s", f)
		}
	}
	testenv.Eventually(e.t, time.Minute, "SecretsSkipped warning event and metric", func() (bool, string) {
		events, err := e.kube.CoreV1().Events(e.ns).List(e.ctx, metav1.ListOptions{FieldSelector: "reason=SecretsSkipped"})
		got, _ := e.reg.Gather()
		return err == nil && len(events.Items) > 0 && got["gitops_reverser_secrets_skipped_total"] >= 1,
			"no event or metric yet"
	})
}

func ptr[T any](v T) *T { return &v }

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
