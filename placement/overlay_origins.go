package placement

import (
	"path"
	"strings"
)

// A rendered object's origin is traced by reading the kustomizations the render read, not by
// asking kustomize: its origin annotations come only with its transformer annotations, which
// every transformer appends to every object, so that a production overlay's 100 images: entries
// over 200 objects made a render take twenty times as long.
//
// The trace walks the graph of resources and components from the overlay, as kustomize does,
// and reads the documents of each resource file and the generators of each kustomization. An
// object comes from the document of its group and kind whose name is its own, else the longest
// that a prefix and a suffix around it make its name (namePrefix, nameSuffix); from a generator
// of its kind whose name is within its own (kustomize appends a hash) when no document is; and
// from nowhere known when two places would do, which Land treats as a base it does not own.

// sourceDocument is a document of a resource file of the render: its file, group, kind and name.
type sourceDocument struct {
	path              string
	group, kind, name string
}

// generatorSource is a generator of the render: its kind, name and the kustomization declaring it.
type generatorSource struct {
	kind, name, kustomization string
}

// traceOrigins is the origin of each of objects, rendered from dir.
func (f *buildFolder) traceOrigins(dir string, objects map[Key]map[string]any) map[Key]Origin {
	docs, gens := f.sources(dir)
	out := make(map[Key]Origin, len(objects))
	for k := range objects {
		if o, ok := originIn(k, docs, gens); ok {
			out[k] = o
		}
	}
	return out
}

// sources reads the resource documents and generators of the kustomization in dir and of those
// its resources and components reach.
func (f *buildFolder) sources(dir string) ([]sourceDocument, []generatorSource) {
	var docs []sourceDocument
	var gens []generatorSource
	seen := map[string]bool{}
	var walk func(dir string)
	walk = func(dir string) {
		if seen[dir] {
			return
		}
		seen[dir] = true
		kpath, k, err := f.kustomization(dir)
		if err != nil {
			return
		}
		for _, g := range k.ConfigMapGenerator {
			gens = append(gens, generatorSource{"ConfigMap", g.Name, kpath})
		}
		for _, g := range k.SecretGenerator {
			gens = append(gens, generatorSource{"Secret", g.Name, kpath})
		}
		for _, e := range append(append([]string{}, k.Resources...), k.Components...) {
			if remote(e) || path.IsAbs(e) {
				continue
			}
			p := cleanDir(path.Join(dir, e))
			if data, ok := f.files[p]; ok {
				docs = append(docs, documentsOf(p, data)...)
			} else {
				walk(p)
			}
		}
	}
	walk(dir)
	return docs, gens
}

// documentsOf lists the objects the documents of the file at p declare.
func documentsOf(p string, data []byte) []sourceDocument {
	var out []sourceDocument
	for _, obj := range fileObjects(data) {
		if key, err := keyOfObject(obj); obj != nil && err == nil {
			out = append(out, sourceDocument{p, key.Group, key.Kind, key.Name})
		}
	}
	return out
}

// originIn is where k comes from among docs and gens; false when nowhere, or two places would do.
func originIn(k Key, docs []sourceDocument, gens []generatorSource) (Origin, bool) {
	var best *sourceDocument
	ambiguous := false
	for i := range docs {
		d := &docs[i]
		if d.group != k.Group || d.kind != k.Kind || !strings.Contains(k.Name, d.name) {
			continue
		}
		switch {
		case best == nil || len(d.name) > len(best.name):
			best, ambiguous = d, false
		case len(d.name) == len(best.name) && d.path != best.path:
			ambiguous = true
		}
	}
	if best != nil {
		return Origin{Path: best.path}, !ambiguous
	}
	var gen *generatorSource
	for i := range gens {
		g := &gens[i]
		if k.Group == "" && g.kind == k.Kind && strings.Contains(k.Name, g.name) && (gen == nil || len(g.name) > len(gen.name)) {
			gen = g
		}
	}
	if gen != nil {
		return Origin{Generator: gen.kind + "Generator", ConfiguredIn: gen.kustomization}, true
	}
	return Origin{}, false
}
