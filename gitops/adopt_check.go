package gitops

import (
	"fmt"
	"path"
	"strings"

	"github.com/configbutler/gitops-reverser/placement"
)

// renderCheck is an edit of a run to check against the render of its kustomization: never a
// commit whose kustomization does not build, or renders another value than the edit wrote.
type renderCheck struct {
	adoption *Adoption
	path     string // the file edited
}

// unrendered renders, with kustomize in process, the nearest kustomization of every file the
// checks edited, as the run leaves the folder (each once), and returns why each object whose
// edit does not render as written is refused: the kustomization does not build, or decides the
// field itself. A kustomization of nothing but resources and a namespace renders what its files
// say (placement.PassesThrough) and is not rendered.
func (w *Worker) unrendered(fs files, checks []renderCheck) map[placement.Key]string {
	refused := map[placement.Key]string{}
	type render struct {
		objects map[placement.Key]map[string]any
		err     error
	}
	renders := map[string]render{} // by the kustomization's folder
	folders := map[string]map[string][]byte{}
	for _, c := range checks {
		f := w.adopted[c.adoption.Folder]
		kp, ok := f.index.Nearest(path.Dir(c.path))
		if !ok {
			continue // no kustomization builds it
		}
		dir := path.Dir(kp)
		if k, err := fs.read(kp); err == nil && placement.PassesThrough(k, c.adoption.Ops) {
			continue // it renders what the file says: no need to render it
		}
		r, done := renders[dir]
		if !done {
			if folders[c.adoption.Folder] == nil {
				folders[c.adoption.Folder] = w.folderFiles(fs, c.adoption.Folder)
			}
			r.objects, r.err = placement.Build(folders[c.adoption.Folder], dir)
			renders[dir] = r
		}
		err := r.err
		if err == nil {
			err = placement.RenderedHolds(r.objects, dir, c.adoption.Key, c.adoption.Ops)
		} else {
			err = fmt.Errorf("with this change the kustomization of %s does not build: %w", dir, err)
		}
		if err != nil {
			refused[c.adoption.Key] = err.Error()
		}
	}
	return refused
}

// maxRenderedFileBytes bounds a file given to a render: kustomize reads manifests and the files
// of generators, none of which is near this.
const maxRenderedFileBytes = 1 << 20

// folderFiles is every regular file of the adopted folder as the run leaves it.
func (w *Worker) folderFiles(fs files, folder string) map[string][]byte {
	out := map[string][]byte{}
	entries, err := w.store.Dir(fs.tree, folder)
	if err != nil {
		return out
	}
	prefix := folder + "/"
	_ = w.store.WalkFiles(entries, []byte(prefix), func(p []byte) {
		name := string(p)
		// A link or a submodule reads as nil: only regular files are given to a render.
		if data, err := fs.read(name); err == nil && data != nil && len(data) <= maxRenderedFileBytes {
			out[name] = data
		}
	})
	fs.each(func(p string, data []byte) { // the run's new files, and what it deleted
		if strings.HasPrefix(p, prefix) {
			if data == nil {
				delete(out, p)
			} else if len(data) <= maxRenderedFileBytes {
				out[p] = data
			}
		}
	})
	return out
}
