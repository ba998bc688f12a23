package gitops

import (
	"context"
	"errors"
	"fmt"
	"path"
	"strings"

	"github.com/go-git/go-git/v5/plumbing"

	"github.com/configbutler/gitops-reverser/gitstore"
	"github.com/configbutler/gitops-reverser/placement"
)

// Adoption is a change to one object of an adopted folder (DESIGN.md §11). The worker finds the
// document that holds the object through its index of the folder, as the tree stands when the
// change is committed (a file a person renamed since is found at its new place), and edits that
// document in place: only Ops change, every other byte of the file stays. The Change's Path is
// the object's canonical path: where a new object goes when neither Place nor a kustomization of
// its namespace says where, and what changes of the same object coalesce on.
type Adoption struct {
	Folder string // the adopted folder, repository-relative ("" = the root)
	// Overlay, when set, is the kustomization folder the destination renders (its folder, or
	// the one it names): an object of its render is changed where a person would change it
	// there (DESIGN.md §11, "trace to place"), never in a base other kustomizations share.
	Overlay string
	Key     placement.Key  // the object
	Ops     []placement.Op // what a person changed, for the document that holds it
	New     []byte         // the object's document when no file holds it yet (what people set)
	Place   string         // the destination's template for a new object's file, expanded; "" = none
	Delete  bool           // the object is gone: its document goes, and its file when it was the last
	// Whole, when set, replaces the object's document whole (an encrypted Secret, which holds no
	// plaintext to edit), or is its document when new; Keep, when set, is asked about the
	// current document first: true keeps it (it says the same, encrypted anew).
	Whole []byte
	Keep  func(current []byte) bool
	// Unwritten, when set, says why the change could not be made (the watch could not read the
	// object's document): nothing is written, and the folder's status says so.
	Unwritten string
}

// adoptedFolder is the worker's index of one adopted folder, brought to the tree each run is
// committed on by reading only the files that changed since the tree it describes.
type adoptedFolder struct {
	index *placement.Index
	tree  plumbing.Hash // the root tree the index describes; zero before the first build
	// edited are the files put into the index from a run's edits: the next tree the index is
	// brought to may not hold them (a run dropped or rebuilt), so they are read again from it.
	edited map[string]struct{}
	// blobs are the contents the index holds of its files, by path: a file a run edited is not
	// read again when the tree it is committed in holds what the index took in.
	blobs map[string]plumbing.Hash
	// run is the run the edits were made in: its later changes read the files as it edited them,
	// so the index stays as its edits left it until the next run or tree.
	run   uint64
	state adoptedState
}

// AdoptionError is why an object of an adopted folder was not written: its document could not
// be found unambiguously or edited safely. The rest of the batch goes on.
type AdoptionError struct {
	Key    placement.Key
	Folder string
	Err    error
}

func (e *AdoptionError) Error() string { return e.Key.String() + ": " + e.Err.Error() }
func (e *AdoptionError) Unwrap() error { return e.Err }

// folderIndex returns the index of folder brought to tree, for run (0: none), whose own edits the
// index keeps.
func (w *Worker) folderIndex(folder string, tree plumbing.Hash, run uint64) (*adoptedFolder, error) {
	if w.adopted == nil {
		w.adopted = map[string]*adoptedFolder{}
	}
	f := w.adopted[folder]
	if f == nil {
		f = &adoptedFolder{index: placement.NewIndex(folder), edited: map[string]struct{}{}, blobs: map[string]plumbing.Hash{},
			state: adoptedState{unwritten: map[placement.Key]string{}, absent: map[placement.Key]placement.Location{}}}
		w.adopted[folder] = f
	}
	if f.tree != tree || len(f.edited) > 0 && (run == 0 || f.run != run) {
		if err := w.bring(f, folder, tree); err != nil {
			return nil, err
		}
	}
	f.run = run
	return f, nil
}

