package placement

import (
	"fmt"

	"sigs.k8s.io/kustomize/api/types"
)

// Overlay is the render of a kustomization a destination points at (an overlay over bases
// elsewhere in the repository), with where each rendered object comes from.
type Overlay struct {
	Dir     string                 // the kustomization's folder, repository-relative
	Objects map[Key]map[string]any // the render, as Build gives it
	Origins map[Key]Origin         // where each object of Objects comes from
	Files   map[string][]byte      // every file the render read, by repository path
	k       *types.Kustomization   // the overlay's own kustomization, as kustomize reads it
	kpath   string                 // its file
}

// Origin is where a rendered object comes from: a document of a file, or a generator.
type Origin struct {
	Path string // the file that holds its document, repository-relative; "" when generated
	// Generator is ConfigMapGenerator or SecretGenerator when generated, and ConfiguredIn the
	// kustomization that declares it.
	Generator, ConfiguredIn string
}

// RenderOverlay renders the kustomization in dir of files (Build: in process, nothing fetched,
// no Helm, no plugin) and traces each object to its origin (traceOrigins).
func RenderOverlay(files map[string][]byte, dir string) (*Overlay, error) {
	o, f, err := renderOnly(files, cleanDir(dir))
	if err != nil {
		return nil, fmt.Errorf("render the kustomization in %s: %w", showDir(dir), err)
	}
	o.Origins = f.traceOrigins(o.Dir, o.Objects)
	return o, nil
}

// renderOnly is the render of the kustomization in dir of files, its origins not traced.
func renderOnly(files map[string][]byte, dir string) (*Overlay, *buildFolder, error) {
	f := newBuildFolder(files)
	if err := f.check(dir); err != nil {
		return nil, nil, err
	}
	kpath, k, err := f.kustomization(dir)
	if err != nil {
		return nil, nil, err
	}
	objects, err := f.render(dir)
	if err != nil {
		return nil, nil, err
	}
	return &Overlay{Dir: dir, Objects: objects, Files: files, k: k, kpath: kpath}, f, nil
}

// IsKustomization reports whether kustomize reads the file at p as a kustomization.
func IsKustomization(p string) bool { return isKustomizationFile(p) }

// KustomizationIn is the path of the kustomization file of folder dir among files (by
// repository path); "" when they hold none.
func KustomizationIn(files map[string][]byte, dir string) string {
	dir = cleanDir(dir)
	for p := range files {
		if isKustomizationFile(p) && dirOf(p) == dir {
			return p
		}
	}
	return ""
}
