package writeback

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/configbutler/gitops-reverser/crds"
	"github.com/configbutler/gitops-reverser/gitedits"
	"github.com/configbutler/gitops-reverser/placement"
	"github.com/configbutler/gitops-reverser/sanitize"
)

// ReasonDuplicateObject refuses the documents of a file of an adopted folder that declare the
// same object: which one a person meant cannot be told.
const ReasonDuplicateObject = "DuplicateObject"

// evaluateEdit is what one edited file proposes: in a canonical folder the one object its path
// names, in an adopted one a candidate per document that changed (evaluateAdopted). refused
// lists what write-back will not act on; an error says the cluster or Git could not be read.
func (c *Controller) evaluateEdit(ctx context.Context, d *dest, cl *cluster, sels []Selection, e gitedits.Edit, base string) ([]*candidate, []*Refused, error) {
	if d.obj.Adopted() {
		return c.evaluateAdopted(ctx, d, cl, sels, e, base)
	}
	cand, err := c.evaluate(ctx, d, cl, sels, e)
	var refused *Refused
	switch {
	case errors.As(err, &refused):
		return nil, []*Refused{refused}, nil
	case err != nil, cand == nil:
		return nil, nil, err
	}
	return []*candidate{cand}, nil, nil
}

// evaluateAdopted compares an edited file of an adopted folder with the same file as base, the
// revision before the person's commits, held it, document by document: a document that holds an
// object it did not hold, or holds it otherwise, is a create or update of that object; an object
// whose document went away (or the file) is a destroy; an unchanged document is nothing. A file
// with a document that does not read proposes no destroy: that document may be the one that
// seems gone.
func (c *Controller) evaluateAdopted(ctx context.Context, d *dest, cl *cluster, sels []Selection, e gitedits.Edit, base string) ([]*candidate, []*Refused, error) {
	switch {
	case e.Link:
		return nil, []*Refused{{Reason: ReasonNotAFile, Message: "a symbolic link or a submodule, not a file: only files are read"}}, nil
	case !e.Deleted && (e.Size > MaxDocumentBytes || e.Content == nil):
		return nil, []*Refused{{Reason: ReasonTooLarge, Message: fmt.Sprintf("%d bytes, over the %d-byte limit", e.Size, MaxDocumentBytes)}}, nil
	}
	var after *version
	var err error
	if !e.Deleted {
		if after, err = c.readVersion(ctx, d, e.Commit, e.Path, e.Content); err != nil {
			return nil, nil, err
		}
	}
	before, err := c.readBefore(ctx, d, base, e.Path)
	if err != nil {
		return nil, nil, err
	}
	var out documentOutcomes
	if err := c.evaluateChanged(ctx, d, cl, sels, e, before, after, &out); err != nil {
		return nil, nil, err
	}
	if after != nil && len(after.problems) > 0 {
		return out.cands, out.refused, nil
	}
	for _, prev := range before.documents() {
		if after.find(sels, objectKey(sels, prev.Indexed)) != nil {
			continue
		}
		if err := out.add(c.evaluateRemoved(ctx, d, cl, sels, e, prev)); err != nil {
			return nil, nil, err
		}
	}
	return out.cands, out.refused, nil
}

// documentOutcomes gathers what the documents of a file propose and what is refused.
type documentOutcomes struct {
	cands   []*candidate
	refused []*Refused
}

// add keeps cand, or the refusal err is; another error is returned.
func (o *documentOutcomes) add(cand *candidate, err error) error {
	var refused *Refused
	switch {
	case errors.As(err, &refused):
		o.refused = append(o.refused, refused)
	case err != nil:
		return err
	case cand != nil:
		o.cands = append(o.cands, cand)
	}
	return nil
}

