package watch

import (
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/configbutler/gitops-reverser/crds"
	"github.com/configbutler/gitops-reverser/kube"
)

// Operations lists the operations of the set as admission names (CREATE, UPDATE, DELETE).
func (o ops) Operations() []string {
	var out []string
	for _, op := range []struct {
		bit  ops
		name string
	}{{opCreate, "CREATE"}, {opUpdate, "UPDATE"}, {opDelete, "DELETE"}} {
		if o&op.bit != 0 {
			out = append(out, op.name)
		}
	}
	return out
}

// ops is a set of operations as a bit mask.
type ops uint8

const (
	opCreate ops = 1 << iota
	opUpdate
	opDelete
	opAll = opCreate | opUpdate | opDelete
)

func opsOf(list []crds.Operation) ops {
	if len(list) == 0 {
		return opAll
	}
	var o ops
	for _, op := range list {
		switch op {
		case crds.OperationCreate:
			o |= opCreate
		case crds.OperationUpdate:
			o |= opUpdate
		case crds.OperationDelete:
			o |= opDelete
		case crds.OperationAll:
			o |= opAll
		}
	}
	return o
}

// Selection is one resource, at one version, selected by a rule for a destination: every object
// of GVR in Namespace ("" = every namespace, or a cluster-scoped resource).
type Selection struct {
	// Cluster is the RemoteCluster ("namespace/name") of the selection; "" for the daemon's own.
	Cluster string
	// Elsewhere (in what OnWatched is told only) says another replica watches the selection's
	// RemoteCluster: it registers the webhook there, and this one hands it what reaches it.
	Elsewhere  bool
	GVR        schema.GroupVersionResource
	Kind       string
	Namespaced bool
	Namespace  string
	Ops        ops
	// Writers are the rules that made this selection for its destination, with the ServiceAccount
	// each writes back as (only in what Selections returns).
	Writers []Writer
	// filter is what the rules that made this selection leave out.
	filter filter
}

// ExpandOptions are the daemon-wide selection settings.
type ExpandOptions struct {
	// WatchAll makes a rule without resources select every resource instead of the
	// desired-state default set.
	WatchAll bool
	// Exclude lists resources never watched, as "resource" or "resource.group".
	Exclude []string
}

// ruleSpec is a rule of either kind, flattened: which scope it may select from.
type ruleSpec struct {
	crds.ResourceRule
	clusterScoped bool       // selects cluster-scoped resources (ClusterWatchRule scope Cluster)
	namespace     string     // for a WatchRule: its own namespace
	scope         labelScope // its objectSelector and namespaceSelector
}

// expand turns rules into concrete selections against discovery. Secrets are selected only when
// encrypted is true (the destination encrypts them) and a rule names them explicitly; otherwise it
// reports that a rule selected them: they are never written in plain text, only reported.
func expand(rules []ruleSpec, resources []kube.APIResource, opts ExpandOptions, encrypted bool) (sel []Selection, secretsSkipped bool) {
	for _, rule := range rules {
		for _, res := range resources {
			if res.Namespaced == rule.clusterScoped || excluded(res, opts.Exclude) {
				continue
			}
			if !matches(rule.APIGroups, res.Group) || !selectsResource(rule.Resources, res, opts.WatchAll) {
				continue
			}
			version, ok := pickVersion(rule.APIVersions, res.Versions)
			if !ok {
				continue
			}
			if res.Group == "" && res.Resource == "secrets" && (!encrypted || !slices.Contains(rule.Resources, "secrets")) {
				secretsSkipped = true
				continue
			}
			sel = append(sel, Selection{
				GVR:        res.GroupResource().WithVersion(version),
				Kind:       res.Kind,
				Namespaced: res.Namespaced,
				Namespace:  rule.namespace,
				Ops:        opsOf(rule.Operations),
				filter:     filterOf(rule.ResourceRule, rule.scope),
			})
		}
	}
	return merge(sel), secretsSkipped
}

