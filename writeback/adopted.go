package writeback

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/configbutler/gitops-reverser/crds"
	"github.com/configbutler/gitops-reverser/gitedits"
	"github.com/configbutler/gitops-reverser/placement"
	"github.com/configbutler/gitops-reverser/sanitize"
)

// In an adopted folder (spec.layout Existing, DESIGN.md §11) the files are the team's: an
// object's document lives in any file, several documents to a file, and a document that names
// no namespace takes the one of the nearest kustomization.yaml above it. The path says nothing
// of the object there, so write-back reads an edited file as the mirror's index reads it
// (placement), document by document, with the kustomizations above it as the same commit holds
// them, and compares each document with the same file before the person's commits: a document
// that changed is a proposal for the object it holds, one that went away a destroy, and the
// others nothing. The namespace and selection rules are the canonical folder's, per document.

// version is one version of a file of an adopted folder: its object documents, their
// namespaces resolved through the kustomizations above it at the same commit, and the
// documents that meant to be objects and could not be read.
type version struct {
	docs     []versionDoc
	problems []placement.Problem
}

// versionDoc is one object document of a version, with its text and the line of the file it
// starts on.
type versionDoc struct {
	placement.Indexed
	text []byte
	line int
}

// readVersion reads the file at p as commit holds it (content, when not nil, is its content
// there), with the kustomizations and charts above it at that commit; nil when the commit has
// no file at p.
func (c *Controller) readVersion(ctx context.Context, d *dest, commit, p string, content []byte) (*version, error) {
	paths := placement.ResolvingFiles(d.folder, p)
	if content == nil {
		paths = append(paths, p)
	}
	files, err := gitedits.Branch{Git: c.cfg.Git, URL: d.url, Name: d.branch}.Files(ctx, commit, paths)
	if err != nil {
		return nil, fmt.Errorf("read %s and the kustomizations above it at %s: %w", p, short(commit), err)
	}
	if content != nil {
		files[p] = content
	}
	file, ok := files[p]
	if !ok {
		return nil, nil
	}
	docs, problems := placement.FileDocuments(d.folder, p, files)
	v := &version{problems: problems}
	for _, ix := range docs {
		v.docs = append(v.docs, versionDoc{Indexed: ix, text: placement.Document(file, ix.Doc), line: placement.DocumentLine(file, ix.Doc)})
	}
	return v, nil
}

// readBefore is the file at p as the revision base holds it, before the person's commits: nil
// when it held none, or when there is no such revision to compare with (a first run on an
// empty branch, a history force-pushed away), so that every document of the file is new.
func (c *Controller) readBefore(ctx context.Context, d *dest, base, p string) (*version, error) {
	if base == "" {
		return nil, nil
	}
	v, err := c.readVersion(ctx, d, base, p, nil)
	if errors.Is(err, gitedits.ErrUnknownRevision) {
		return nil, nil
	}
	return v, err
}

// find is the document of v that holds the object key, as sels read keys (objectKey); nil
// when none does.
func (v *version) find(sels []Selection, key placement.Key) *versionDoc {
	if v == nil {
		return nil
	}
	for i := range v.docs {
		if objectKey(sels, v.docs[i].Indexed) == key {
			return &v.docs[i]
		}
	}
	return nil
}

// objectKey is the object a document holds: its key, without the namespace it inherits when
// the destination's rules select its kind as cluster-scoped (kustomize's namespace: does not
// touch a ClusterRole).
func objectKey(sels []Selection, ix placement.Indexed) placement.Key {
	k := ix.Key
	if ix.Inherited {
		if namespaced, known := scopeOf(sels, k.Group, k.Kind); known && !namespaced {
			k.Namespace = ""
		}
	}
	return k
}

// scopeOf says whether the destination's rules select a kind as namespaced; known is false
// when they do not select it.
func scopeOf(sels []Selection, group, kind string) (namespaced, known bool) {
	for _, s := range sels {
		if s.GVR.Group == group && s.Kind == kind {
			return s.Namespaced, true
		}
	}
	return false, false
}

// documentNamespace is the namespace of the object a document holds: the one it declares or
// inherits, none for a cluster-scoped kind unless it declares one (then refused as not
// selected, as in a canonical folder); and for a namespaced kind that gets none, the namespace
// of the destination's rules when they select the kind in exactly one ("" otherwise: refused).
func documentNamespace(sels []Selection, ix placement.Indexed) string {
	k := objectKey(sels, ix)
	if namespaced, _ := scopeOf(sels, k.Group, k.Kind); !namespaced || k.Namespace != "" {
		return k.Namespace
	}
	only := ""
	for _, s := range sels {
		switch {
		case s.GVR.Group != k.Group || s.Kind != k.Kind:
		case s.Namespace == "" || only != "" && only != s.Namespace:
			return "" // every namespace, or more than one: the document does not say which
		default:
			only = s.Namespace
		}
	}
	return only
}

// sameContent says whether two texts of a document hold the same object: a change of comments,
// quoting or order, or of what the server owns (status), is no change.
func sameContent(a, b []byte) bool {
	da, errA := ParseDocument(a)
	db, errB := ParseDocument(b)
	if errA != nil || errB != nil {
		return bytes.Equal(a, b)
	}
	return reflect.DeepEqual(sanitize.Object(da.Object.Object), sanitize.Object(db.Object.Object))
}

// adoptedFromGit checks that an adopted folder's proposal says what Git holds at its source
// commit: for a create or update, a document of its file with exactly the proposal's text holds
// its target; for a destroy, no document of the file holds it any more. An overlay's proposal
// is checked against the overlay's render (overlayFromGit).
func (c *Controller) adoptedFromGit(ctx context.Context, d *dest, p *crds.Proposal) error {
	if placement.IsKustomization(p.Spec.Path) { // no document's proposal names one: the overlay's
		return c.overlayFromGit(ctx, d, p)
	}
	v, err := c.readVersion(ctx, d, p.Spec.SourceCommit, p.Spec.Path, nil)
	if err != nil {
		return err
	}
	sels := c.cfg.Selections(d.key)
	destroy := p.Spec.Change == crds.ChangeDestroy
	found := v != nil && slices.ContainsFunc(v.docs, func(doc versionDoc) bool {
		return holdsTarget(sels, doc, p.Spec.Target) && (destroy || string(doc.text) == p.Spec.Desired)
	})
	if found == destroy {
		return &Refused{Reason: ReasonNotFromGit, Message: fmt.Sprintf("its content is not what a document of %s holds at commit %s; only Git edits are applied",
			p.Spec.Path, short(p.Spec.SourceCommit))}
	}
	return nil
}

// holdsTarget says whether doc holds the object t: the same group, kind and name, and its
// namespace, or none that it declares or inherits (the rules' one namespace was taken).
func holdsTarget(sels []Selection, doc versionDoc, t crds.ProposalTarget) bool {
	gv, err := schema.ParseGroupVersion(t.APIVersion)
	k := objectKey(sels, doc.Indexed)
	return err == nil && k.Group == gv.Group && k.Kind == t.Kind && k.Name == t.Name && (k.Namespace == t.Namespace || k.Namespace == "")
}

// sameObject says whether two proposals' targets are one object (their versions aside).
func sameObject(a, b crds.ProposalTarget) bool {
	ga, _ := schema.ParseGroupVersion(a.APIVersion)
	gb, _ := schema.ParseGroupVersion(b.APIVersion)
	return ga.Group == gb.Group && a.Resource == b.Resource && a.Namespace == b.Namespace && a.Name == b.Name
}
