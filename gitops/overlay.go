package gitops

import (
	"bytes"
	"fmt"
	"maps"
	"path"
	"strings"

	"github.com/go-git/go-git/v5/plumbing"

	"github.com/configbutler/gitops-reverser/gitstore"
	"github.com/configbutler/gitops-reverser/placement"
)

// overlayState is the worker's render of one overlay: as a tree holds it (for Document), and as
// the run being resolved leaves it, each change's check rendering the next.
type overlayState struct {
	tree       plumbing.Hash // the tree render was read from, before the run's edits
	render     *placement.Overlay
	shared     map[string]bool
	sharedTree plumbing.Hash
	// failed is why failedFiles, the overlay's files last read, did not render.
	failed      error
	failedFiles map[string][]byte
}

// treeFiles reads the files of a run (its edits over its tree) for placement.FilesOf.
type treeFiles struct{ fs files }

func (t treeFiles) File(p string) ([]byte, bool) {
	data, err := t.fs.read(p)
	return data, err == nil && data != nil
}

func (t treeFiles) IsDir(p string) bool {
	entries, err := t.fs.w.store.Dir(t.fs.tree, p)
	return err == nil && entries != nil
}

// overlay is the render of the overlay in dir as fs leaves it, nil when dir holds no
// kustomization. The render the last change left (each change's check renders the next) is kept
// while the files it read are those of fs: through the rest of the run, and into the tree the
// run is committed as, whose files are the run's. Only other files cost a render.
func (w *Worker) overlay(fs files, dir string) (*overlayState, error) {
	if w.overlays == nil {
		w.overlays = map[string]*overlayState{}
	}
	s := w.overlays[dir]
	if s == nil {
		s = &overlayState{}
		w.overlays[dir] = s
	}
	if s.render != nil && s.tree == fs.tree && s.holds(fs) {
		return s, nil
	}
	found := placement.FilesOf(treeFiles{fs}, dir)
	if placement.KustomizationIn(found, dir) == "" {
		return nil, nil // no kustomization there: the folder's documents are edited as they are
	}
	if s.render != nil && maps.EqualFunc(found, s.render.Files, bytes.Equal) {
		s.tree = fs.tree // the tree a run was committed as, which the render holds
		return s, nil
	}
	if s.failed != nil && maps.EqualFunc(found, s.failedFiles, bytes.Equal) {
		return nil, s.failed // the same files do not render: every object's lookup need not try again
	}
	o, err := placement.RenderOverlay(found, dir)
	if err != nil {
		s.failed, s.failedFiles = err, found
		return nil, err
	}
	s.tree, s.render, s.failed, s.failedFiles = fs.tree, o, nil, nil
	return s, nil
}

// holds reports whether the render holds each file of the overlay that the run changed so far
// as the run has it: the run changed them only through this render (another change of the run,
// a new object's file listed in a kustomization, would need a render of its own).
func (s *overlayState) holds(fs files) bool {
	held := true
	if fs.each != nil {
		fs.each(func(p string, data []byte) {
			if have, read := s.render.Files[p]; read && !bytes.Equal(have, data) {
				held = false
			}
		})
	}
	return held
}

// adoptOverlay places the change of an object the destination's overlay renders where a person
// would have made it (placement.Overlay.Land), checks the overlay's render with it, and returns
// its file changes; false when the overlay does not render the object (its document, if any, is
// edited as in any adopted folder).
func (w *Worker) adoptOverlay(fs files, c *Change) ([]Change, bool, error) {
	a := c.Adopt
	s, err := w.overlay(fs, a.Overlay)
	if err != nil {
		return nil, true, &AdoptionError{Key: a.Key, Folder: a.Folder, Err: fmt.Errorf("render the overlay: %w", err)}
	}
	if s == nil {
		return nil, false, nil
	}
	if _, ok := s.render.Objects[a.Key]; !ok {
		return nil, false, nil
	}
	own := w.owner(fs, s, a.Folder, a.Overlay)
	if a.Whole != nil { // a Secret, replaced whole: only in a document of the destination's own
		origin := s.render.Origins[a.Key]
		if origin.Path != "" && own(origin.Path) {
			return nil, false, nil
		}
		return nil, true, &AdoptionError{Key: a.Key, Folder: a.Folder, Err: fmt.Errorf(
			"the overlay renders it from %s, which the destination does not own: a Secret is replaced whole in its own document, never added beside a base's (the overlay would render it twice): %w",
			originName(origin), placement.ErrNotExpressible)}
	}
	var edits []placement.FileEdit
	var after *placement.Overlay
	switch {
	case a.Delete:
		edits, err = s.render.Remove(a.Key, own)
		if err == nil {
			after, err = s.render.CheckGone(a.Key, edits)
		}
	case len(a.Ops) == 0:
		return nil, true, nil
	default:
		edits, after, err = s.render.Place(a.Key, a.Ops, own)
	}
	if err != nil {
		return nil, true, &AdoptionError{Key: a.Key, Folder: a.Folder, Err: err}
	}
	f, err := w.folderIndex(a.Folder, fs.tree, fs.run)
	if err != nil {
		return nil, true, err
	}
	out := make([]Change, 0, len(edits))
	for _, e := range edits {
		out = append(out, w.edited(f, c, e.Path, e.Data))
	}
	s.render = after
	return out, true, nil
}