// evaluateChanged adds to out what each document of after that changed since before proposes,
// and refuses the documents of after that do not read or that declare one object twice.
func (c *Controller) evaluateChanged(ctx context.Context, d *dest, cl *cluster, sels []Selection, e gitedits.Edit, before, after *version, out *documentOutcomes) error {
	if after == nil {
		return nil
	}
	twice := map[placement.Key]bool{}
	for _, pr := range after.problems {
		var dup *placement.DuplicateError
		reason := ReasonUnparseable
		if errors.As(pr.Err, &dup) {
			twice[dup.Key], reason = true, ReasonDuplicateObject
		}
		out.refused = append(out.refused, refusedf(reason, "%s", pr))
	}
	for _, doc := range after.docs {
		prev := before.find(sels, objectKey(sels, doc.Indexed))
		if twice[doc.Key] || prev != nil && sameContent(prev.text, doc.text) {
			continue
		}
		if err := out.add(c.evaluateDocument(ctx, d, cl, sels, e, doc, prev)); err != nil {
			return err
		}
	}
	return nil
}

// evaluateDocument proposes what a changed document says, as the person wrote it, for the
// object it holds: a create when the cluster has no such object, else an update. Its diff is
// the person's change to the document (the document before, if any, to the document now).
func (c *Controller) evaluateDocument(ctx context.Context, d *dest, cl *cluster, sels []Selection, e gitedits.Edit, doc versionDoc, prev *versionDoc) (*candidate, error) {
	obj, gvr, err := admitDocument(d, sels, e.Path, doc)
	if err != nil {
		return nil, inDocument(doc, err)
	}
	var was []byte
	if prev != nil {
		was = prev.text
	}
	return c.proposeApply(ctx, cl, e, gvr, obj, doc.text, was, documentLabel(e.Path, doc))
}

// proposeApply is the create of u (of resource gvr), admitted, as desired, when the cluster has
// no such object, else its update, whose diff runs from was, what Git said before (nil: nothing),
// to desired; label names desired in the diff.
func (c *Controller) proposeApply(ctx context.Context, cl *cluster, e gitedits.Edit, gvr schema.GroupVersionResource, u *unstructured.Unstructured, desired, was []byte, label string) (*candidate, error) {
	live, err := cl.get(ctx, gvr, u.GetNamespace(), u.GetName())
	if err != nil {
		return nil, err
	}
	key := placement.Key{Group: gvr.Group, Kind: u.GetKind(), Namespace: u.GetNamespace(), Name: u.GetName()}
	cand := &candidate{
		edit: e, desired: desired, object: key.String(),
		target: crds.ProposalTarget{APIVersion: u.GetAPIVersion(), Kind: u.GetKind(), Resource: gvr.Resource,
			Namespace: u.GetNamespace(), Name: u.GetName()},
	}
	if live == nil {
		cand.change = crds.ChangeCreate
		cand.diff = UnifiedDiff(nil, desired, "live (absent)", label)
		return cand, nil
	}
	liveYAML, err := sanitize.YAML(sanitize.Object(live.Object))
	if err != nil {
		return nil, fmt.Errorf("render the live object: %w", err)
	}
	cand.change = crds.ChangeUpdate
	cand.liveRV, cand.liveDigest = live.GetResourceVersion(), digest(liveYAML)
	cand.diff = UnifiedDiff(was, desired, label+" before", label)
	return cand, nil
}

// evaluateRemoved proposes the destroy of the object whose document prev the file no longer has,
// if the cluster has it.
func (c *Controller) evaluateRemoved(ctx context.Context, d *dest, cl *cluster, sels []Selection, e gitedits.Edit, prev versionDoc) (*candidate, error) {
	sel, ns, err := selectDocument(d, sels, prev.Indexed)
	if err != nil {
		return nil, inDocument(prev, err)
	}
	return c.proposeDestroy(ctx, d, cl, e, sel, ns, prev.Key.Name, documentLabel(e.Path, prev), " (removed)")
}

