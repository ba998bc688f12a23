package watch

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/configbutler/gitops-reverser/sanitize"
)

// watcherSelection is how a watcher tells the objects its targets select by labels. When one
// label selector serves every target the apiserver applies it: a list returns only what it
// selects, and a watch says DELETED for an object relabelled out of it. Otherwise the watcher
// matches each object itself and remembers, per selective target, the objects it leaves out, so
// an object relabelled out is deleted once. Without selectors it holds nothing.
type watcherSelection struct {
	labelSelector string                  // what the apiserver applies, "" for none
	server        labels.Selector         // its parsed form
	nsLabels      func(string) labels.Set // a namespace's labels, for namespaceSelectors
	unselected    []map[string]struct{}   // per target: namespace/name of the objects it leaves out; nil when it selects all
}

// selecting prepares the watcher for its targets' label selectors.
func (w *watcher) selecting(nsLabels func(string) labels.Set) {
	if sel := serverSide(w.targets); sel != "" {
		w.selection = watcherSelection{labelSelector: sel, server: w.targets[0].filter.scopes[0].objects}
		return
	}
	for i, t := range w.targets {
		if t.filter.scopes == nil {
			continue
		}
		if w.selection.unselected == nil {
			w.selection.unselected = make([]map[string]struct{}, len(w.targets))
		}
		w.selection.unselected[i] = map[string]struct{}{}
		if t.filter.scopes.byNamespace() {
			w.selection.nsLabels = nsLabels // the namespaces are cached before such a rule is admitted
		}
	}
}

// forgetUnselected starts a list afresh.
func (w *watcher) forgetUnselected() {
	for i, set := range w.selection.unselected {
		if set != nil {
			w.selection.unselected[i] = map[string]struct{}{}
		}
	}
}

// selects reports whether target i selects obj by its labels and its namespace's, records it,
// and reports whether obj just left the target's selection (it was written before).
func (w *watcher) selects(i int, obj *unstructured.Unstructured) (selected, left bool) {
	if w.selection.unselected == nil || w.selection.unselected[i] == nil {
		return true, false // every object, or those the apiserver selected
	}
	var nsLabels labels.Set
	if w.selection.nsLabels != nil && obj.GetNamespace() != "" {
		nsLabels = w.selection.nsLabels(obj.GetNamespace())
	}
	k := key(obj)
	set := w.selection.unselected[i]
	_, wasOut := set[k]
	if w.targets[i].filter.scopes.selects(obj.GetLabels(), nsLabels) {
		delete(set, k)
		return true, false
	}
	set[k] = struct{}{}
	_, seen := w.hashes[k]
	return false, seen && !wasOut
}

// leftOut reports whether target i left obj out (so never wrote it), and forgets it: obj is gone.
func (w *watcher) leftOut(i int, k string) bool {
	if w.selection.unselected == nil || w.selection.unselected[i] == nil {
		return false
	}
	_, out := w.selection.unselected[i][k]
	delete(w.selection.unselected[i], k)
	return out
}

// deletedAs is the operation a DELETED event stands for, and the canonical JSON to credit it by.
// The apiserver says DELETED, with the object as it last matched, both for a delete and for an
// object relabelled out of its selector: one still there was updated, not deleted (a read per
// DELETED event, only where the apiserver applies a selector).
func (w *watcher) deletedAs(ctx context.Context, obj *unstructured.Unstructured) (string, []byte) {
	if w.selection.server == nil {
		return "DELETE", nil
	}
	now, err := w.client.Get(ctx, obj.GetName(), metav1.GetOptions{})
	if err != nil || w.selection.server.Matches(labels.Set(now.GetLabels())) {
		return "DELETE", nil
	}
	canon, err := sanitize.JSON(sanitize.Object(now.Object))
	if err != nil {
		return "UPDATE", nil
	}
	return "UPDATE", canon
}
