package placement

import (
	"cmp"
	"fmt"
	"slices"
)

// Lookup returns the document that declares the object k, by the rules of Index's doc comment:
// ErrNotFound (wrapped) when none does, a *DuplicateError when more than one does.
func (x *Index) Lookup(k Key) (Location, error) {
	hits := x.matches(k)
	if len(hits) == 0 && k.Namespace != "" {
		hits = x.unplaced(k)
	}
	switch len(hits) {
	case 0:
		return Location{}, fmt.Errorf("%s: %w", k, ErrNotFound)
	case 1:
		return hits[0].loc, nil
	}
	return Location{}, duplicate(k, hits)
}

// matches returns the object documents of k: for a key with no namespace those that declare
// none, for one with a namespace those that declare or inherit it.
func (x *Index) matches(k Key) []*indexedDoc {
	var hits []*indexedDoc
	for _, d := range x.byName[nameKey{k.Group, k.Kind, k.Name}] {
		if x.isPatch(d.loc.Path) || x.isTemplate(d.loc.Path) {
			continue
		}
		if k.Namespace == "" && d.key.Namespace == "" || k.Namespace != "" && x.namespaceOf(d) == k.Namespace {
			hits = append(hits, d)
		}
	}
	return hits
}

// unplaced returns the documents of k's group, kind and name when every one of them declares
// and inherits no namespace, so that the namespace is the deployer's to give (an Argo CD
// Application's destination); none when any of them has a namespace of its own.
func (x *Index) unplaced(k Key) []*indexedDoc {
	var out []*indexedDoc
	for _, d := range x.byName[nameKey{k.Group, k.Kind, k.Name}] {
		if x.isPatch(d.loc.Path) || x.isTemplate(d.loc.Path) {
			continue
		}
		if x.namespaceOf(d) != "" {
			return nil
		}
		out = append(out, d)
	}
	return out
}

// namespaceOf is d's namespace: declared, else inherited, else "".
func (x *Index) namespaceOf(d *indexedDoc) string {
	if d.key.Namespace != "" {
		return d.key.Namespace
	}
	return x.inherited(d.dir)
}

// resolved is d's key with its namespace resolved, and whether the namespace is inherited.
func (x *Index) resolved(d *indexedDoc) (Key, bool) {
	k := d.key
	if k.Namespace != "" {
		return k, false
	}
	k.Namespace = x.inherited(d.dir)
	return k, k.Namespace != ""
}

// Problems lists, sorted by path and document, the files and documents that could not be
// indexed although they look like they meant to hold objects (a document that does not parse,
// a file over MaxIndexedBytes), and each key that more than one document resolves to, at its
// first document. It goes over every document to find the duplicates: ask it when reporting,
// not at each change.
func (x *Index) Problems() []Problem {
	var out []Problem
	byKey := map[Key][]*indexedDoc{}
	for p, f := range x.files {
		if x.isTemplate(p) {
			continue
		}
		out = append(out, f.problems...)
		if x.isPatch(p) {
			continue
		}
		for _, d := range f.docs {
			k, _ := x.resolved(d)
			byKey[k] = append(byKey[k], d)
		}
	}
	for k, docs := range byKey {
		if len(docs) > 1 {
			e := duplicate(k, docs)
			out = append(out, Problem{e.Locations[0], e})
		}
	}
	slices.SortFunc(out, func(a, b Problem) int {
		return cmp.Or(cmp.Compare(a.Path, b.Path), cmp.Compare(a.Doc, b.Doc), cmp.Compare(a.Err.Error(), b.Err.Error()))
	})
	return out
}

// duplicate is the error for the documents docs that all declare k.
func duplicate(k Key, docs []*indexedDoc) *DuplicateError {
	e := &DuplicateError{Key: k}
	for _, d := range docs {
		e.Locations = append(e.Locations, d.loc)
	}
	slices.SortFunc(e.Locations, func(a, b Location) int {
		return cmp.Or(cmp.Compare(a.Path, b.Path), cmp.Compare(a.Doc, b.Doc))
	})
	return e
}
