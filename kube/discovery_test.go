package kube

import (
	"log/slog"
	"os"
	"slices"
	"testing"

	"github.com/configbutler/gitops-reverser/testenv"
)

// TestDiscoveryAggregatedAndLegacyAgree: against the real apiserver, aggregated discovery and the
// legacy documents give the same resources, with the built-in kinds and those of a group of their
// own as they are served.
func TestDiscoveryAggregatedAndLegacyAgree(t *testing.T) {
	api, err := RESTClient(cp.AdminConfig())
	if err != nil {
		t.Fatal(err)
	}
	ctx, log := t.Context(), slog.New(slog.DiscardHandler)
	if _, isAggregated, err := get(ctx, api, "/apis", aggregatedAccept); err != nil || !isAggregated {
		t.Fatalf("the apiserver did not answer with aggregated discovery (err %v): the test would compare legacy with itself", err)
	}
	aggregated, err := Discover(ctx, api, log)
	if err != nil {
		t.Fatal(err)
	}
	legacy, err := discoverLegacy(ctx, api, log)
	if err != nil {
		t.Fatal(err)
	}
	find := func(rs []APIResource, group, resource string) *APIResource {
		i := slices.IndexFunc(rs, func(r APIResource) bool { return r.Group == group && r.Resource == resource })
		if i < 0 {
			t.Fatalf("%s.%s not discovered", resource, group)
		}
		return &rs[i]
	}
	for _, rs := range [][]APIResource{aggregated, legacy} {
		if cm := find(rs, "", "configmaps"); cm.Kind != "ConfigMap" || !cm.Namespaced || !slices.Equal(cm.Versions, []string{"v1"}) {
			t.Errorf("configmaps = %+v", cm)
		}
		if ns := find(rs, "", "namespaces"); ns.Kind != "Namespace" || ns.Namespaced {
			t.Errorf("namespaces = %+v", ns)
		}
		if crd := find(rs, "apiextensions.k8s.io", "customresourcedefinitions"); crd.Kind != "CustomResourceDefinition" || crd.Namespaced || len(crd.Versions) == 0 {
			t.Errorf("customresourcedefinitions = %+v", crd)
		}
		for _, r := range rs {
			if slices.Contains([]string{"pods/log", "bindings", "tokenreviews"}, r.Resource) {
				t.Errorf("%s is not list+watch-able or is a subresource, but was discovered", r.Resource)
			}
		}
	}
	byKey := func(rs []APIResource) map[string]APIResource {
		m := map[string]APIResource{}
		for _, r := range rs {
			m[r.Group+"/"+r.Resource] = r
		}
		return m
	}
	a, l := byKey(aggregated), byKey(legacy)
	if len(a) != len(l) {
		t.Errorf("aggregated discovery found %d resources, legacy %d", len(a), len(l))
	}
	for k, r := range a {
		if lr, ok := l[k]; !ok || lr.Kind != r.Kind || lr.Namespaced != r.Namespaced || !slices.Equal(lr.Versions, r.Versions) {
			t.Errorf("%s: aggregated %+v, legacy %+v", k, r, l[k])
		}
	}
}

var cp *testenv.ControlPlane

func TestMain(m *testing.M) { os.Exit(testenv.RunMain(m, &cp)) }