// proposeDestroy is the destroy of the object name of sel in ns, gone from Git (label says
// where, gone how), if the cluster has it and the rules select its live labels.
func (c *Controller) proposeDestroy(ctx context.Context, d *dest, cl *cluster, e gitedits.Edit, sel *Selection, ns, name, label, gone string) (*candidate, error) {
	live, err := cl.get(ctx, sel.GVR, ns, name)
	if err != nil || live == nil {
		return nil, err
	}
	if !sel.selectsLabels(live) {
		return nil, labelsNotSelected(d, label, "the live object's")
	}
	liveYAML, err := sanitize.YAML(sanitize.Object(live.Object))
	if err != nil {
		return nil, fmt.Errorf("render the live object: %w", err)
	}
	key := placement.Key{Group: sel.GVR.Group, Kind: sel.Kind, Namespace: ns, Name: name}
	return &candidate{
		edit: e, change: crds.ChangeDestroy, object: key.String(),
		target: crds.ProposalTarget{APIVersion: sel.GVR.GroupVersion().String(), Kind: sel.Kind, Resource: sel.GVR.Resource,
			Namespace: ns, Name: name},
		liveRV: live.GetResourceVersion(), liveDigest: digest(liveYAML),
		diff: UnifiedDiff(liveYAML, nil, "live", label+gone),
	}, nil
}

// admitDocument reads a changed document as the object write-back may act on, in the namespace
// it is applied to, and its resource: a *Refused error for a document that does not parse (at
// its line in the file), a Secret, or an object the destination's rules do not select, in that
// namespace or by their label selectors.
func admitDocument(d *dest, sels []Selection, path string, doc versionDoc) (*unstructured.Unstructured, schema.GroupVersionResource, error) {
	var none schema.GroupVersionResource
	// Blank lines in place of the lines above the document: a refusal names the file's line.
	parsed, err := ParseDocument(append(bytes.Repeat([]byte("\n"), max(doc.line-1, 0)), doc.text...))
	if err != nil {
		return nil, none, err
	}
	sel, ns, err := selectDocument(d, sels, doc.Indexed)
	if err != nil {
		return nil, none, err
	}
	obj := parsed.Object
	obj.SetNamespace(ns) // where it is applied: the namespace its label selectors are read in
	if !sel.selectsLabels(obj) {
		return nil, none, labelsNotSelected(d, documentLabel(path, doc), "the document's")
	}
	return obj, sel.GVR, nil
}

// selectDocument is the selection of the destination's rules that covers the object a document
// holds, and the object's namespace: a Secret, a kind they do not select, a namespace outside
// the rule's, or a namespaced object that gets no namespace, are refused.
func selectDocument(d *dest, sels []Selection, ix placement.Indexed) (*Selection, string, error) {
	k := ix.Key
	if k.Group == "" && k.Kind == "Secret" {
		return nil, "", &Refused{Reason: ReasonSecret, Message: "Secrets are never proposed nor applied from Git"}
	}
	ns := documentNamespace(sels, ix)
	if namespaced, _ := scopeOf(sels, k.Group, k.Kind); namespaced && ns == "" {
		return nil, "", refusedf(ReasonNotSelected, "it names no namespace, inherits none from a kustomization.yaml, and the rules of "+
			"GitDestination %s select %s in more than one namespace: say which", d.key, k.Kind)
	}
	sel := selectKind(sels, k.Group, k.Kind, ns)
	if sel == nil {
		return nil, "", notSelected(d, k.Group, k.Kind, ns)
	}
	return sel, ns, nil
}

// documentLabel names a document of the file at path for messages and diffs.
func documentLabel(path string, doc versionDoc) string {
	return fmt.Sprintf("%s (document %d)", path, doc.Doc+1)
}

// inDocument says which document of its file a refusal is about; other errors pass.
func inDocument(doc versionDoc, err error) error {
	var refused *Refused
	if !errors.As(err, &refused) {
		return err
	}
	return refusedf(refused.Reason, "document %d at line %d (%s): %s", doc.Doc+1, doc.line, doc.Key, refused.Message)
}

// documents lists v's object documents; none for a nil version.
func (v *version) documents() []versionDoc {
	if v == nil {
		return nil
	}
	return v.docs
}
