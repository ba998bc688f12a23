package placement

import (
	"path"
	"strings"

	"go.yaml.in/yaml/v3"
)

// kustomizationNames are the names kustomize reads a kustomization from, in the order it
// tries them.
var kustomizationNames = []string{"kustomization.yaml", "kustomization.yml", "Kustomization"}

// kustomizationInfo is what the index keeps of a kustomization: where it is, the namespace it
// sets, and the files it names as patches (repository-relative).
type kustomizationInfo struct {
	path, dir, namespace string
	patches              []string
}

// isKustomizationFile reports whether kustomize would read the file at p as a kustomization.
func isKustomizationFile(p string) bool {
	return kustomizationRank(path.Base(p)) >= 0
}

// kustomizationRank is base's place in kustomizationNames, or -1.
func kustomizationRank(base string) int {
	for i, n := range kustomizationNames {
		if base == n {
			return i
		}
	}
	return -1
}

// readKustomization reads the namespace and the patch files of the kustomization at p. A file
// that does not parse gives a kustomization with neither (readFile reports it).
func readKustomization(p string, data []byte) *kustomizationInfo {
	k := &kustomizationInfo{path: p, dir: dirOf(p)}
	var fields map[string]any
	if yaml.Unmarshal(data, &fields) != nil {
		return k
	}
	k.namespace, _ = fields["namespace"].(string)
	for _, e := range patchEntries(fields) {
		if e != "" && !strings.Contains(e, "://") && !strings.Contains(e, "\n") {
			k.patches = append(k.patches, path.Join(k.dir, e))
		}
	}
	return k
}

// patchEntries lists the file names of a kustomization's patches: the path of each item of
// patches and patchesJson6902, and each one-line item of patchesStrategicMerge (an item of
// several lines is an inline patch).
func patchEntries(fields map[string]any) []string {
	var out []string
	for _, key := range []string{"patches", "patchesJson6902"} {
		items, _ := fields[key].([]any)
		for _, it := range items {
			m, _ := it.(map[string]any)
			p, _ := m["path"].(string)
			out = append(out, p)
		}
	}
	items, _ := fields["patchesStrategicMerge"].([]any)
	for _, it := range items {
		p, _ := it.(string)
		out = append(out, p)
	}
	return out
}

// addFolderFacts records what the file at p tells about its folder.
func (x *Index) addFolderFacts(p string, f *indexedFile) {
	if f.chart {
		x.charts[dirOf(p)] = true
	}
	if k := f.kust; k != nil {
		x.kusts[k.dir] = insertByRank(x.kusts[k.dir], k)
		for _, q := range k.patches {
			x.patches[q]++
		}
	}
}

// dropFolderFacts forgets what addFolderFacts recorded for the file at p.
func (x *Index) dropFolderFacts(p string, f *indexedFile) {
	if f.chart {
		delete(x.charts, dirOf(p))
	}
	k := f.kust
	if k == nil {
		return
	}
	var kept []*kustomizationInfo
	for _, o := range x.kusts[k.dir] {
		if o != k {
			kept = append(kept, o)
		}
	}
	if len(kept) == 0 {
		delete(x.kusts, k.dir)
	} else {
		x.kusts[k.dir] = kept
	}
	for _, q := range k.patches {
		if x.patches[q]--; x.patches[q] <= 0 {
			delete(x.patches, q)
		}
	}
}

// insertByRank adds k to the kustomizations of one folder, kept in the order kustomize tries
// their names.
func insertByRank(ks []*kustomizationInfo, k *kustomizationInfo) []*kustomizationInfo {
	rank := kustomizationRank(path.Base(k.path))
	i := 0
	for i < len(ks) && kustomizationRank(path.Base(ks[i].path)) < rank {
		i++
	}
	ks = append(ks, nil)
	copy(ks[i+1:], ks[i:])
	ks[i] = k
	return ks
}

// kustomizationAt is the kustomization kustomize reads in dir, or nil.
func (x *Index) kustomizationAt(dir string) *kustomizationInfo {
	if ks := x.kusts[dir]; len(ks) > 0 {
		return ks[0]
	}
	return nil
}

// Kustomization returns the kustomization file of exactly dir (kustomization.yaml,
// kustomization.yml or Kustomization, the first kustomize would read) and its namespace:.
func (x *Index) Kustomization(dir string) (p, namespace string, ok bool) {
	k := x.kustomizationAt(dir)
	if k == nil {
		return "", "", false
	}
	return k.path, k.namespace, true
}

// Nearest returns the nearest kustomization at dir or above it, within the folder.
func (x *Index) Nearest(dir string) (kustomizationPath string, ok bool) {
	var found string
	x.walkUp(dir, func(k *kustomizationInfo) bool {
		found = k.path
		return true
	})
	return found, found != ""
}

// ForNamespace returns where a new object of namespace ns goes: the folder of a kustomization
// whose namespace: is ns, the shallowest, and of those the first by path.
func (x *Index) ForNamespace(ns string) (dir string, ok bool) {
	var best *kustomizationInfo
	for d := range x.kusts {
		k := x.kustomizationAt(d)
		if ns == "" || k.namespace != ns {
			continue
		}
		if best == nil || depth(k.dir) < depth(best.dir) || depth(k.dir) == depth(best.dir) && k.path < best.path {
			best = k
		}
	}
	if best == nil {
		return "", false
	}
	return best.dir, true
}

// walkUp calls fn with the kustomization of dir and of each folder above it up to the indexed
// folder, nearest first, until fn returns true. A dir outside the folder has none.
func (x *Index) walkUp(dir string, fn func(*kustomizationInfo) bool) {
	if dir != x.folder && !x.within(dir) {
		return
	}
	for d := dir; ; d = dirOf(d) {
		if k := x.kustomizationAt(d); k != nil && fn(k) {
			return
		}
		if d == x.folder || d == "" {
			return
		}
	}
}

// inherited is the namespace a document in dir inherits: that of the nearest kustomization
// at dir or above, within the folder, that sets one.
func (x *Index) inherited(dir string) string {
	var ns string
	x.walkUp(dir, func(k *kustomizationInfo) bool {
		ns = k.namespace
		return ns != ""
	})
	return ns
}

// isTemplate reports whether the file at p is below the templates/ folder of a Helm chart, a
// Go template that only Helm's rendering makes into documents.
func (x *Index) isTemplate(p string) bool {
	for rest, at := p, 0; ; {
		i := strings.Index(rest, "templates/")
		if i < 0 {
			return false
		}
		if i == 0 || rest[i-1] == '/' {
			if chart := strings.TrimSuffix(p[:at+i], "/"); x.charts[chart] {
				return true
			}
		}
		at += i + len("templates/")
		rest = p[at:]
	}
}

// isPatch reports whether a kustomization names the file at p as a patch.
func (x *Index) isPatch(p string) bool { return x.patches[p] > 0 }

// depth is how many folders deep dir is; the root is 0.
func depth(dir string) int {
	if dir == "" {
		return 0
	}
	return strings.Count(dir, "/") + 1
}