// bring updates f's index from the tree it describes to tree: the files that differ, and those
// a run's edits put in. When the old tree cannot be read (its run was dropped), the folder is
// indexed anew.
func (w *Worker) bring(f *adoptedFolder, folder string, tree plumbing.Hash) error {
	from, err := w.subtree(f.tree, folder)
	if err != nil {
		f.index, from = placement.NewIndex(folder), plumbing.ZeroHash
		clear(f.blobs)
	}
	to, err := w.subtree(tree, folder)
	if err != nil {
		return fmt.Errorf("read adopted folder %q: %w", folder, err)
	}
	prefix := ""
	if folder != "" {
		prefix = folder + "/"
	}
	err = w.store.DiffFiles(from, to, prefix, func(p string, _, now *gitstore.TreeEntry) {
		delete(f.edited, p)
		w.reindex(f, p, now)
	})
	if err != nil {
		return fmt.Errorf("index adopted folder %q: %w", folder, err)
	}
	for p := range f.edited {
		w.reindex(f, p, w.fileEntry(tree, p))
	}
	clear(f.edited)
	f.tree = tree
	return nil
}

// reindex puts the file p, as entry now holds it, into the index, or drops it when now is nil,
// not a regular file (a symlink may point out of the folder) or cannot be read.
func (w *Worker) reindex(f *adoptedFolder, p string, now *gitstore.TreeEntry) {
	if !f.index.Wants(p) {
		return
	}
	if !regularFile(now) {
		f.drop(p)
		return
	}
	if h, ok := f.blobs[p]; ok && h == now.Hash {
		return // the index holds this content already: a run's edit, now committed
	}
	data, err := w.store.Blob(now.Hash)
	if err != nil {
		w.log.Warn("read a file of an adopted folder", "path", p, "err", err)
		f.drop(p)
		return
	}
	f.index.Put(p, data)
	f.blobs[p] = now.Hash
}

// regularFile reports whether e is a file of its own: not missing, not a symbolic link (whose
// blob is the path it points to, which may be any text) nor a submodule.
func regularFile(e *gitstore.TreeEntry) bool {
	return e != nil && (e.Mode == "100644" || e.Mode == "100755")
}

// drop forgets the file p.
func (f *adoptedFolder) drop(p string) {
	f.index.Drop(p)
	delete(f.blobs, p)
}

// subtree is the hash of the tree of folder under root; zero when root is zero or holds no
// such folder.
func (w *Worker) subtree(root plumbing.Hash, folder string) (plumbing.Hash, error) {
	if root.IsZero() {
		return root, nil
	}
	if folder == "" {
		_, err := w.store.Dir(root, "") // the root must be readable
		return root, err
	}
	parent, name := path.Split(folder)
	entries, err := w.store.Dir(root, strings.TrimSuffix(parent, "/"))
	if err != nil {
		return plumbing.ZeroHash, err
	}
	if e := gitstore.FindDir(entries, name); e != nil {
		return e.Hash, nil
	}
	return plumbing.ZeroHash, nil
}

// fileEntry is the entry of file p in tree root, nil when there is none.
func (w *Worker) fileEntry(root plumbing.Hash, p string) *gitstore.TreeEntry {
	dir, name := path.Split(p)
	entries, err := w.store.Dir(root, strings.TrimSuffix(dir, "/"))
	if err != nil {
		return nil
	}
	return gitstore.FindFile(entries, name)
}

// fileOf reads file p of tree root: nil when there is none (or it is not a regular file).
func (w *Worker) fileOf(root plumbing.Hash, p string) ([]byte, error) {
	e := w.fileEntry(root, p)
	if !regularFile(e) {
		return nil, nil
	}
	return w.store.Blob(e.Hash)
}

// files is the content of the files a run changed so far, over the tree it started from.
type files struct {
	w    *Worker
	tree plumbing.Hash
	run  uint64 // the run's number, to tell its edits from an earlier run's
	ops  func(p string) (*gitstore.Op, bool)
	each func(fn func(p string, data []byte)) // every file the run changed so far (nil: deleted)
}

func (fs files) read(p string) ([]byte, error) {
	if o, ok := fs.ops(p); ok {
		return o.Data, nil
	}
	return fs.w.fileOf(fs.tree, p)
}

