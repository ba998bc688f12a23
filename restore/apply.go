package restore

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"slices"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/pager"

	"github.com/configbutler/gitops-reverser/crds"
	"github.com/configbutler/gitops-reverser/kube"
	"github.com/configbutler/gitops-reverser/sanitize"
)

// applier applies the objects of one restore.
type applier struct {
	opts Options
	dyn  dynamic.Interface
	api  rest.Interface // discovery
	// served is what discovery found, by group and kind: read before the CRDs are applied, and
	// again once they are Established.
	served  map[schema.GroupKind]kube.APIResource
	workers int

	// crdKinds are the kinds the CRDs of the restore define, and the CRD of each: in a dry run,
	// which stores nothing, their custom resources cannot be checked by the server; when the
	// CRD fails, they fail saying so.
	crdKinds map[schema.GroupKind]*item

	mu          sync.Mutex
	done, total int
	// newNamespaces are the namespaces a dry run would create: nothing in them can be checked by
	// the server either.
	newNamespaces map[string]bool
}

// notChecked says why a dry run reports an object as would-be-created without the server's check.
const (
	notCheckedCRD       = "its CRD is in the folder and would be created first: not checked by the server"
	notCheckedNamespace = "its namespace would be created first: checked by the server in namespace default, so what its own namespace adds (quotas, limits, policies bound to it) is not checked"
)

var (
	crdGVR  = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	crdKind = schema.GroupKind{Group: "apiextensions.k8s.io", Kind: "CustomResourceDefinition"}
)

// choose marks what is left out (by default or by the selectors) and returns the items to apply.
func (a *applier) choose(items []item) []*item {
	var todo []*item
	for i := range items {
		it := &items[i]
		if it.obj == nil || it.Outcome != "" {
			continue
		}
		if reason := leftOutByDefault(it.obj, a.opts.IncludeConfiguration); reason != "" {
			it.Outcome, it.Reason = LeftOut, reason
			continue
		}
		if !selected(it.obj, a.opts.Only, a.opts.Exclude) {
			it.Outcome, it.Reason = LeftOut, "not selected (--only, --exclude)"
			continue
		}
		if it.locked {
			it.Outcome, it.Reason = Skipped, reasonLocked
			continue
		}
		todo = append(todo, it)
	}
	return todo
}

// splitCRDs separates the CustomResourceDefinitions, applied first, and notes the kinds they define.
func (a *applier) splitCRDs(items []*item) (crds, rest []*item) {
	for _, it := range items {
		if it.obj.GroupVersionKind().GroupKind() == crdKind {
			it.gvr, it.wave = crdGVR, waveCRDs
			crds = append(crds, it)
			group, _, _ := unstructured.NestedString(it.obj.Object, "spec", "group")
			kind, _, _ := unstructured.NestedString(it.obj.Object, "spec", "names", "kind")
			a.crdKinds[schema.GroupKind{Group: group, Kind: kind}] = it
		} else {
			rest = append(rest, it)
		}
	}
	return crds, rest
}

// discover reads which kinds the cluster serves (kube.Discover: the resources that can be listed
// and watched, which every kind of a mirror's folder is).
func (a *applier) discover(ctx context.Context) error {
	resources, err := kube.Discover(ctx, a.api, slog.New(slog.DiscardHandler))
	if err != nil {
		return err
	}
	a.served = map[schema.GroupKind]kube.APIResource{}
	for _, r := range resources {
		a.served[schema.GroupKind{Group: r.Group, Kind: r.Kind}] = r
	}
	return nil
}

