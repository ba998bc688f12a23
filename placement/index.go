package placement

import (
	"errors"
	"fmt"
	"path"
	"sort"
	"strings"

	"go.yaml.in/yaml/v3"
)

// MaxIndexedBytes is the largest file Put reads. The largest single objects a cluster keeps
// (a ConfigMap's or a Secret's data) are capped at 1 MiB by the apiserver, so a hand-kept
// manifest file is well below it; what is above it is a vendored bundle (an operator's or
// Argo CD's install.yaml), which the daemon does not edit anyway. Decoding YAML costs tens of
// times the text in memory, and Put runs on the Git worker's one goroutine, so the cap keeps a
// single push from stalling the worker or growing it by hundreds of megabytes. A worker that
// knows a blob's size may skip reading it and Put the first MaxIndexedBytes+1 bytes: only the
// length of an oversized file is looked at.
const MaxIndexedBytes = 1 << 20

// ErrNotFound is returned by Lookup when no document holds the object.
var ErrNotFound = errors.New("no document of the folder holds the object")

// ErrTooLarge is a Problem's error for a file over MaxIndexedBytes.
var ErrTooLarge = fmt.Errorf("too large: over %d bytes, not indexed", MaxIndexedBytes)

// Location is where a document lives: the file (its repository-relative path) and the
// document's number in it, counted from 0 as spans counts them.
type Location struct {
	Path string
	Doc  int
}

// String names the location for people: the path and the document counted from 1.
func (l Location) String() string {
	if l.Doc < 0 {
		return l.Path
	}
	return fmt.Sprintf("%s (document %d)", l.Path, l.Doc+1)
}

// Indexed is one object document of a file, as At lists them.
type Indexed struct {
	Doc int
	// Key's Namespace is the document's metadata.namespace or, when it declares none, the
	// inherited one (Inherited is then set): a caller that knows the kind is cluster-scoped
	// clears it.
	Key       Key
	Inherited bool
	// Anchors is set when the document uses anchors, aliases or merge keys: its identity was
	// read through them, but an edit could not keep what they share, so the writer refuses it.
	Anchors bool
	// Patch is set when a kustomization names the file as a patch (patches, patchesStrategicMerge,
	// patchesJson6902): the document changes an object declared elsewhere and is not the
	// object's own document, so Lookup and All leave it out.
	Patch bool
}

// Problem is a file, or one document of it (Doc -1 for the whole file), that could not be
// indexed although it looks like it meant to hold Kubernetes objects, or that holds an object
// another document holds too (Err is then a *DuplicateError).
type Problem struct {
	Location
	Err error
}

// String is how the problem is shown: where, then what.
func (p Problem) String() string { return p.Location.String() + ": " + p.Err.Error() }

// DuplicateError says that more than one document holds the same object, so that the object's
// place cannot be told.
type DuplicateError struct {
	Key       Key
	Locations []Location // sorted by path and document
}

// Error names the key and every document that declares it.
func (e *DuplicateError) Error() string {
	locs := make([]string, len(e.Locations))
	for i, l := range e.Locations {
		locs[i] = l.String()
	}
	return fmt.Sprintf("%s is declared by %d documents: %s", e.Key, len(e.Locations), strings.Join(locs, ", "))
}

