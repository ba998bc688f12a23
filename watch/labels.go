package watch

import (
	"fmt"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
)

// labelScope is what one rule selects by labels: the objects whose labels match objects, in the
// namespaces whose labels match namespaces; a nil selector selects everything.
type labelScope struct {
	objects, namespaces labels.Selector
}

// scopeOf parses a rule's objectSelector and namespaceSelector. The apiserver's schema refuses
// what does not parse; should anything slip through, the error says which.
func scopeOf(objects, namespaces *metav1.LabelSelector) (labelScope, error) {
	var s labelScope
	var err error
	if objects != nil {
		if s.objects, err = metav1.LabelSelectorAsSelector(objects); err != nil {
			return s, fmt.Errorf("objectSelector: %w", err)
		}
	}
	if namespaces != nil {
		if s.namespaces, err = metav1.LabelSelectorAsSelector(namespaces); err != nil {
			return s, fmt.Errorf("namespaceSelector: %w", err)
		}
	}
	return s, nil
}

// all reports whether the scope selects every object (an empty selector does too).
func (s labelScope) all() bool {
	return (s.objects == nil || s.objects.Empty()) && (s.namespaces == nil || s.namespaces.Empty())
}

func (s labelScope) String() string {
	str := func(sel labels.Selector) string {
		if sel == nil {
			return ""
		}
		return sel.String()
	}
	return str(s.objects) + "@" + str(s.namespaces)
}

// selects reports whether an object with labels objLabels, in a namespace with labels nsLabels,
// is in the scope.
func (s labelScope) selects(objLabels, nsLabels labels.Set) bool {
	return (s.objects == nil || s.objects.Matches(objLabels)) && (s.namespaces == nil || s.namespaces.Matches(nsLabels))
}

// labelScopes are the label scopes of the rules that select a resource for one destination: an
// object is selected when one of them selects it. Nil selects every object.
type labelScopes []labelScope

// union is what either selects: a rule without selectors selects everything.
func (a labelScopes) union(b labelScopes) labelScopes {
	if a == nil || b == nil {
		return nil
	}
	out := slices.Clone(a)
	for _, s := range b {
		if !slices.ContainsFunc(out, func(o labelScope) bool { return o.String() == s.String() }) {
			out = append(out, s)
		}
	}
	return out
}

func (a labelScopes) String() string {
	parts := make([]string, len(a))
	for i, s := range a {
		parts[i] = s.String()
	}
	return strings.Join(parts, ";")
}

// selects reports whether any scope selects the object.
func (a labelScopes) selects(objLabels, nsLabels labels.Set) bool {
	if a == nil {
		return true
	}
	return slices.ContainsFunc(a, func(s labelScope) bool { return s.selects(objLabels, nsLabels) })
}

// coversNamespace reports whether any scope admits objects of a namespace with labels set.
func (a labelScopes) coversNamespace(set labels.Set) bool {
	return slices.ContainsFunc(a, func(sc labelScope) bool { return sc.namespaces == nil || sc.namespaces.Matches(set) })
}

// byNamespace reports whether any scope selects by the namespace's labels.
func (a labelScopes) byNamespace() bool {
	return slices.ContainsFunc(a, func(s labelScope) bool { return s.namespaces != nil })
}

// serverSide is the one label selector the apiserver can apply for every target, "" when there
// is none: each target has a single scope, by object labels alone, and all are the same.
func serverSide(targets []target) string {
	sel := ""
	for i, t := range targets {
		if len(t.filter.scopes) != 1 || t.filter.scopes[0].namespaces != nil || t.filter.scopes[0].objects == nil {
			return ""
		}
		s := t.filter.scopes[0].objects.String()
		if i > 0 && s != sel {
			return ""
		}
		sel = s
	}
	return sel
}

// ruleError names the rule whose selector does not parse; nil for nil.
func ruleError(i int, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("spec.rules[%d].%w", i, err)
}

// namespacesCached starts the cache of namespaces, once, and reports whether it has filled.
func (m *Manager) namespacesCached() bool {
	if m.cacheNamespaces != nil {
		m.cacheNamespaces()
	}
	return m.namespaces != nil && m.namespaces.HasSynced()
}

// namespaceLabels returns the labels namespace ns has in the cache of namespaces (nil when it is
// not there). It is safe from any goroutine.
func (m *Manager) namespaceLabels(ns string) labels.Set {
	if m.namespaces == nil {
		return nil
	}
	if item, ok, _ := m.namespaces.GetStore().GetByKey(ns); ok {
		return item.(*unstructured.Unstructured).GetLabels()
	}
	return nil
}

// matchNamespaces names, in each target that selects by namespace labels, the namespaces it
// selects now: a namespace relabelled in or out changes its watcher's signature.
func (m *Manager) matchNamespaces(specs map[string]*watcherSpec) {
	if m.namespaces == nil {
		return
	}
	for _, s := range specs {
		for i := range s.targets {
			t := &s.targets[i]
			if !t.filter.scopes.byNamespace() {
				continue
			}
			var names []string
			for _, item := range m.namespaces.GetStore().List() {
				if ns := item.(*unstructured.Unstructured); t.filter.scopes.coversNamespace(ns.GetLabels()) {
					names = append(names, ns.GetName())
				}
			}
			slices.Sort(names)
			t.namespaces = strings.Join(names, ",")
		}
	}
}

// SelectsNamespace reports whether sel, one of Selections' answers, selects objects of namespace
// by that namespace's labels (a ClusterWatchRule's namespaceSelector); true without one. Safe to
// call from any goroutine.
func (m *Manager) SelectsNamespace(sel Selection, namespace string) bool {
	if !sel.filter.scopes.byNamespace() {
		return true
	}
	return sel.filter.scopes.coversNamespace(m.namespaceLabels(namespace)) // cached before the rule was admitted
}

// SelectsObject reports whether sel, one of Selections' answers, selects an object of namespace
// with labels objLabels by its rules' label selectors; true without any. Safe to call from any
// goroutine.
func (m *Manager) SelectsObject(sel Selection, namespace string, objLabels map[string]string) bool {
	var nsLabels labels.Set
	if sel.filter.scopes.byNamespace() {
		nsLabels = m.namespaceLabels(namespace)
	}
	return sel.filter.scopes.selects(objLabels, nsLabels)
}
