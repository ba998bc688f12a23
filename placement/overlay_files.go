package placement

import (
	"path"
	"strings"
)

// Tree reads a repository's files: the worker's view of a commit's tree.
type Tree interface {
	// File is the content of the regular file at p; false when there is none.
	File(p string) ([]byte, bool)
	// IsDir reports whether p is a folder of the tree.
	IsDir(p string) bool
}

// maxOverlayFiles bounds the files one render reads: a kustomization graph of more is refused
// by the render as missing files, never read without end.
const maxOverlayFiles = 20000

// FilesOf is every file the kustomization in dir reaches, through the folders and files its
// entries name (resources, components, patches, generators' files…), read from t: what
// RenderOverlay needs of the repository and nothing else. Remote entries and inline patches
// name no file and are skipped (the render refuses a remote one); a kustomization reached twice
// is read once.
func FilesOf(t Tree, dir string) map[string][]byte {
	files := map[string][]byte{}
	seen := map[string]bool{}
	var walk func(dir string)
	walk = func(dir string) {
		if seen[dir] || len(files) > maxOverlayFiles {
			return
		}
		seen[dir] = true
		var kpath string
		for _, n := range kustomizationNames {
			if data, ok := t.File(path.Join(dir, n)); ok {
				kpath, files[path.Join(dir, n)] = path.Join(dir, n), data
			}
		}
		if kpath == "" {
			return
		}
		f := &buildFolder{files: files}
		_, k, err := f.kustomization(dir)
		if err != nil {
			return
		}
		for _, e := range entriesOf(k) {
			v := e.value
			if strings.Contains(v, "\n") || remote(v) || path.IsAbs(v) {
				continue
			}
			p := cleanDir(path.Join(dir, v))
			if strings.HasPrefix(p, "..") {
				continue
			}
			if data, ok := t.File(p); ok {
				files[p] = data
			} else if e.kind != fileEntry && t.IsDir(p) {
				walk(p)
			}
		}
	}
	walk(cleanDir(dir))
	return files
}
