package watch

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/configbutler/gitops-reverser/gitops"
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
	_, seen := w.hashes[w.keyHash(obj)]
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

// deleteCredit is who made the change a DELETED event stands for. The apiserver says DELETED,
// with the object as it last matched, both for a delete and for an object relabelled out of the
// selector it applies. Without a record of a delete, one still there was relabelled: it is read
// back (once per such event, only while attribution is on) to credit whoever updated it.
func (w *watcher) deleteCredit(ctx context.Context, obj *unstructured.Unstructured) gitops.Credit {
	gk, ns, name := w.groupKind(), obj.GetNamespace(), obj.GetName()
	credit, known := w.authors.Author("DELETE", gk, ns, name, nil)
	if _, off := w.authors.(noAuthors); known || off || w.selection.server == nil {
		return credit
	}
	// Not older than the event: the apiserver answers from its watch cache, not from etcd.
	now, err := w.client.Get(ctx, name, metav1.GetOptions{ResourceVersion: obj.GetResourceVersion()})
	if err != nil || w.selection.server.Matches(labels.Set(now.GetLabels())) {
		return credit
	}
	canon, err := sanitize.JSON(sanitize.Object(now.Object))
	if err != nil {
		return credit
	}
	if updated, ok := w.authors.Author("UPDATE", gk, ns, name, canon); ok {
		return updated
	}
	return credit
}
