package writeback

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"path"
	"slices"
	"strings"

	"github.com/configbutler/gitops-reverser/crds"
	"github.com/configbutler/gitops-reverser/gitedits"
	"github.com/configbutler/gitops-reverser/placement"
)

// renderOverlay renders the kustomization in dir of files (placement.Build: in process, nothing
// fetched, no Helm, no plugin); no files render nothing. An object of a kind the destination's
// rules select as cluster-scoped loses the namespace kustomize's namespace: may have given it
// (kustomize cannot tell a custom cluster-scoped kind), as a document's inherited one does.
func renderOverlay(sels []Selection, files map[string][]byte, dir string) (map[placement.Key]map[string]any, error) {
	if len(files) == 0 {
		return nil, nil
	}
	objs, err := placement.Build(files, dir)
	if err != nil {
		return nil, err
	}
	out := make(map[placement.Key]map[string]any, len(objs))
	for k, obj := range objs {
		if namespaced, known := scopeOf(sels, k.Group, k.Kind); known && !namespaced && k.Namespace != "" {
			obj = maps.Clone(obj)
			meta := maps.Clone(obj["metadata"].(map[string]any))
			delete(meta, "namespace")
			obj["metadata"], k.Namespace = meta, ""
		}
		out[k] = obj
	}
	return out, nil
}

// renderedObject proposes what the overlay now renders for the object k, whose render changed
// from prev (nil: it rendered no such object), as a changed document would be proposed
// (evaluateDocument): the rendered object, refused as a document is (a Secret, a kind, namespace
// or labels the rules do not select), a create when the cluster has no such object, else an
// update, with the rendered diff.
func (c *Controller) renderedObject(ctx context.Context, d *dest, cl *cluster, sels []Selection, e gitedits.Edit, k placement.Key, obj, prev map[string]any) (*candidate, error) {
	text, err := placement.Render(obj)
	if err != nil {
		return nil, refusedf(ReasonUnparseable, "rendered %s: %v", k, err)
	}
	sel, ns, err := selectDocument(d, sels, placement.Indexed{Key: k})
	if err != nil {
		return nil, renderedRefusal(k, err)
	}
	doc, err := ParseDocument(text) // as the apply reads it
	if err != nil {
		return nil, renderedRefusal(k, err)
	}
	u := doc.Object
	u.SetNamespace(ns) // where it is applied: the namespace its label selectors are read in
	label := renderedLabel(e, sel, ns, k)
	if !sel.selectsLabels(u) {
		return nil, labelsNotSelected(d, label, "the rendered object's")
	}
	var was []byte
	if prev != nil {
		if was, err = placement.Render(prev); err != nil {
			was = nil // the diff then shows the whole object
		}
	}
	return c.proposeApply(ctx, cl, e, sel.GVR, u, text, was, label)
}

// unrenderedObject proposes the destroy of the object k the overlay rendered before the edit and
// no longer renders, if the cluster has it, as a removed document's (evaluateRemoved).
func (c *Controller) unrenderedObject(ctx context.Context, d *dest, cl *cluster, sels []Selection, e gitedits.Edit, k placement.Key) (*candidate, error) {
	sel, ns, err := selectDocument(d, sels, placement.Indexed{Key: k})
	if err != nil {
		return nil, renderedRefusal(k, err)
	}
	return c.proposeDestroy(ctx, d, cl, e, sel, ns, k.Name, renderedLabel(e, sel, ns, k), " (no longer rendered)")
}

// renderedLabel names the rendered object k, applied in ns, for messages and diffs.
func renderedLabel(e gitedits.Edit, sel *Selection, ns string, k placement.Key) string {
	return fmt.Sprintf("%s (rendered %s)", e.Path, placement.Key{Group: sel.GVR.Group, Kind: k.Kind, Namespace: ns, Name: k.Name})
}

// overlayFromGit checks that an overlay's proposal (its path is the overlay's kustomization
// file) says what Git renders at its source commit: for a create or update, the overlay renders
// its target as exactly the proposal's text; for a destroy, it no longer renders it.
func (c *Controller) overlayFromGit(ctx context.Context, d *dest, p *crds.Proposal) error {
	dir := cleanFolder(path.Dir(p.Spec.Path))
	files, err := c.overlayFiles(ctx, d, p.Spec.SourceCommit, dir)
	if err != nil {
		return err
	}
	sels := c.cfg.Selections(d.key)
	objs, err := renderOverlay(sels, files, dir)
	if err != nil {
		return refusedf(ReasonNotFromGit, "the kustomization in %s does not render at commit %s: %v; only Git edits are applied",
			showFolder(dir), short(p.Spec.SourceCommit), err)
	}
	destroy := p.Spec.Change == crds.ChangeDestroy
	found := false
	for k, obj := range objs {
		if !holdsTarget(sels, versionDoc{Indexed: placement.Indexed{Key: k}}, p.Spec.Target) {
			continue
		}
		if text, err := placement.Render(obj); destroy || err == nil && string(text) == p.Spec.Desired {
			found = true
			break
		}
	}
	if found == destroy {
		return &Refused{Reason: ReasonNotFromGit, Message: fmt.Sprintf("its content is not what the kustomization in %s renders for %s at commit %s; only Git edits are applied",
			showFolder(dir), targetName(p.Spec.Target), short(p.Spec.SourceCommit))}
	}
	return nil
}

// renderedRefusal says which rendered object a refusal is about; other errors pass.
func renderedRefusal(k placement.Key, err error) error {
	var refused *Refused
	if !errors.As(err, &refused) {
		return err
	}
	return refusedf(refused.Reason, "rendered %s: %s", k, refused.Message)
}

// appliedKey is the object a rendered key stands for, in the namespace it is applied in: a
// namespaced object the render gives no namespace takes the rules' one (documentNamespace).
func appliedKey(sels []Selection, k placement.Key) placement.Key {
	k.Namespace = documentNamespace(sels, placement.Indexed{Key: k})
	return k
}

// sortedKeys is the keys of a render, in the order messages name them.
func sortedKeys(objs map[placement.Key]map[string]any) []placement.Key {
	return slices.SortedFunc(maps.Keys(objs), func(a, b placement.Key) int { return strings.Compare(a.String(), b.String()) })
}