// Index maps the objects of an adopted folder to the documents that declare them. It is fed
// file by file (Put, Drop) with the files that change at each fetch or commit, so keeping it
// costs what changed, never a read of the folder; it keeps no file's bytes, only, per document,
// its key, its place and what namespace resolution needs, and per kustomization its namespace
// and patch files.
//
// An Index belongs to one goroutine (the Git worker's) and has no lock: calls must not overlap.
//
// What is an object: a document that decodes as a mapping with a string apiVersion, kind and
// metadata.name (non-empty). Kustomize's own files (apiVersion kustomize.config.k8s.io/*:
// Kustomization, Component), Helm values and Chart.yaml, documents of only comments, and
// every file under the templates/ folder of a Helm chart (a folder with a Chart.yaml) are not,
// and are left alone without a Problem; so are SOPS fields: a SOPS-encrypted Secret is indexed
// by the apiVersion, kind and metadata SOPS leaves in clear.
//
// Namespaces are resolved when asked, so that a kustomization Put again with another
// namespace moves the documents below it at once: a document's namespace is its own
// metadata.namespace (declared) or, when it has none, the namespace: of the nearest
// kustomization at its folder or above, within the indexed folder (inherited). Lookup reads
// them as follows.
//   - A key with no namespace (a cluster-scoped object) matches only documents that declare
//     none; inheritance is ignored, since kustomize's namespace: does not touch a ClusterRole.
//   - A key with namespace X matches documents that declare X, and documents that declare none
//     and inherit X; when none does, and the only documents of that group, kind and name declare
//     and inherit no namespace (Argo CD's guestbook style, where the Application says the
//     namespace), those.
//   - More than one match is a *DuplicateError naming every document; Problems lists the
//     documents that resolve to one key. No match is ErrNotFound.
//
// Inheritance follows folders, not kustomize's resources: a base that an overlay with a
// namespace: includes from a sibling folder (../base) does not inherit the overlay's
// namespace. The documents of a file that a kustomization names as a patch (patches,
// patchesStrategicMerge, patchesJson6902: Flux's podinfo-values.yaml) change an object
// declared elsewhere: At lists them, marked, and Lookup, All and Problems leave them out.
type Index struct {
	folder  string
	files   map[string]*indexedFile
	byName  map[nameKey][]*indexedDoc
	kusts   map[string][]*kustomizationInfo // by folder; kustomize reads the first by file name
	charts  map[string]bool                 // folders holding a Chart.yaml
	patches map[string]int                  // files named as patches, by how many kustomizations
}

// nameKey is a Key without its namespace: documents are found by it, then their namespace is
// resolved.
type nameKey struct{ group, kind, name string }

// document is what the index keeps of one object document.
type indexedDoc struct {
	key     Key // Namespace: the declared one only
	loc     Location
	dir     string
	anchors bool
}

// indexedFile is what the index keeps of one file: its object documents, its problems, and
// what it tells about the folder (a kustomization, a Helm chart).
type indexedFile struct {
	count    int // the file's documents, objects or not, as spans cuts it
	docs     []*indexedDoc
	problems []Problem
	kust     *kustomizationInfo
	chart    bool
}

// NewIndex returns an empty index of folder, a repository-relative path with no trailing slash;
// "" is the repository's root.
func NewIndex(folder string) *Index {
	folder = strings.Trim(path.Clean("/"+folder), "/")
	return &Index{
		folder:  folder,
		files:   map[string]*indexedFile{},
		byName:  map[nameKey][]*indexedDoc{},
		kusts:   map[string][]*kustomizationInfo{},
		charts:  map[string]bool{},
		patches: map[string]int{},
	}
}

// Wants reports whether the file at p is under the folder and could hold documents: a .yaml or
// .yml file (in any case) or a kustomization named Kustomization. The worker asks before it
// reads a changed file's blob.
func (x *Index) Wants(p string) bool {
	if !x.within(p) {
		return false
	}
	return ManifestFile(p) || isKustomizationFile(p)
}

// ManifestFile reports whether the file at p may hold objects: a .yaml or .yml file (in any
// case), but not a kustomization.
func ManifestFile(p string) bool {
	ext := strings.ToLower(path.Ext(p))
	return (ext == ".yaml" || ext == ".yml") && !isKustomizationFile(p)
}

// Put indexes the file at p anew, with data its content; a file Wants refuses is ignored.
// Put takes regular files only: the worker never gives it a symbolic link or a submodule.
func (x *Index) Put(p string, data []byte) {
	if !x.Wants(p) {
		return
	}
	x.Drop(p)
	f := readFile(p, data)
	if f.empty() {
		return
	}
	x.files[p] = f
	for _, d := range f.docs {
		nk := d.nameKey()
		x.byName[nk] = append(x.byName[nk], d)
	}
	x.addFolderFacts(p, f)
}