// merge folds selections of the same resource and namespace together, uniting their operations
// and leaving out only what every one of their rules leaves out.
func merge(sel []Selection) []Selection {
	var out []Selection
	for _, s := range sel {
		i := slices.IndexFunc(out, func(o Selection) bool {
			return o.GVR.GroupResource() == s.GVR.GroupResource() && o.Namespace == s.Namespace
		})
		if i < 0 {
			out = append(out, s)
			continue
		}
		out[i].Ops |= s.Ops
		out[i].filter = out[i].filter.and(s.filter)
	}
	return out
}

func matches(patterns []string, value string) bool {
	return len(patterns) == 0 || slices.Contains(patterns, "*") || slices.Contains(patterns, value)
}

func selectsResource(patterns []string, res kube.APIResource, watchAll bool) bool {
	if slices.Contains(patterns, res.Resource) {
		return true
	}
	if apiserverMade[res.GroupResource()] {
		return false // only when named
	}
	if len(patterns) == 0 {
		return watchAll || inDefaultSet(res)
	}
	return slices.Contains(patterns, "*")
}

// apiserverMade are resources whose objects the apiserver makes and keeps for itself: API
// priority and fairness' suggested and mandatory configuration, which it rewrites, and the
// Service IP allocations and ranges. A rule selects them only by naming them, "*" included:
// restored into another cluster, they would fight that cluster's own (docs/restore.md).
var apiserverMade = map[schema.GroupResource]bool{
	{Group: "flowcontrol.apiserver.k8s.io", Resource: "flowschemas"}:                 true,
	{Group: "flowcontrol.apiserver.k8s.io", Resource: "prioritylevelconfigurations"}: true,
	{Group: "networking.k8s.io", Resource: "ipaddresses"}:                            true,
	{Group: "networking.k8s.io", Resource: "servicecidrs"}:                           true,
}

// pickVersion chooses the preferred version when the rule allows it, else the first allowed one.
func pickVersion(patterns, versions []string) (string, bool) {
	for _, v := range versions {
		if matches(patterns, v) {
			return v, true
		}
	}
	return "", false
}

// excluded matches "resource.group" exactly and a bare "resource" in every group.
func excluded(res kube.APIResource, exclude []string) bool {
	for _, ex := range exclude {
		name, group, qualified := strings.Cut(ex, ".")
		if name == res.Resource && (!qualified || group == res.Group) {
			return true
		}
	}
	return false
}

// notDesiredState are resources that record what the cluster did rather than what someone
// declared; a rule that omits resources leaves them out (seed 000: desired-state default).
var notDesiredState = map[schema.GroupResource]bool{
	{Resource: "pods"}:                                                     true,
	{Resource: "events"}:                                                   true,
	{Resource: "endpoints"}:                                                true,
	{Resource: "nodes"}:                                                    true,
	{Resource: "componentstatuses"}:                                        true,
	{Resource: "bindings"}:                                                 true,
	{Resource: "secrets"}:                                                  true, // never written in plain text; warned about only when asked for
	{Group: "events.k8s.io", Resource: "events"}:                           true,
	{Group: "discovery.k8s.io", Resource: "endpointslices"}:                true,
	{Group: "coordination.k8s.io", Resource: "leases"}:                     true,
	{Group: "coordination.k8s.io", Resource: "leasecandidates"}:            true,
	{Group: "apps", Resource: "replicasets"}:                               true,
	{Group: "apps", Resource: "controllerrevisions"}:                       true,
	{Group: "certificates.k8s.io", Resource: "certificatesigningrequests"}: true,
	{Group: "storage.k8s.io", Resource: "volumeattachments"}:               true,
	{Group: "storage.k8s.io", Resource: "csinodes"}:                        true,
	{Group: "storage.k8s.io", Resource: "csistoragecapacities"}:            true,
	{Group: "apiregistration.k8s.io", Resource: "apiservices"}:             true,
	{Group: "internal.apiserver.k8s.io", Resource: "storageversions"}:      true,
	{Group: "resource.k8s.io", Resource: "resourceslices"}:                 true,
	{Group: crds.Group, Resource: "proposals"}:                             true, // write-back's own records: mirroring them
	{Group: crds.Group, Resource: "syncruns"}:                              true, // would make a commit per run
}

func inDefaultSet(res kube.APIResource) bool {
	return !notDesiredState[res.GroupResource()] && res.Group != "metrics.k8s.io"
}
