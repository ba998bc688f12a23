package placement

import (
	"fmt"
	"path"
	"regexp"
	"strings"

	"sigs.k8s.io/kustomize/api/types"
)

// buildFolder is the files given to Build, as its checks see them.
type buildFolder struct {
	files map[string][]byte
	root  string          // the deepest folder holding every file ("" for the top)
	dirs  map[string]bool // every folder holding a file, at any depth, root included
	seen  map[string]bool // the kustomization folders checked so far
}

func newBuildFolder(files map[string][]byte) *buildFolder {
	f := &buildFolder{files: files, dirs: map[string]bool{}, seen: map[string]bool{}}
	first := true
	for p := range files {
		d := dirOf(p)
		if first {
			f.root, first = d, false
		} else {
			f.root = commonDir(f.root, d)
		}
		for ; d != "" && !f.dirs[d]; d = dirOf(d) {
			f.dirs[d] = true
		}
	}
	f.dirs[""] = true
	return f
}

// commonDir is the deepest folder holding both folders a and b.
func commonDir(a, b string) string {
	for a != "" && b != a && !strings.HasPrefix(b, a+"/") {
		a = dirOf(a)
	}
	return a
}

// entryKind is what a kustomization's entry may name.
type entryKind int

const (
	fileEntry     entryKind = iota // a file: a patch, a generator's source, a CRD
	baseEntry                      // a file of objects, or a folder with a kustomization
	folderEntry                    // a folder with a kustomization (components)
	inlineOrEntry                  // inline YAML (several lines) or a baseEntry
)

// kustEntry is one path a kustomization names, with the field that names it.
type kustEntry struct {
	field, value string
	kind         entryKind
}

// check reads the kustomization in dir and, through the folders it names, every kustomization
// the build reaches, and refuses the first that kustomize must not be given (see Build).
func (f *buildFolder) check(dir string) error {
	if f.seen[dir] {
		return nil // a cycle, or a base two overlays share: kustomize reports a cycle itself
	}
	f.seen[dir] = true
	name, k, err := f.kustomization(dir)
	if err != nil {
		return err
	}
	if len(k.HelmCharts) > 0 || k.HelmGlobals != nil {
		return fmt.Errorf("%s: helmCharts: %w", name, ErrHelm)
	}
	for _, e := range entriesOf(k) {
		if err := f.checkEntry(dir, e); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
	}
	return nil
}

// kustomization reads the kustomization file of dir as kustomize reads it (unknown fields
// refused, deprecated fields moved to their successors).
func (f *buildFolder) kustomization(dir string) (string, *types.Kustomization, error) {
	var found []string
	for _, n := range kustomizationNames {
		if _, ok := f.files[path.Join(dir, n)]; ok {
			found = append(found, path.Join(dir, n))
		}
	}
	switch len(found) {
	case 0:
		return "", nil, fmt.Errorf("%s: kustomization.yaml, kustomization.yml or Kustomization: %w", showDir(dir), ErrMissing)
	case 1:
	default:
		return "", nil, fmt.Errorf("%s: more than one kustomization file (%s): keep one", showDir(dir), strings.Join(found, ", "))
	}
	var k types.Kustomization
	if err := k.Unmarshal(f.files[found[0]]); err != nil {
		return "", nil, fmt.Errorf("%s: %w", found[0], err)
	}
	k.FixKustomization()
	return found[0], &k, nil
}