// Edited indexes the file at p anew after an edit of its document doc alone, in place (Edit's
// result, data): only that document is read again, where Put reads every document of the file.
// When what the index keeps of the file may have changed otherwise (another count of documents,
// a kustomization, problems, whose lines an edit moves, a document that no longer reads as the
// same object), it is Put.
func (x *Index) Edited(p string, data []byte, doc int) {
	f, ok := x.files[p]
	if !ok || f.kust != nil || f.chart || len(f.problems) > 0 || len(data) > MaxIndexedBytes {
		x.Put(p, data)
		return
	}
	all := spans(data)
	var d *indexedDoc
	for _, o := range f.docs {
		if o.loc.Doc == doc {
			d = o
		}
	}
	if d == nil || len(all) != f.count {
		x.Put(p, data)
		return
	}
	var n yaml.Node
	if err := yaml.Unmarshal(data[all[doc].start:all[doc].end], &n); err != nil {
		x.Put(p, data)
		return
	}
	if now, _ := readDocument(&n); now == nil || now.key != d.key {
		x.Put(p, data)
		return
	}
	d.anchors = usesAnchors(&n)
}

// Drop forgets the file at p, which is gone.
func (x *Index) Drop(p string) {
	f, ok := x.files[p]
	if !ok {
		return
	}
	delete(x.files, p)
	for _, d := range f.docs {
		x.unlink(d)
	}
	x.dropFolderFacts(p, f)
}

// unlink removes d from the documents of its name.
func (x *Index) unlink(d *indexedDoc) {
	nk := d.nameKey()
	docs := x.byName[nk]
	for i, o := range docs {
		if o == d {
			docs = append(docs[:i], docs[i+1:]...)
			break
		}
	}
	if len(docs) == 0 {
		delete(x.byName, nk)
		return
	}
	x.byName[nk] = docs
}

// At lists the object documents of the file at p in their order, patches included (marked),
// or nothing when the file holds none or is a Helm chart's template.
func (x *Index) At(p string) []Indexed {
	f, ok := x.files[p]
	if !ok || x.isTemplate(p) {
		return nil
	}
	var out []Indexed
	for _, d := range f.docs {
		k, inherited := x.resolved(d)
		out = append(out, Indexed{Doc: d.loc.Doc, Key: k, Inherited: inherited, Anchors: d.anchors, Patch: x.isPatch(p)})
	}
	return out
}

// All calls fn with every object the folder declares and its document, by path and document,
// leaving out patches and Helm templates. The key's namespace is resolved as in At; a key
// that two documents share is given twice.
func (x *Index) All(fn func(Key, Location)) {
	paths := make([]string, 0, len(x.files))
	for p := range x.files {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, p := range paths {
		if x.isPatch(p) || x.isTemplate(p) {
			continue
		}
		for _, d := range x.files[p].docs {
			k, _ := x.resolved(d)
			fn(k, d.loc)
		}
	}
}

// within reports whether p is a clean relative path under the folder.
func (x *Index) within(p string) bool {
	if p == "" || p == "." || path.IsAbs(p) || path.Clean(p) != p || p == ".." || strings.HasPrefix(p, "../") {
		return false
	}
	return x.folder == "" || strings.HasPrefix(p, x.folder+"/")
}

// empty reports whether the file tells the index nothing, so that it need not be kept.
func (f *indexedFile) empty() bool {
	return len(f.docs) == 0 && len(f.problems) == 0 && f.kust == nil && !f.chart
}

// nameKey is what d is found by.
func (d *indexedDoc) nameKey() nameKey { return nameKey{d.key.Group, d.key.Kind, d.key.Name} }

// dirOf is the folder of the file at p, "" for the repository's root.
func dirOf(p string) string {
	if i := strings.LastIndexByte(p, '/'); i >= 0 {
		return p[:i]
	}
	return ""
}