// owner is what the destination may write: files under its folder that no kustomization of the
// repository renders but through the overlay (a base staging and production share is written
// only through each overlay).
func (w *Worker) owner(fs files, s *overlayState, folder, overlay string) func(string) bool {
	if s.shared == nil || s.sharedTree != fs.tree && w.kustomizationsDiffer(s.sharedTree, fs.tree) {
		s.shared = w.sharedFiles(fs, overlay)
	}
	s.sharedTree = fs.tree
	return func(p string) bool {
		return (folder == "" || p == folder || strings.HasPrefix(p, folder+"/")) && !s.shared[p]
	}
}

// kustomizationsDiffer reports whether a kustomization file differs between trees a and b (or
// they cannot be compared): what another kustomization renders changes only with one, so the
// shared files of a tree are those of the tree before a commit that changed none (a change the
// daemon placed in an overlay's patch or images:, a person's edit of a document).
func (w *Worker) kustomizationsDiffer(a, b plumbing.Hash) bool {
	differ := false
	err := w.store.DiffFiles(a, b, "", func(p string, _, _ *gitstore.TreeEntry) {
		differ = differ || placement.IsKustomization(p)
	})
	return differ || err != nil
}

// sharedFiles is every file that a kustomization of the repository outside the overlay's own
// graph renders: every kustomization file of the tree is read, when one changed.
func (w *Worker) sharedFiles(fs files, overlay string) map[string]bool {
	t := treeFiles{fs}
	mine := placement.FilesOf(t, overlay)
	shared := map[string]bool{}
	entries, err := w.store.Dir(fs.tree, "")
	if err != nil {
		return shared
	}
	_ = w.store.WalkFiles(entries, nil, func(p []byte) {
		name := string(p)
		if !placement.IsKustomization(name) {
			return
		}
		dir := path.Dir(name)
		if dir == "." {
			dir = ""
		}
		if _, inMine := mine[name]; inMine {
			return // a kustomization the overlay itself renders
		}
		theirs := placement.FilesOf(t, dir)
		if placement.KustomizationIn(theirs, overlay) != "" {
			return // it renders the overlay whole (a cluster's kustomization of its apps)
		}
		for q := range theirs {
			if _, ok := mine[q]; ok {
				shared[q] = true
			}
		}
	})
	return shared
}

// rendered is object k as the overlay in dir renders it on tree, as a document; nil when the
// overlay does not render it or dir holds no kustomization.
func (w *Worker) rendered(tree plumbing.Hash, dir string, k placement.Key) ([]byte, error) {
	fs := files{w: w, tree: tree, ops: func(string) (*gitstore.Op, bool) { return nil, false }}
	s, err := w.overlay(fs, dir)
	if err != nil || s == nil {
		return nil, err
	}
	obj, ok := s.render.Objects[k]
	if !ok {
		return nil, nil
	}
	return placement.Render(obj)
}

// originName names where a rendered object comes from, for messages.
func originName(o placement.Origin) string {
	switch {
	case o.Path != "":
		return o.Path
	case o.Generator != "":
		return "a " + o.Generator + " in " + o.ConfiguredIn
	}
	return "a document that cannot be told (two would do)"
}