// adopt turns an adopted change into the file changes it makes in fs: its document edited, added
// or removed, and the kustomization that lists a new or removed file; or, for an object its
// overlay renders, the overlay's files a person would change (adoptOverlay), checked by rendering
// the overlay, which checked reports.
func (w *Worker) adopt(fs files, c *Change) (changes []Change, checked bool, err error) {
	a := c.Adopt
	f, err := w.folderIndex(a.Folder, fs.tree, fs.run)
	if err != nil {
		return nil, false, err
	}
	if a.Unwritten != "" {
		return nil, false, &AdoptionError{Key: a.Key, Folder: a.Folder, Err: errors.New(a.Unwritten)}
	}
	if why, refused := w.unrenderable[a.Key]; refused {
		return nil, false, &AdoptionError{Key: a.Key, Folder: a.Folder, Err: errors.New(why)}
	}
	if a.Overlay != "" {
		if changes, rendered, err := w.adoptOverlay(fs, c); rendered {
			return changes, true, err
		}
	}
	changes, err = w.adoptDocument(fs, c, f)
	return changes, false, err
}

// adoptDocument is adopt for an object of the folder's index: its document edited, added or
// removed.
func (w *Worker) adoptDocument(fs files, c *Change, f *adoptedFolder) ([]Change, error) {
	a := c.Adopt
	loc, err := f.index.Lookup(a.Key)
	switch {
	case errors.Is(err, placement.ErrNotFound):
		if a.Delete {
			return nil, nil // nothing holds it: nothing to remove
		}
		return w.placeNew(f, fs, c)
	case err != nil:
		return nil, &AdoptionError{Key: a.Key, Folder: a.Folder, Err: err}
	}
	data, err := fs.read(loc.Path)
	if err != nil {
		return nil, err
	}
	if a.Delete {
		return w.removeDocument(f, fs, c, loc, data)
	}
	if a.Whole != nil {
		if a.Keep != nil && a.Keep(placement.Document(data, loc.Doc)) {
			return nil, nil
		}
		return []Change{w.edited(f, c, loc.Path, placement.ReplaceDocument(data, loc.Doc, a.Whole))}, nil
	}
	if len(a.Ops) == 0 {
		return nil, nil
	}
	edited, err := placement.Edit(data, loc.Doc, a.Ops)
	if err != nil {
		return nil, &AdoptionError{Key: a.Key, Folder: a.Folder, Err: fmt.Errorf("edit %s: %w", loc.Path, err)}
	}
	f.index.Edited(loc.Path, edited, loc.Doc) // the file's other documents are not read again
	return []Change{noted(f, c, loc.Path, edited)}, nil
}

// edited is the change that writes data to p (deletes it when data is nil), noted in the index.
func (w *Worker) edited(f *adoptedFolder, c *Change, p string, data []byte) Change {
	if data == nil {
		f.drop(p)
	} else {
		f.index.Put(p, data)
	}
	return noted(f, c, p, data)
}

// noted is the change that writes data to p, the index having taken it in: p is read again
// from the next tree the index is brought to, unless that tree holds data.
func noted(f *adoptedFolder, c *Change, p string, data []byte) Change {
	f.edited[p] = struct{}{}
	if data != nil {
		f.blobs[p] = gitstore.BlobHash(data)
	}
	return Change{Path: p, Content: data, Credit: c.Credit, Summary: c.Summary}
}

// removeDocument removes the object's document, the file with its last one, and the file's
// entry from the kustomization beside it.
func (w *Worker) removeDocument(f *adoptedFolder, fs files, c *Change, loc placement.Location, data []byte) ([]Change, error) {
	rest := placement.RemoveDocument(data, loc.Doc)
	out := []Change{w.edited(f, c, loc.Path, rest)}
	if rest != nil {
		return out, nil
	}
	k, err := w.kustomizationEdit(f, fs, c, loc.Path, placement.RemoveResource)
	if err != nil {
		return nil, &AdoptionError{Key: c.Adopt.Key, Folder: c.Adopt.Folder, Err: err}
	}
	return append(out, k...), nil
}