// entriesOf is every path k names, in the order of its fields.
func entriesOf(k *types.Kustomization) []kustEntry {
	var out []kustEntry
	add := func(field string, kind entryKind, values ...string) {
		for _, v := range values {
			if v != "" {
				out = append(out, kustEntry{field, v, kind})
			}
		}
	}
	add("resources", baseEntry, k.Resources...)
	add("components", folderEntry, k.Components...)
	add("crds", fileEntry, k.Crds...)
	add("configurations", fileEntry, k.Configurations...)
	add("openapi", fileEntry, k.OpenAPI["path"])
	add("generators", inlineOrEntry, k.Generators...)
	add("transformers", inlineOrEntry, k.Transformers...)
	add("validators", inlineOrEntry, k.Validators...)
	for _, p := range k.Patches {
		add("patches", fileEntry, p.Path)
	}
	// Deprecated, and still read by kustomize: so checked here too.
	for _, p := range k.PatchesStrategicMerge { //nolint:staticcheck // deprecated, still read
		add("patchesStrategicMerge", inlineOrEntry, string(p))
	}
	for _, p := range k.PatchesJson6902 { //nolint:staticcheck // deprecated, still read
		add("patchesJson6902", fileEntry, p.Path)
	}
	for _, r := range k.Replacements {
		add("replacements", fileEntry, r.Path)
	}
	for _, g := range k.ConfigMapGenerator {
		add("configMapGenerator", fileEntry, generatorFiles(g.KvPairSources)...)
	}
	for _, g := range k.SecretGenerator {
		add("secretGenerator", fileEntry, generatorFiles(g.KvPairSources)...)
	}
	return out
}

// generatorFiles is the files a generator reads: files (key=path or path) and envs.
func generatorFiles(s types.KvPairSources) []string {
	out := make([]string, 0, len(s.FileSources)+len(s.EnvSources))
	for _, src := range s.FileSources {
		if _, p, ok := strings.Cut(src, "="); ok {
			src = p
		}
		out = append(out, src)
	}
	return append(out, s.EnvSources...)
}

// checkEntry refuses e, named by the kustomization in dir, when it is remote, leaves the
// folder or names nothing; a folder it names is checked as a kustomization in turn.
func (f *buildFolder) checkEntry(dir string, e kustEntry) error {
	v := e.value
	if e.kind == inlineOrEntry && (strings.ContainsAny(v, "\n") || strings.HasPrefix(strings.TrimSpace(v), "{")) {
		return nil // inline YAML: no path
	}
	if remote(v) {
		return fmt.Errorf("%s: %s: %w", e.field, v, ErrRemote)
	}
	if path.IsAbs(v) {
		return fmt.Errorf("%s: %s: an absolute path is %w: name it relative to the kustomization", e.field, v, ErrOutside)
	}
	p := path.Join(dir, v)
	if p == "." {
		p = ""
	}
	if p == ".." || strings.HasPrefix(p, "../") || !within(f.root, p) {
		return fmt.Errorf("%s: %s resolves to %s, %w %s", e.field, v, p, ErrOutside, showDir(f.root))
	}
	if _, ok := f.files[p]; ok && e.kind != folderEntry {
		return nil
	}
	if f.dirs[p] && e.kind != fileEntry {
		if err := f.check(p); err != nil {
			return fmt.Errorf("%s: %s: %w", e.field, v, err)
		}
		return nil
	}
	return fmt.Errorf("%s: %s: %w (%s)", e.field, v, ErrMissing, showDir(f.root))
}

// within reports whether p is root or below it.
func within(root, p string) bool {
	return root == "" || p == root || strings.HasPrefix(p, root+"/")
}

// remoteUser is an scp-style address's user: git@github.com:org/repo.
var remoteUser = regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9-]*@`)

// remote reports whether kustomize would read v from the network: a URL of any scheme (it
// fetches http and https files and clones ssh, https and file repositories), a git:: address,
// an scp-style user@host:path, or a github.com/ or github.com: path (kustomize's own rules for a
// repository, with every scheme refused rather than only those it clones).
func remote(v string) bool {
	lower := strings.ToLower(strings.TrimSpace(v))
	return strings.HasPrefix(lower, "git::") || strings.Contains(lower, "://") ||
		remoteUser.MatchString(lower) ||
		strings.HasPrefix(lower, "github.com/") || strings.HasPrefix(lower, "github.com:")
}
