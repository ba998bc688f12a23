package writeback

import (
	"context"
	"errors"
	"reflect"
	"slices"

	"github.com/configbutler/gitops-reverser/gitedits"
	"github.com/configbutler/gitops-reverser/placement"
	"github.com/configbutler/gitops-reverser/sanitize"
)

// ReasonOverlayDoesNotRender refuses a push after which the kustomization a destination renders
// (its overlay) does not render: what the person meant for its objects cannot be told.
const ReasonOverlayDoesNotRender = "OverlayDoesNotRender"

// An adopted destination may render a kustomize overlay (spec.existing.kustomization, or a
// kustomization at the top of baseFolder) over bases elsewhere in the repository. A person then
// changes an object by editing what the overlay reads (an images: entry, replicas:, a patch, a
// file of the overlay) rather than the object's document, so write-back reads such an edit as
// the change of the render: the overlay is rendered as the revision before the person's commits
// held it and as their newest commit holds it, and every object whose render changed is a
// candidate exactly as a changed document would be (the same checks of the rules' namespaces and
// selections, per object), with the rendered object as the proposed object and the rendered
// diff; an object gone from the render is a destroy. Only a push that edits one of the files the
// overlay reads renders it.
//
// The proposals of an overlay name its kustomization file as their path (which they hold while
// they wait), whichever of its files the person edited: an object's render depends on all of
// them, and a newer edit of any supersedes the waiting proposal of the same object.

// overlayOutcome is what a run's edits propose through the destination's overlay, and what they
// leave to be read document by document.
type overlayOutcome struct {
	documentOutcomes
	path string // the overlay's kustomization file: where its refusals are reported
	// reads are the edited files the overlay reads, at the base revision or after: the render
	// decides what they change, and they are not read document by document.
	reads map[string]bool
	// decided are the objects the overlay renders, before or after (placement.Key.String, in the
	// namespace they are applied in): the render decides them, not a document elsewhere.
	decided map[string]bool
}

// evaluateOverlay reads the edits of a run through the destination's overlay: nothing when the
// destination renders none, or when no edited file is one the overlay reads (at base or after the
// edits). Otherwise the overlay is rendered at base and at the newest commit of those edits, and
// each object whose render changed becomes a candidate (renderedChanges). An error says Git or
// the cluster could not be read.
func (c *Controller) evaluateOverlay(ctx context.Context, d *dest, cl *cluster, sels []Selection, base string, edits []gitedits.Edit) (*overlayOutcome, error) {
	out := &overlayOutcome{reads: map[string]bool{}, decided: map[string]bool{}}
	if !d.obj.Adopted() || len(edits) == 0 {
		return out, nil
	}
	dir := d.obj.OverlayFolder()
	newest := newestEdit(edits)
	after, err := c.overlayFiles(ctx, d, newest.Commit, dir)
	if err != nil {
		return nil, err
	}
	before, err := c.overlayBefore(ctx, d, base, dir)
	if err != nil {
		return nil, err
	}
	var touched []gitedits.Edit
	for _, e := range edits {
		if _, ok := after[e.Path]; ok {
			touched = append(touched, e)
		} else if _, ok := before[e.Path]; ok {
			touched = append(touched, e)
		}
	}
	if len(touched) == 0 {
		return out, nil // no overlay, or none of its files edited: nothing to render
	}
	for _, e := range touched {
		out.reads[e.Path] = true
	}
	// The proposals come from the newest commit that edited the overlay, and are its author's.
	src := newestEdit(touched)
	if src.Commit != newest.Commit {
		if after, err = c.overlayFiles(ctx, d, src.Commit, dir); err != nil {
			return nil, err
		}
	}
	out.path = placement.KustomizationIn(after, dir)
	if out.path == "" {
		out.path = placement.KustomizationIn(before, dir)
	}
	e := gitedits.Edit{Path: out.path, Commit: src.Commit, Author: src.Author, When: src.When}
	if err := c.renderedChanges(ctx, d, cl, sels, e, dir, before, after, out); err != nil {
		return nil, err
	}
	return out, nil
}

// renderedChanges renders the overlay in dir from the files before and after, and adds to out a
// candidate for each object whose render changed (renderedObject) or went away
// (unrenderedObject). An overlay that does not render after the edit is refused and proposes
// nothing; one that did not render before is taken as having rendered nothing.
func (c *Controller) renderedChanges(ctx context.Context, d *dest, cl *cluster, sels []Selection, e gitedits.Edit, dir string, before, after map[string][]byte, out *overlayOutcome) error {
	now, err := renderOverlay(sels, after, dir)
	if err != nil {
		out.refused = append(out.refused, refusedf(ReasonOverlayDoesNotRender, "the kustomization in %s, as commit %s leaves it, does not render: %v",
			showFolder(dir), short(e.Commit), err))
		return nil
	}
	was, err := renderOverlay(sels, before, dir)
	if err != nil {
		c.cfg.Log.Debug("the overlay did not render before the edit; every object it renders now is proposed",
			"destination", d.key, "overlay", showFolder(dir), "err", err)
		was = nil
	}
	for _, k := range sortedKeys(now) {
		out.decided[appliedKey(sels, k).String()] = true
		prev, had := was[k]
		if had && reflect.DeepEqual(sanitize.Object(prev), sanitize.Object(now[k])) {
			continue
		}
		if err := out.add(c.renderedObject(ctx, d, cl, sels, e, k, now[k], prev)); err != nil {
			return err
		}
	}
	for _, k := range sortedKeys(was) {
		out.decided[appliedKey(sels, k).String()] = true
		if _, ok := now[k]; ok {
			continue
		}
		if err := out.add(c.unrenderedObject(ctx, d, cl, sels, e, k)); err != nil {
			return err
		}
	}
	return nil
}

// overlayBefore is overlayFiles at base, the revision before the person's commits: nil when
// there is none to compare with (a first run on an empty branch, a history force-pushed away),
// so that every object the overlay renders is new.
func (c *Controller) overlayBefore(ctx context.Context, d *dest, base, dir string) (map[string][]byte, error) {
	if base == "" {
		return nil, nil
	}
	files, err := c.overlayFiles(ctx, d, base, dir)
	if errors.Is(err, gitedits.ErrUnknownRevision) {
		return nil, nil
	}
	return files, err
}

// newestEdit is the edit of the newest commit among edits (by author time, as gitedits reports
// it): the revision after the person's commits.
func newestEdit(edits []gitedits.Edit) gitedits.Edit {
	return slices.MaxFunc(edits, func(a, b gitedits.Edit) int { return a.When.Compare(b.When) })
}

// showFolder names a repository folder in messages: "/" for its top.
func showFolder(dir string) string {
	if dir == "" {
		return "/"
	}
	return dir
}