// placeNew writes the document of an object no file holds: at the destination's template, else
// beside the kustomization of its namespace (and listed in it), else at its canonical path.
func (w *Worker) placeNew(f *adoptedFolder, fs files, c *Change) ([]Change, error) {
	a := c.Adopt
	p := a.Place
	if p == "" {
		if dir, ok := f.index.ForNamespace(a.Key.Namespace); ok {
			p = path.Join(dir, newFileName(a.Key))
		} else {
			p = c.Path
		}
	}
	if !ValidPath(p) {
		return nil, &AdoptionError{Key: a.Key, Folder: a.Folder, Err: fmt.Errorf("new file %q is not a clean path inside the repository", p)}
	}
	existing, err := fs.read(p)
	if err != nil {
		return nil, err
	}
	doc := a.New
	if a.Whole != nil {
		doc = a.Whole
	}
	out := []Change{w.edited(f, c, p, placement.AppendDocument(existing, doc))}
	if existing != nil {
		return out, nil // the file is listed already, if it is to be
	}
	k, err := w.kustomizationEdit(f, fs, c, p, placement.AddResource)
	if err != nil {
		return nil, &AdoptionError{Key: a.Key, Folder: a.Folder, Err: err}
	}
	return append(out, k...), nil
}

// newFileName is the file a new object gets beside its namespace's kustomization, as teams name
// theirs: web-deployment.yaml.
func newFileName(k placement.Key) string {
	return k.Name + "-" + strings.ToLower(k.Kind) + ".yaml"
}

// kustomizationEdit applies edit (AddResource or RemoveResource) to the kustomization of the
// folder of file p, for p's entry; nothing when no kustomization sits beside p.
func (w *Worker) kustomizationEdit(f *adoptedFolder, fs files, c *Change, p string, edit func([]byte, string) ([]byte, error)) ([]Change, error) {
	dir := path.Dir(p)
	kp, _, ok := f.index.Kustomization(dir)
	if !ok {
		return nil, nil
	}
	data, err := fs.read(kp)
	if err != nil || data == nil {
		return nil, err
	}
	next, err := edit(data, path.Base(p))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", kp, err)
	}
	if string(next) == string(data) {
		return nil, nil
	}
	return []Change{w.edited(f, c, kp, next)}, nil
}

// Document is the text of the document that holds object k in the adopted folder, as the branch
// the worker builds on holds it (its built commits included); when overlay is set and its
// kustomization renders k, k as rendered. A nil document: no file holds k. An error names a
// duplicate, an unreadable folder or an overlay that does not render; ErrStopped when the worker
// stopped.
func (w *Worker) Document(ctx context.Context, folder, overlay string, k placement.Key) ([]byte, error) {
	type answer struct {
		doc []byte
		err error
	}
	got := make(chan answer, 1) // the worker may answer after ctx ended
	if err := w.call(ctx, func(context.Context) {
		doc, err := w.document(folder, overlay, k)
		got <- answer{doc, err}
	}); err != nil {
		return nil, err
	}
	a := <-got
	return a.doc, a.err
}

func (w *Worker) document(folder, overlay string, k placement.Key) ([]byte, error) {
	tip := w.base
	if w.built.valid {
		tip = w.built.tip
	}
	tree, err := w.store.CommitTree(tip)
	if err != nil && !tip.IsZero() {
		return nil, err
	}
	if overlay != "" {
		if doc, err := w.rendered(tree, overlay, k); doc != nil || err != nil {
			return doc, err
		}
	}
	f, err := w.folderIndex(folder, tree, 0)
	if err != nil {
		return nil, err
	}
	loc, err := f.index.Lookup(k)
	if errors.Is(err, placement.ErrNotFound) {
		return nil, nil
	} else if err != nil {
		return nil, err
	}
	e := w.fileEntry(tree, loc.Path)
	if e == nil {
		return nil, nil
	}
	if w.lastRead.hash != e.Hash { // a list reads the objects of one file one after another
		data, err := w.store.Blob(e.Hash)
		if err != nil {
			return nil, err
		}
		w.lastRead.hash, w.lastRead.data = e.Hash, data
	}
	return placement.Document(w.lastRead.data, loc.Doc), nil
}

// adoptedPath is the file that holds the object of an adopted change, as the worker's index
// last saw the folder ("" when none does); false when a is nil, a change of a canonical folder.
func (w *Worker) adoptedPath(a *Adoption) (string, bool) {
	if a == nil {
		return "", false
	}
	if f := w.adopted[a.Folder]; f != nil {
		if loc, err := f.index.Lookup(a.Key); err == nil {
			return loc.Path, true
		}
	}
	return "", true
}