// awaitEstablished waits, one wait for them all, until each CRD restored is Established: one
// whose names the cluster refused (NamesAccepted=False) fails at once, one still not Established
// when the wait runs out fails saying what its conditions said, and their custom resources fail
// with them (resolve), while the rest go on. Then it discovers again, with ctx rather than the
// wait's own deadline, so the new kinds are found.
func (a *applier) awaitEstablished(ctx context.Context, defs []*item) error {
	var pending []*item
	for _, it := range defs {
		if it.Outcome != Failed && !a.opts.DryRun {
			pending = append(pending, it)
		}
	}
	if len(defs) == 0 {
		return nil
	}
	wait := cmp.Or(a.opts.crdTimeout, crdEstablishTimeout)
	waitCtx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	client := kube.For(a.dyn, kube.CustomResourceDefinitions, "")
	last := map[*item]string{}
	for len(pending) > 0 {
		pending = slices.DeleteFunc(pending, func(it *item) bool {
			live, err := client.Get(waitCtx, it.Name, metav1.GetOptions{})
			if err != nil {
				last[it] = err.Error()
				return false
			}
			served, state, refused := crds.ServedState(live)
			if refused != nil {
				it.Outcome, it.Reason = Failed, "not served: "+refused.Error()
			}
			last[it] = state
			return served || refused != nil
		})
		if len(pending) == 0 {
			break
		}
		select {
		case <-waitCtx.Done():
			for _, it := range pending {
				it.Outcome, it.Reason = Failed, fmt.Sprintf("not Established within %s (%s)", wait, last[it])
			}
			pending = nil
		case <-time.After(100 * time.Millisecond):
		}
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	return a.discover(ctx)
}

// resolve finds each item's resource and scope in discovery, and so its wave; an item whose kind
// the cluster does not serve fails here.
func (a *applier) resolve(items []*item) []*item {
	var resolved []*item
	for _, it := range items {
		gvk := it.obj.GroupVersionKind()
		res, ok := a.served[gvk.GroupKind()]
		served := ok && slices.Contains(res.Versions, gvk.Version)
		if !served && a.opts.DryRun && a.crdKinds[gvk.GroupKind()] != nil {
			a.finish(it, Created, notCheckedCRD)
			continue
		}
		if crd := a.crdKinds[gvk.GroupKind()]; !served && crd != nil && crd.Outcome == Failed {
			a.finish(it, Failed, fmt.Sprintf("its CRD %s was refused: %s", crd.Name, crd.Reason))
			continue
		}
		if !served {
			a.finish(it, Failed, fmt.Sprintf("the cluster does not serve %s (its CRD is not in the folder, or the API or version is off)",
				gvk.GroupVersion().WithKind(gvk.Kind)))
			continue
		}
		it.gvr, it.namespaced = schema.GroupVersionResource{Group: res.Group, Version: gvk.Version, Resource: res.Resource}, res.Namespaced
		it.wave = waveOf(it.obj, it.namespaced)
		resolved = append(resolved, it)
	}
	return resolved
}

// listLive reads what exists of items with one list (of pages) for each resource and namespace
// they are in, instead of a read for each: a restore into a cluster that has few of them, or all,
// then costs a request an object. Where a list is refused or fails, each object is read alone.
func (a *applier) listLive(ctx context.Context, items []*item) {
	type place struct {
		gvr       schema.GroupVersionResource
		namespace string
	}
	groups := map[place][]*item{}
	for _, it := range items {
		p := place{it.gvr, it.obj.GetNamespace()}
		if !it.namespaced {
			p.namespace = ""
		}
		groups[p] = append(groups[p], it)
	}
	for p, group := range groups {
		if len(group) < 2 {
			continue
		}
		live := map[string]*unstructured.Unstructured{}
		err := pager.New(func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			return a.dyn.Resource(p.gvr).Namespace(p.namespace).List(ctx, opts)
		}).EachListItem(ctx, metav1.ListOptions{}, func(obj runtime.Object) error {
			u := obj.(*unstructured.Unstructured)
			live[u.GetName()] = u
			return nil
		})
		if err != nil {
			continue
		}
		for _, it := range group {
			it.live, it.listed = live[it.obj.GetName()], true
		}
	}
}

// applyWave applies items, a.workers at a time, and returns when all are done.
func (a *applier) applyWave(ctx context.Context, items []*item) {
	a.listLive(ctx, items)
	next := make(chan *item)
	var wg sync.WaitGroup
	for range min(a.workers, len(items)) {
		wg.Go(func() {
			for it := range next {
				outcome, reason := a.apply(ctx, it)
				a.finish(it, outcome, reason)
			}
		})
	}
	for _, it := range items {
		next <- it
	}
	close(next)
	wg.Wait()
}

// apply applies one object with server-side apply as FieldManager, forcing ownership of the
// fields the file sets (the file is what the object is to be), and says what changed: compared
// with the object before, apart from its bookkeeping (resourceVersion, managedFields). An object
// that exists is applied with the server's dry run first, and not written when that changes
// nothing: a restore run again writes nothing (an apply that changes nothing visible can still be
// stored: the apiserver rewrites a PersistentVolumeClaim on its first update after creation).
func (a *applier) apply(ctx context.Context, it *item) (Outcome, string) {
	obj := prepared(it.obj, it.namespaced)
	if it.namespaced && obj.GetNamespace() == "" {
		return Failed, "a namespaced object without metadata.namespace"
	}
	if a.opts.DryRun && it.namespaced && a.newNamespace(obj.GetNamespace()) {
		return a.checkElsewhere(ctx, it, obj)
	}
	client := a.dyn.Resource(it.gvr).Namespace(obj.GetNamespace())
	before := it.live
	if !it.listed {
		var err error
		if before, err = client.Get(ctx, obj.GetName(), metav1.GetOptions{}); apierrors.IsNotFound(err) {
			before = nil
		} else if err != nil {
			return Failed, fromServer("read", err)
		}
	}
	if before != nil || a.opts.DryRun {
		after, err := serverSideApply(ctx, client, obj, true)
		switch {
		case err != nil:
			return Failed, fromServer("apply", err)
		case before == nil:
			return Created, ""
		case sameContent(before, after):
			return Unchanged, ""
		case a.opts.DryRun:
			return Changed, ""
		}
	}
	if _, err := serverSideApply(ctx, client, obj, false); err != nil {
		return Failed, fromServer("apply", err)
	}
	if before == nil {
		return Created, ""
	}
	return Changed, ""
}

