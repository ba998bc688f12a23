package crds_test

import (
	"net/http"
	"sync"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"

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

// TestInstallWritesOnlyWhatChanged: a daemon installs the CRDs on every start. When they are
// already as embedded, Install sends no write at all (an apply of the same content changes
// nothing, but the apiserver validates the whole schema for it, CEL rules compiled, each time);
// a CRD someone changed is applied again and is as embedded afterwards.
func TestInstallWritesOnlyWhatChanged(t *testing.T) {
	cfg := mustControlPlane(t).AdminConfig()
	ctx := testContext(t)
	if err := crds.Install(ctx, cfg, discardLogger()); err != nil {
		t.Fatalf("install: %v", err)
	}
	writes := &writeLog{}
	counted := rest.CopyConfig(cfg)
	counted.Wrap(writes.wrap)
	if err := crds.Install(ctx, counted, discardLogger()); err != nil {
		t.Fatalf("install again: %v", err)
	}
	if got := writes.take(); len(got) > 0 {
		t.Errorf("installing CRDs that are already as embedded sent %d writes, want none: %v", len(got), got)
	}
	defs, err := crds.CRDs()
	if err != nil {
		t.Fatal(err)
	}
	if got := writes.takeGets(); got != len(defs) {
		t.Errorf("installing CRDs that are already as embedded and served read them %d times, want once each (%d)", got, len(defs))
	}

	client, err := clientset.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	crdClient := client.ApiextensionsV1().CustomResourceDefinitions()
	const name = "gitdestinations.configbutler.ai"
	want, err := crdClient.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	drift := []byte(`[{"op":"add","path":"/spec/versions/0/schema/openAPIV3Schema/description","value":"changed by hand"}]`)
	if _, err := crdClient.Patch(ctx, name, types.JSONPatchType, drift, metav1.PatchOptions{FieldManager: "someone"}); err != nil {
		t.Fatalf("change the CRD by hand: %v", err)
	}
	if err := crds.Install(ctx, counted, discardLogger()); err != nil {
		t.Fatalf("install over the changed CRD: %v", err)
	}
	if got := writes.take(); len(got) != 1 {
		t.Errorf("installing over one changed CRD sent writes %v, want one apply of %s", got, name)
	}
	got, err := crdClient.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if g, w := got.Spec.Versions[0].Schema.OpenAPIV3Schema.Description, want.Spec.Versions[0].Schema.OpenAPIV3Schema.Description; g != w {
		t.Errorf("description after Install %q, want the embedded %q", g, w)
	}
}

// writeLog records every request a client sends other than a GET, as "METHOD path", and counts
// the GETs.
type writeLog struct {
	mu     sync.Mutex
	writes []string
	gets   int
}

func (l *writeLog) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
		l.mu.Lock()
		if req.Method == http.MethodGet {
			l.gets++
		} else {
			l.writes = append(l.writes, req.Method+" "+req.URL.Path)
		}
		l.mu.Unlock()
		return rt.RoundTrip(req)
	})
}

// take returns the writes recorded so far and forgets them.
func (l *writeLog) take() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	w := l.writes
	l.writes = nil
	return w
}

// takeGets returns the GETs counted so far and starts again from zero.
func (l *writeLog) takeGets() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := l.gets
	l.gets = 0
	return n
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

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
