package kube

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	apidiscoveryv2 "k8s.io/api/apidiscovery/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
)

// TestDiscoverySkipsUnavailableGroupVersions: an apiserver with one unavailable group version
// (a stale one in aggregated discovery, a failing document in legacy discovery) gives the rest of
// its resources, the preferred version first; Discover falls back to the legacy documents when the
// server does not answer aggregated discovery. The real apiserver always answers aggregated and has
// no unavailable API, so an httptest server plays both kinds.
func TestDiscoverySkipsUnavailableGroupVersions(t *testing.T) {
	want := []APIResource{
		{Group: "", Resource: "configmaps", Kind: "ConfigMap", Namespaced: true, Versions: []string{"v1"}},
		{Group: "example.com", Resource: "widgets", Kind: "Widget", Versions: []string{"v1", "v1beta1"}},
	}
	for _, aggregated := range []bool{true, false} {
		name := map[bool]string{true: "aggregated", false: "legacy"}[aggregated]
		t.Run(name, func(t *testing.T) {
			srv := httptest.NewServer(fakeDiscovery(aggregated))
			defer srv.Close()
			api, err := RESTClient(&rest.Config{Host: srv.URL})
			if err != nil {
				t.Fatal(err)
			}
			got, err := Discover(t.Context(), api, slog.New(slog.DiscardHandler))
			if err != nil {
				t.Fatal(err)
			}
			slices.SortFunc(got, func(a, b APIResource) int { return strings.Compare(a.Group+a.Resource, b.Group+b.Resource) })
			if len(got) != len(want) {
				t.Fatalf("discovered %+v, want %+v", got, want)
			}
			for i := range want {
				g, w := got[i], want[i]
				if g.Group != w.Group || g.Resource != w.Resource || g.Kind != w.Kind || g.Namespaced != w.Namespaced || !slices.Equal(g.Versions, w.Versions) {
					t.Errorf("discovered %+v, want %+v", g, w)
				}
			}
		})
	}
}

// fakeDiscovery serves the discovery of a cluster with configmaps (v1), widgets.example.com
// (v1 preferred, v1beta1) and an unavailable gadgets.broken.example.com, either as aggregated
// discovery only or as the legacy documents only.
func fakeDiscovery(aggregated bool) http.Handler {
	rw := []string{"get", "list", "watch"}
	widgets := func(kind string) []metav1.APIResource {
		return []metav1.APIResource{{Name: "widgets", Kind: kind, Verbs: rw}, {Name: "widgets/status", Kind: kind, Verbs: []string{"get"}}}
	}
	core := []metav1.APIResource{
		{Name: "configmaps", Kind: "ConfigMap", Namespaced: true, Verbs: rw},
		{Name: "bindings", Kind: "Binding", Namespaced: true, Verbs: []string{"create"}},
		{Name: "pods/log", Kind: "Pod", Namespaced: true, Verbs: []string{"get"}},
	}
	legacy := map[string]any{
		"/api": metav1.APIVersions{Versions: []string{"v1"}},
		"/apis": metav1.APIGroupList{Groups: []metav1.APIGroup{
			{Name: "example.com", PreferredVersion: metav1.GroupVersionForDiscovery{GroupVersion: "example.com/v1", Version: "v1"},
				Versions: []metav1.GroupVersionForDiscovery{{GroupVersion: "example.com/v1beta1", Version: "v1beta1"}, {GroupVersion: "example.com/v1", Version: "v1"}}},
			{Name: "broken.example.com", PreferredVersion: metav1.GroupVersionForDiscovery{GroupVersion: "broken.example.com/v1", Version: "v1"},
				Versions: []metav1.GroupVersionForDiscovery{{GroupVersion: "broken.example.com/v1", Version: "v1"}}},
		}},
		"/api/v1":                   metav1.APIResourceList{GroupVersion: "v1", APIResources: core},
		"/apis/example.com/v1":      metav1.APIResourceList{GroupVersion: "example.com/v1", APIResources: widgets("Widget")},
		"/apis/example.com/v1beta1": metav1.APIResourceList{GroupVersion: "example.com/v1beta1", APIResources: widgets("WidgetBeta")},
	}
	gadgets := aggregatedVersion("v1", []metav1.APIResource{{Name: "gadgets", Kind: "Gadget", Verbs: rw}})
	gadgets.Freshness = apidiscoveryv2.DiscoveryFreshnessStale
	docs := map[string]apidiscoveryv2.APIGroupDiscoveryList{
		"/api": {Items: []apidiscoveryv2.APIGroupDiscovery{{Versions: []apidiscoveryv2.APIVersionDiscovery{aggregatedVersion("v1", core)}}}},
		"/apis": {Items: []apidiscoveryv2.APIGroupDiscovery{
			{ObjectMeta: metav1.ObjectMeta{Name: "example.com"}, Versions: []apidiscoveryv2.APIVersionDiscovery{
				aggregatedVersion("v1", widgets("Widget")), aggregatedVersion("v1beta1", widgets("WidgetBeta"))}},
			{ObjectMeta: metav1.ObjectMeta{Name: "broken.example.com"}, Versions: []apidiscoveryv2.APIVersionDiscovery{gadgets}},
		}},
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if aggregated && strings.Contains(r.Header.Get("Accept"), "as=APIGroupDiscoveryList") {
			if doc, ok := docs[r.URL.Path]; ok {
				doc.Kind, doc.APIVersion = "APIGroupDiscoveryList", "apidiscovery.k8s.io/v2"
				w.Header().Set("Content-Type", "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList")
				_ = json.NewEncoder(w).Encode(doc)
				return
			}
		}
		if doc, ok := legacy[r.URL.Path]; ok && !aggregated {
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(doc)
			return
		}
		// Neither kind of server reads a path it did not announce, and the unavailable group
		// version fails the way an aggregated API that is down does.
		http.Error(w, "unavailable", http.StatusServiceUnavailable)
	})
}

// aggregatedVersion is one version of a group in aggregated discovery, with its top-level
// resources (subresources are listed under their resource there, and are left out here).
func aggregatedVersion(version string, resources []metav1.APIResource) apidiscoveryv2.APIVersionDiscovery {
	v := apidiscoveryv2.APIVersionDiscovery{Version: version, Freshness: apidiscoveryv2.DiscoveryFreshnessCurrent}
	for _, r := range resources {
		if strings.Contains(r.Name, "/") {
			continue
		}
		scope := apidiscoveryv2.ScopeCluster
		if r.Namespaced {
			scope = apidiscoveryv2.ScopeNamespace
		}
		v.Resources = append(v.Resources, apidiscoveryv2.APIResourceDiscovery{
			Resource: r.Name, Scope: scope, Verbs: r.Verbs, ResponseKind: &metav1.GroupVersionKind{Kind: r.Kind},
		})
	}
	return v
}