// serverSideApply applies obj as FieldManager, forcing ownership of the fields it sets, with
// the body written so the apiserver reads every value back exactly (kube.ApplyBody).
func serverSideApply(ctx context.Context, client dynamic.ResourceInterface, obj *unstructured.Unstructured, dryRun bool) (*unstructured.Unstructured, error) {
	body, err := kube.ApplyBody(obj.Object)
	if err != nil {
		return nil, err
	}
	force := true
	opts := metav1.PatchOptions{FieldManager: FieldManager, Force: &force}
	if dryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	return client.Patch(ctx, obj.GetName(), types.ApplyPatchType, body, opts)
}

// checkElsewhere is the dry run of an object whose namespace the restore would create first: a
// dry run stores no namespace, so the server cannot check the object there. It checks it in the
// namespace default instead (its fields, its schema, the admission that is not bound to a
// namespace), and says what that leaves unchecked.
func (a *applier) checkElsewhere(ctx context.Context, it *item, obj *unstructured.Unstructured) (Outcome, string) {
	elsewhere := obj.DeepCopy()
	elsewhere.SetNamespace(metav1.NamespaceDefault)
	_, err := serverSideApply(ctx, a.dyn.Resource(it.gvr).Namespace(metav1.NamespaceDefault), elsewhere, true)
	switch {
	case err == nil:
		return Created, notCheckedNamespace
	case apierrors.IsInvalid(err), apierrors.IsBadRequest(err):
		return Failed, fromServer("apply", err)
	}
	return Created, fmt.Sprintf("its namespace would be created first, and checking it in namespace default failed too (%s): not checked by the server", fromServer("apply", err))
}

// prepared is the object to send: what the file holds, without what the server owns should a
// file carry it (sanitize.Object, as the mirror writes files: a hand-written file may hold a uid,
// status, or owner references to objects of the old cluster), and without a namespace for a
// cluster-scoped kind.
func prepared(obj *unstructured.Unstructured, namespaced bool) *unstructured.Unstructured {
	out := &unstructured.Unstructured{Object: sanitize.Object(obj.Object)}
	if !namespaced {
		out.SetNamespace("")
	}
	if isServiceAccountToken(out) {
		withoutToken(out)
	}
	return out
}

// isServiceAccountToken says whether obj is a Secret of type kubernetes.io/service-account-token.
func isServiceAccountToken(obj *unstructured.Unstructured) bool {
	t, _, _ := unstructured.NestedString(obj.Object, "type")
	return obj.GetKind() == "Secret" && obj.GroupVersionKind().Group == "" && t == "kubernetes.io/service-account-token"
}

// withoutToken strips a ServiceAccount token Secret of what the old cluster issued (the token,
// its CA and namespace, and the old ServiceAccount's uid), so the new cluster's token controller
// fills it again for the ServiceAccount it names; a token the old cluster signed is worth nothing
// here, and a uid that does not match makes the controller delete the Secret.
func withoutToken(obj *unstructured.Unstructured) {
	unstructured.RemoveNestedField(obj.Object, "data")
	unstructured.RemoveNestedField(obj.Object, "stringData")
	annotations := obj.GetAnnotations()
	delete(annotations, "kubernetes.io/service-account.uid")
	obj.SetAnnotations(annotations)
}

// sameContent compares two states of an object apart from its bookkeeping.
func sameContent(a, b *unstructured.Unstructured) bool {
	strip := func(u *unstructured.Unstructured) map[string]any {
		c := u.DeepCopy()
		for _, f := range []string{"resourceVersion", "managedFields", "generation"} {
			unstructured.RemoveNestedField(c.Object, "metadata", f)
		}
		return c.Object
	}
	return reflect.DeepEqual(strip(a), strip(b))
}

// fromServer says what failed and, for an answer of the apiserver, its reason as kubectl does.
func fromServer(doing string, err error) string {
	var status apierrors.APIStatus
	if errors.As(err, &status) && status.Status().Reason != "" {
		return fmt.Sprintf("%s: error from server (%s): %s", doing, status.Status().Reason, status.Status().Message)
	}
	return fmt.Sprintf("%s: %v", doing, err)
}

func (a *applier) newNamespace(name string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.newNamespaces[name]
}

// finish records an item's outcome and tells the progress.
func (a *applier) finish(it *item, outcome Outcome, reason string) {
	it.Outcome, it.Reason = outcome, reason
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.opts.DryRun && outcome == Created && it.Kind == "Namespace" && it.obj != nil && it.obj.GroupVersionKind().Group == "" {
		a.newNamespaces[it.Name] = true
	}
	a.done++
	if a.opts.Progress != nil {
		a.opts.Progress(a.done, a.total, it.Result)
	}
}
