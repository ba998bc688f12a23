package watch

import (
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/configbutler/gitops-reverser/crds"
)

// CrossNamespaceRefs says whether a reference may leave its namespace (--cross-namespace-refs).
type CrossNamespaceRefs string

// Values of CrossNamespaceRefs.
const (
	// CrossNamespaceConsent admits a reference into another namespace when the object referred
	// to admits the referring namespace (spec.accessPolicy): the default.
	CrossNamespaceConsent CrossNamespaceRefs = "consent"
	// CrossNamespaceDeny admits no reference into another namespace, whatever an accessPolicy says.
	CrossNamespaceDeny CrossNamespaceRefs = "deny"
)

// ReasonReferenceNotAllowed is the Ready reason of a refused reference.
const ReasonReferenceNotAllowed = crds.ReasonReferenceNotAllowed

var namespacesGVR = schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}

// refusalFunc is Manager.refusal, as resolveDestinations asks it.
type refusalFunc func(field, from, kind, namespace, name string, policy *crds.AccessPolicy) string

// refusal says why the reference field of an object in namespace from, to the object kind
// target/namespace/name whose accessPolicy is policy, is not admitted; "" when it is.
func (m *Manager) refusal(field, from, kind, namespace, name string, policy *crds.AccessPolicy) string {
	if namespace == from {
		return ""
	}
	target := fmt.Sprintf("%s %s/%s", kind, namespace, name)
	if m.opts.CrossNamespaceRefs == CrossNamespaceDeny {
		return fmt.Sprintf("%s names %s in another namespace, and this daemon admits no reference across namespaces "+
			"(--cross-namespace-refs=deny): use a %s of namespace %s", field, target, kind, from)
	}
	if m.admitted(from, policy) {
		return ""
	}
	return fmt.Sprintf("%s names %s, which does not admit namespace %s: add %q to spec.accessPolicy.namespaces of %s "+
		"(or give namespace %s labels its spec.accessPolicy.namespaceSelector matches)", field, target, from, from, target, from)
}

// admitted reports whether policy admits namespace from, by name or by the labels it has in the
// cache of namespaces.
func (m *Manager) admitted(from string, policy *crds.AccessPolicy) bool {
	if policy == nil {
		return false
	}
	var labels map[string]string
	if policy.NamespaceSelector != nil && m.namespacesCached() { // not cached (yet): the cache reconciles again once it has filled
		labels = m.namespaceLabels(from)
		if labels == nil {
			labels = map[string]string{}
		}
	}
	return policy.Admits(from, labels)
}

// refusedDestination says why a WatchRule of namespace from may not write into dest ("" when it
// may, or when dest is missing: addRule says that).
func (m *Manager) refusedDestination(from string, dest *destination) string {
	if dest == nil {
		return ""
	}
	return m.refusal("spec.destinationRef", from, crds.KindGitDestination, dest.obj.Namespace, dest.obj.Name, dest.obj.Spec.AccessPolicy)
}

// refusals are the references and rules one reconcile refused, by uid of the referring object,
// the references' count by kind, and the rules refused for their ServiceAccount (by reason).
type refusals struct {
	messages       map[string]string
	byKind         map[string]int
	serviceAccount map[string]int
}

// tell records a refused reference of obj, or a rule refused for its ServiceAccount; a
// Warning Event says it the first time (and again when the refusal changes). One admitted since is
// forgotten, so a later refusal is told again.
func (m *Manager) tell(r *refusals, kind string, obj metav1.Object, cond condition) {
	switch cond.reason {
	case ReasonReferenceNotAllowed:
		r.byKind[kind]++
	case ReasonServiceAccountNotAllowed, ReasonServiceAccountConsentMissing:
		r.serviceAccount[cond.reason]++
	default:
		return
	}
	uid := string(obj.GetUID())
	r.messages[uid] = cond.message
	if m.refused[uid] != cond.message {
		m.reporter.recorder.Event(crds.ObjectReference(kind, obj), corev1.EventTypeWarning, cond.reason, cond.message)
	}
}

// keep makes r what the next reconcile compares with, and sets references_refused and
// rules_refused.
func (m *Manager) keep(r *refusals) {
	m.refused = r.messages
	for _, kind := range []string{crds.KindGitDestination, crds.KindWatchRule} {
		m.opts.Metrics.ReferencesRefused.WithLabelValues(kind).Set(float64(r.byKind[kind]))
	}
	for _, reason := range []string{ReasonServiceAccountNotAllowed, ReasonServiceAccountConsentMissing} {
		m.opts.Metrics.RulesRefused.WithLabelValues(reason).Set(float64(r.serviceAccount[reason]))
	}
}

// publishAdmitted makes what the last reconcile found each destination may use readable by Admits,
// and which namespaces each destination admits readable by Consents.
func (m *Manager) publishAdmitted(dests []*destination) {
	admitted := make(map[string]string, len(dests))
	consents := make(map[string][]string, len(dests))
	for _, d := range dests {
		admitted[d.name()] = d.admittedRepo
		consents[d.name()] = m.consentsOf(d)
	}
	m.repoAdmitted.Store(&admitted)
	m.consents.Store(&consents)
}

// consentsOf lists the other namespaces destination d admits (its spec.accessPolicy), by name or
// by the labels they have in the cache of namespaces; none with --cross-namespace-refs=deny.
func (m *Manager) consentsOf(d *destination) []string {
	policy := d.obj.Spec.AccessPolicy
	if policy == nil || m.opts.CrossNamespaceRefs == CrossNamespaceDeny {
		return nil
	}
	out := slices.Clone(policy.Namespaces)
	if policy.NamespaceSelector != nil && m.namespacesCached() {
		for _, item := range m.namespaces.GetStore().List() {
			if ns := item.(*unstructured.Unstructured).GetName(); m.admitted(ns, policy) {
				out = append(out, ns)
			}
		}
	}
	return out
}

// Consents says whether the GitDestination namespace/name admits namespace from, as the last
// reconcile saw it: its own namespace always, another by its spec.accessPolicy. Safe to call
// from any goroutine.
func (m *Manager) Consents(namespace, name, from string) bool {
	if from == namespace {
		return true
	}
	p := m.consents.Load()
	return p != nil && slices.Contains((*p)[namespace+"/"+name], from)
}

// Admits reports whether the destination ("namespace/name") may use the GitRepoConfig repo
// ("namespace/name"), as the last reconcile resolved it; known is false when that reconcile did
// not see the destination with that repository (not yet, or since changed). Safe to call from any
// goroutine.
func (m *Manager) Admits(destination, repo string) (admitted, known bool) {
	p := m.repoAdmitted.Load()
	if p == nil {
		return false, false
	}
	got, seen := (*p)[destination]
	switch {
	case !seen:
		return false, false
	case got == repo:
		return true, true
	case got == "":
		return false, true
	}
	return false, false // resolved with another repository: not decided for this one yet
}
