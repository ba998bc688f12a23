package restore

import (
	"cmp"
	"slices"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// The order of a restore, in waves: each wave is applied (in parallel within it) before the next
// starts. Nothing depends on file names. CRDs come first and are waited for until Established, so
// their custom resources are served when their wave comes; namespaces before what lives in them;
// what others refer to (ServiceAccounts, Secrets, ConfigMaps, quotas and limits, claims) before
// the workloads that use them, so the first Pods start as they should; and admission webhooks and
// aggregated APIs last, as they point at Services that must run first (applied early, a webhook
// whose Service is not up yet refuses every write it intercepts).
const (
	waveCRDs = iota
	waveNamespaces
	waveClusterScoped
	waveReferenced
	waveWorkloads
	waveRest
	waveAdmission
)

// referencedKinds are the namespaced kinds other objects use, restored before the workloads;
// admissionKinds the cluster's admission and aggregation, restored last.
var (
	referencedKinds = map[string]bool{
		"/ServiceAccount": true, "/Secret": true, "/ConfigMap": true, "/LimitRange": true, "/ResourceQuota": true,
		"/PersistentVolumeClaim": true, "/Service": true,
		"rbac.authorization.k8s.io/Role": true, "rbac.authorization.k8s.io/RoleBinding": true,
	}
	workloadKinds = map[string]bool{
		"apps/Deployment": true, "apps/StatefulSet": true, "apps/DaemonSet": true, "apps/ReplicaSet": true,
		"batch/Job": true, "batch/CronJob": true, "/Pod": true, "/ReplicationController": true,
	}
	admissionKinds = map[string]bool{
		"admissionregistration.k8s.io/ValidatingWebhookConfiguration":   true,
		"admissionregistration.k8s.io/MutatingWebhookConfiguration":     true,
		"admissionregistration.k8s.io/ValidatingAdmissionPolicy":        true,
		"admissionregistration.k8s.io/ValidatingAdmissionPolicyBinding": true,
		"admissionregistration.k8s.io/MutatingAdmissionPolicy":          true,
		"admissionregistration.k8s.io/MutatingAdmissionPolicyBinding":   true,
		"apiregistration.k8s.io/APIService":                             true,
	}
)

// waveOf is the wave obj is restored in; namespaced says whether its kind is namespaced.
func waveOf(obj *unstructured.Unstructured, namespaced bool) int {
	gk := obj.GroupVersionKind().GroupKind()
	key := gk.Group + "/" + gk.Kind
	switch {
	case key == "apiextensions.k8s.io/CustomResourceDefinition":
		return waveCRDs
	case key == "/Namespace":
		return waveNamespaces
	case admissionKinds[key]:
		return waveAdmission
	case !namespaced:
		return waveClusterScoped
	case isServiceAccountToken(obj):
		return waveWorkloads // after its ServiceAccount: the token controller deletes a token of none
	case referencedKinds[key]:
		return waveReferenced
	case workloadKinds[key]:
		return waveWorkloads
	}
	return waveRest
}

// waves groups items by their wave, in order; within a wave by kind, namespace and name, for a
// report that reads in order.
func waves(items []*item) [][]*item {
	sorted := slices.Clone(items)
	slices.SortStableFunc(sorted, func(a, b *item) int {
		return cmp.Or(cmp.Compare(a.wave, b.wave), cmp.Compare(a.Kind, b.Kind),
			cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})
	var out [][]*item
	for i, it := range sorted {
		if i == 0 || sorted[i-1].wave != it.wave {
			out = append(out, nil)
		}
		out[len(out)-1] = append(out[len(out)-1], it)
	}
	return out
}
