package watch

import (
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
)

// discover lists every resource the apiserver serves that can be both listed and watched, with
// its versions (the group's preferred version first). Subresources are left out. A group that
// fails discovery (an unavailable aggregated API) is skipped, not fatal: the rest still works.
func discover(client discovery.DiscoveryInterface) ([]APIResource, error) {
	groups, lists, err := client.ServerGroupsAndResources()
	if err != nil && !discovery.IsGroupDiscoveryFailedError(err) {
		return nil, fmt.Errorf("discover API resources: %w", err)
	}
	preferred := map[string]string{}
	for _, g := range groups {
		preferred[g.Name] = g.PreferredVersion.Version
	}
	byResource := map[schema.GroupResource]*APIResource{}
	var order []schema.GroupResource
	for _, list := range lists {
		gv, err := schema.ParseGroupVersion(list.GroupVersion)
		if err != nil {
			continue
		}
		for _, r := range list.APIResources {
			if strings.Contains(r.Name, "/") || !slices.Contains(r.Verbs, "list") || !slices.Contains(r.Verbs, "watch") {
				continue
			}
			gr := schema.GroupResource{Group: gv.Group, Resource: r.Name}
			res, ok := byResource[gr]
			if !ok {
				res = &APIResource{Group: gv.Group, Resource: r.Name, Kind: r.Kind, Namespaced: r.Namespaced}
				byResource[gr] = res
				order = append(order, gr)
			}
			if gv.Version == preferred[gv.Group] {
				res.Versions = slices.Insert(res.Versions, 0, gv.Version)
				res.Kind = r.Kind
			} else {
				res.Versions = append(res.Versions, gv.Version)
			}
		}
	}
	out := make([]APIResource, 0, len(order))
	for _, gr := range order {
		out = append(out, *byResource[gr])
	}
	return out, nil
}
