package placement

import (
	"fmt"
	"path"
	"strings"

	"go.yaml.in/yaml/v3"
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

// originAnnotation is the annotation kustomize writes on each object it renders when the
// kustomization asks for buildMetadata: [originAnnotations].
const originAnnotation = "config.kubernetes.io/origin"

// RenderOverlay renders the kustomization in dir of files (Build: in process, nothing fetched,
// no Helm, no plugin) and traces each object to its origin: kustomize is asked, in the render's
// own in-memory copy of the kustomization (never in the file), to annotate every object with the
// file or generator it comes from. The annotations are taken off the objects again, unless the
// kustomization asked for them itself.
func RenderOverlay(files map[string][]byte, dir string) (*Overlay, error) {
	dir = cleanDir(dir)
	f := newBuildFolder(files)
	if err := f.check(dir); err != nil {
		return nil, fmt.Errorf("render the kustomization in %s: %w", showDir(dir), err)
	}
	kpath, k, err := f.kustomization(dir)
	if err != nil {
		return nil, fmt.Errorf("render the kustomization in %s: %w", showDir(dir), err)
	}
	asked := hasString(k.BuildMetadata, types.OriginAnnotations)
	marked, err := withOriginAnnotations(files[kpath], asked)
	if err != nil {
		return nil, fmt.Errorf("render the kustomization in %s: %w", showDir(dir), err)
	}
	f.files = overlaid(files, kpath, marked)
	objects, err := f.render(dir)
	if err != nil {
		return nil, fmt.Errorf("render the kustomization in %s: %w", showDir(dir), err)
	}
	o := &Overlay{Dir: dir, Objects: objects, Origins: make(map[Key]Origin, len(objects)), Files: files, k: k, kpath: kpath}
	for key, obj := range objects {
		o.Origins[key] = originOf(obj, dir, !asked)
	}
	return o, nil
}

// withOriginAnnotations is the kustomization text with buildMetadata asking for origin
// annotations; the same text when it asks already.
func withOriginAnnotations(text []byte, asked bool) ([]byte, error) {
	if asked {
		return text, nil
	}
	var fields map[string]any
	if err := yaml.Unmarshal(text, &fields); err != nil {
		return nil, err
	}
	if fields == nil {
		fields = map[string]any{}
	}
	list, _ := fields["buildMetadata"].([]any)
	fields["buildMetadata"] = append(list, types.OriginAnnotations)
	return yaml.Marshal(fields)
}

// overlaid is files with p's content replaced by data, files itself untouched.
func overlaid(files map[string][]byte, p string, data []byte) map[string][]byte {
	out := make(map[string][]byte, len(files))
	for k, v := range files {
		out[k] = v
	}
	out[p] = data
	return out
}

// originOf reads obj's origin annotation, its paths made repository-relative (kustomize writes
// them relative to the rendered folder), and takes the annotation off when strip is set.
func originOf(obj map[string]any, dir string, strip bool) Origin {
	meta, _ := obj["metadata"].(map[string]any)
	annotations, _ := meta["annotations"].(map[string]any)
	text, _ := annotations[originAnnotation].(string)
	if strip && annotations != nil {
		delete(annotations, originAnnotation)
		if len(annotations) == 0 {
			delete(meta, "annotations")
		}
	}
	var raw struct {
		Path         string `yaml:"path"`
		ConfiguredIn string `yaml:"configuredIn"`
		ConfiguredBy struct {
			Kind string `yaml:"kind"`
		} `yaml:"configuredBy"`
	}
	if yaml.Unmarshal([]byte(text), &raw) != nil {
		return Origin{}
	}
	var o Origin
	if raw.Path != "" {
		o.Path = cleanDir(path.Join(dir, raw.Path))
	}
	if raw.ConfiguredIn != "" {
		o.Generator, o.ConfiguredIn = raw.ConfiguredBy.Kind, cleanDir(path.Join(dir, raw.ConfiguredIn))
	}
	return o
}

func hasString(list []string, s string) bool {
	for _, v := range list {
		if strings.TrimSpace(v) == s {
			return true
		}
	}
	return false
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
