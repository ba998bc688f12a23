package kube

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"

	apidiscoveryv2 "k8s.io/api/apidiscovery/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
)

// Discovery is read over a raw client, not client-go's discovery client, which links client-go's
// all-groups scheme and OpenAPI models (see the package's comment).
const (
	// aggregatedAccept asks for aggregated discovery (one answer per /api and /apis), else the
	// legacy documents.
	aggregatedAccept = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json"
	// legacyFetches bounds the group versions read at once by legacy discovery.
	legacyFetches = 8
)

// APIResource is one discovered resource that can be listed and watched, with every version the
// apiserver serves for it, preferred first.
type APIResource struct {
	Group, Resource, Kind string
	Versions              []string
	Namespaced            bool
}

// GroupResource is the version-free identity of the resource.
func (r APIResource) GroupResource() schema.GroupResource {
	return schema.GroupResource{Group: r.Group, Resource: r.Resource}
}

// Discover lists every resource the apiserver serves that can be both listed and watched, with
// its versions (the group's preferred version first). Subresources are left out. A group
// version that fails discovery (an unavailable aggregated API) is skipped, not fatal: the rest
// still works. It asks for aggregated discovery first, and reads the legacy documents from an
// apiserver that does not serve it.
func Discover(ctx context.Context, client rest.Interface, log *slog.Logger) ([]APIResource, error) {
	var lists []apiResourceList
	for _, path := range []string{"/api", "/apis"} {
		body, aggregated, err := get(ctx, client, path, aggregatedAccept)
		if err != nil {
			return nil, fmt.Errorf("discover API resources: %w", err)
		}
		if !aggregated {
			return discoverLegacy(ctx, client, log)
		}
		var doc apidiscoveryv2.APIGroupDiscoveryList
		if err := json.Unmarshal(body, &doc); err != nil {
			return nil, fmt.Errorf("discover API resources: decode %s: %w", path, err)
		}
		lists = append(lists, fromAggregated(doc, log)...)
	}
	return mergeVersions(lists), nil
}

// apiResourceList is one group version's resources, in the group's order of preference.
type apiResourceList struct {
	gv        schema.GroupVersion
	resources []metav1.APIResource
}

// fromAggregated reads an aggregated document; a stale group version (its API unavailable) is
// skipped.
func fromAggregated(doc apidiscoveryv2.APIGroupDiscoveryList, log *slog.Logger) []apiResourceList {
	var out []apiResourceList
	for _, group := range doc.Items {
		for _, version := range group.Versions {
			gv := schema.GroupVersion{Group: group.Name, Version: version.Version}
			if version.Freshness == apidiscoveryv2.DiscoveryFreshnessStale {
				log.Debug("discovery: skipping a stale group version", "groupVersion", gv.String())
				continue
			}
			list := apiResourceList{gv: gv}
			for _, r := range version.Resources {
				res := metav1.APIResource{Name: r.Resource, Namespaced: r.Scope == apidiscoveryv2.ScopeNamespace, Verbs: r.Verbs}
				if r.ResponseKind != nil {
					res.Kind = r.ResponseKind.Kind
				}
				list.resources = append(list.resources, res)
			}
			out = append(out, list)
		}
	}
	return out
}

// discoverLegacy reads /api, /apis and then every group version's document, a few at a time.
func discoverLegacy(ctx context.Context, client rest.Interface, log *slog.Logger) ([]APIResource, error) {
	var core metav1.APIVersions
	if err := getJSON(ctx, client, "/api", &core); err != nil {
		return nil, err
	}
	var groups metav1.APIGroupList
	if err := getJSON(ctx, client, "/apis", &groups); err != nil {
		return nil, err
	}
	var paths []string
	var gvs []schema.GroupVersion
	for _, v := range core.Versions {
		paths, gvs = append(paths, "/api/"+v), append(gvs, schema.GroupVersion{Version: v})
	}
	for _, g := range groups.Groups {
		// The preferred version first: the order aggregated discovery gives.
		versions := slices.Clone(g.Versions)
		slices.SortStableFunc(versions, func(a, b metav1.GroupVersionForDiscovery) int {
			return boolRank(b.Version == g.PreferredVersion.Version) - boolRank(a.Version == g.PreferredVersion.Version)
		})
		for _, v := range versions {
			paths, gvs = append(paths, "/apis/"+v.GroupVersion), append(gvs, schema.GroupVersion{Group: g.Name, Version: v.Version})
		}
	}
	lists := make([]apiResourceList, len(paths))
	failed := make([]bool, len(paths))
	var wg sync.WaitGroup
	slots := make(chan struct{}, legacyFetches)
	for i, path := range paths {
		wg.Go(func() {
			slots <- struct{}{}
			defer func() { <-slots }()
			var doc metav1.APIResourceList
			if err := getJSON(ctx, client, path, &doc); err != nil {
				log.Debug("discovery: skipping a group version that failed", "groupVersion", gvs[i].String(), "err", err)
				failed[i] = true
				return
			}
			lists[i] = apiResourceList{gv: gvs[i], resources: doc.APIResources}
		})
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("discover API resources: %w", err)
	}
	var ok []apiResourceList
	for i, list := range lists {
		if !failed[i] {
			ok = append(ok, list)
		}
	}
	return mergeVersions(ok), nil
}

// boolRank orders true before false in a sort.
func boolRank(b bool) int {
	if b {
		return 1
	}
	return 0
}

// mergeVersions turns group versions, each group's in its order of preference, into one APIResource per
// list+watch-able resource with its versions in that order and the kind of the first.
func mergeVersions(lists []apiResourceList) []APIResource {
	byResource := map[schema.GroupResource]*APIResource{}
	var order []schema.GroupResource
	for _, list := range lists {
		for _, r := range list.resources {
			if strings.Contains(r.Name, "/") || !slices.Contains(r.Verbs, "list") || !slices.Contains(r.Verbs, "watch") {
				continue
			}
			gr := schema.GroupResource{Group: list.gv.Group, Resource: r.Name}
			res, ok := byResource[gr]
			if !ok {
				res = &APIResource{Group: list.gv.Group, Resource: r.Name, Kind: r.Kind, Namespaced: r.Namespaced}
				byResource[gr] = res
				order = append(order, gr)
			}
			res.Versions = append(res.Versions, list.gv.Version)
		}
	}
	out := make([]APIResource, 0, len(order))
	for _, gr := range order {
		out = append(out, *byResource[gr])
	}
	return out
}

// get reads path with the Accept header given, and says whether the answer is aggregated discovery.
func get(ctx context.Context, client rest.Interface, path, accept string) (body []byte, aggregated bool, err error) {
	result := client.Get().AbsPath(path).SetHeader("Accept", accept).Do(ctx)
	body, err = result.Raw()
	if err != nil {
		return nil, false, fmt.Errorf("read %s: %w", path, err)
	}
	var contentType string
	result.ContentType(&contentType)
	return body, strings.Contains(contentType, "as=APIGroupDiscoveryList"), nil
}

// getJSON reads a legacy discovery document into out.
func getJSON(ctx context.Context, client rest.Interface, path string, out any) error {
	body, _, err := get(ctx, client, path, "application/json")
	if err != nil {
		return fmt.Errorf("discover API resources: %w", err)
	}
	if err := json.Unmarshal(body, out); err != nil {
		return fmt.Errorf("discover API resources: decode %s: %w", path, err)
	}
	return nil
}
