package placement

import (
	"errors"
	"fmt"
	"path"
	"strings"

	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/api/resource"
	"sigs.k8s.io/kustomize/api/types"
	"sigs.k8s.io/kustomize/kyaml/filesys"

	"github.com/configbutler/gitops-reverser/sanitize"
)

// The refusals of Build, for errors.Is: each is wrapped with the kustomization and the entry
// that asked for it.
var (
	// ErrRemote is a kustomization entry that names something outside the repository: a URL,
	// a git:: or scp-style address, a github.com/… path. Rendering it would reach the network.
	ErrRemote = errors.New("a remote base or file: only the folder's own files are rendered, never fetched")
	// ErrHelm is a kustomization that inflates Helm charts (helmCharts, helmGlobals,
	// helmChartInflationGenerator), which runs the helm program.
	ErrHelm = errors.New("a Helm chart inflation runs helm, which is not rendered here: commit the chart's rendered manifests, or keep the chart in a HelmRelease")
	// ErrOutside is a path that leaves the folder (../../x) or is absolute.
	ErrOutside = errors.New("outside the folder")
	// ErrMissing is a path that names no file and no folder of the folder's files.
	ErrMissing = errors.New("not among the folder's files")
)

// Build renders the kustomization in dir of files (repository-relative path → content; only
// files under the adopted folder are given) with kustomize's Go API in process, and returns the
// rendered objects by Key, with the Go types sanitize.ObjectOf gives.
//
// Nothing is read but files: they are laid out in an in-memory file system at their repository
// paths, and nothing else is in it, so no load restriction is needed to keep kustomize inside
// the folder: the file system is the restriction. Loads are therefore unrestricted
// (LoadRestrictionsNone), as Flux's kustomize-controller renders them: a patch or a generator's
// file in a sibling folder (../shared/patch.yaml) renders here as it renders in the cluster,
// where the root-only restriction would refuse it and the check would disagree with what is
// applied. Bases in sibling folders (../base/podinfo) load under either.
//
// Before kustomize runs, every kustomization the build reaches is read and refused, with a
// clear error, when it names a remote base or file (ErrRemote: kustomize would clone or fetch
// it), inflates a Helm chart (ErrHelm), or names a path that leaves the folder (ErrOutside) or
// is not among files (ErrMissing). Plugins are off (builtins only, statically linked; no exec,
// no container functions, no Helm).
func Build(files map[string][]byte, dir string) (map[Key]map[string]any, error) {
	dir = cleanDir(dir)
	f := newBuildFolder(files)
	if err := f.check(dir); err != nil {
		return nil, fmt.Errorf("render the kustomization in %s: %w", showDir(dir), err)
	}
	out, err := f.render(dir)
	if err != nil {
		return nil, fmt.Errorf("render the kustomization in %s: %w", showDir(dir), err)
	}
	return out, nil
}

// render runs kustomize on dir and reads what it renders.
func (f *buildFolder) render(dir string) (map[Key]map[string]any, error) {
	fs := filesys.MakeFsInMemory()
	for p, data := range f.files {
		if err := fs.WriteFile("/"+p, data); err != nil {
			return nil, fmt.Errorf("lay out %s: %w", p, err)
		}
	}
	opts := krusty.MakeDefaultOptions()
	opts.LoadRestrictions = types.LoadRestrictionsNone
	opts.PluginConfig = types.DisabledPluginConfig()
	m, err := krusty.MakeKustomizer(opts).Run(fs, "/"+dir)
	if err != nil {
		return nil, fmt.Errorf("kustomize: %w", err)
	}
	return resourceObjects(m.Resources())
}

// resourceObjects reads kustomize's rendered resources as objects by Key, from their YAML nodes
// through sanitize's reader (the Go types of a document read from a file), without writing them
// out as text first: kustomize's own writer goes through JSON and back, a third of a render.
func resourceObjects(resources []*resource.Resource) (map[Key]map[string]any, error) {
	out := make(map[Key]map[string]any, len(resources))
	for i, r := range resources {
		obj, err := sanitize.ObjectOf(r.YNode())
		if err != nil {
			return nil, fmt.Errorf("read rendered object %d: %w", i+1, err)
		}
		k, err := keyOfObject(obj)
		if err != nil {
			return nil, fmt.Errorf("rendered object %d: %w", i+1, err)
		}
		if _, dup := out[k]; dup {
			return nil, fmt.Errorf("%s is rendered twice (at two API versions)", k)
		}
		out[k] = obj
	}
	return out, nil
}

// keyOfObject is the Key of obj: its apiVersion's group, kind, metadata.namespace and name.
func keyOfObject(obj map[string]any) (Key, error) {
	apiVersion, _ := obj["apiVersion"].(string)
	kind, _ := obj["kind"].(string)
	meta, _ := obj["metadata"].(map[string]any)
	name, _ := meta["name"].(string)
	namespace, _ := meta["namespace"].(string)
	if apiVersion == "" || kind == "" || name == "" {
		return Key{}, errors.New("an object without apiVersion, kind or metadata.name")
	}
	return Key{Group: groupOf(apiVersion), Kind: kind, Namespace: namespace, Name: name}, nil
}

// cleanDir is dir as the file map names folders: "" for the top, no leading ./ or trailing /.
func cleanDir(dir string) string {
	dir = path.Clean(strings.TrimPrefix(dir, "/"))
	if dir == "." {
		return ""
	}
	return dir
}

// showDir names a folder in messages: "." for the top.
func showDir(dir string) string {
	if dir == "" {
		return "."
	}
	return dir
}
