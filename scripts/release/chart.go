package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/partial"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
	yamlv3 "go.yaml.in/yaml/v3"
	"sigs.k8s.io/yaml"
)

// What helm push writes (helm.sh/helm/v3/pkg/registry, constants.go): the manifest's config is
// the chart's metadata as JSON and its one layer is the chart's archive.
const (
	helmConfigMediaType = "application/vnd.cncf.helm.config.v1+json"
	helmChartMediaType  = "application/vnd.cncf.helm.chart.content.v1.tar+gzip"
)

// chartLayoutDir is the OCI layout under chartOptions.Out that holds the chart's manifest.
const chartLayoutDir = "chart"

// chartVersionPattern is SemVer 2.0 without build metadata: Helm wants a chart version to be
// semver, and a "+" can be neither in an OCI tag (the image's tag is the same version) nor in the
// app.kubernetes.io/version label the chart sets from appVersion.
var chartVersionPattern = regexp.MustCompile(`^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)` +
	`(-(0|[1-9]\d*|\d*[A-Za-z-][0-9A-Za-z-]*)(\.(0|[1-9]\d*|\d*[A-Za-z-][0-9A-Za-z-]*))*)?$`)

// chartOptions says how to package the chart.
type chartOptions struct {
	Dir         string    // the chart's source folder (deploy/helm/gitops-reverser)
	Out         string    // the folder the archive and the layout are written into (exists already)
	Version     string    // the release's version, semver without a leading v: the chart's version and appVersion
	ImageDigest v1.Hash   // the image index the chart pins: values image.tag becomes "<Version>@<digest>"
	Created     time.Time // every timestamp: tar headers, the manifest's org.opencontainers.image.created
}

// chartResult says what packageChart wrote.
type chartResult struct {
	Name          string   // the chart's name (from Chart.yaml): gitops-reverser
	Version       string   // the chart's version, the OCI tag
	Archive       string   // <Out>/<name>-<version>.tgz, what helm package would write
	ArchiveDigest v1.Hash  // sha256 of the archive
	Layout        string   // <Out>/chart: an OCI image layout whose index.json lists the chart's manifest alone, annotated org.opencontainers.image.ref.name=<version>
	Digest        v1.Hash  // the chart manifest's digest: what helm pull oci://…@sha256:… resolves
	Image         v1.Image // the manifest as go-containerregistry's v1.Image, so publish can remote.Write it
}

// chartFile is one file of the chart, named by its path relative to the chart's folder.
type chartFile struct {
	name string
	data []byte
}

// packageChart writes the chart at o.Dir, pinned to o.Version and the image o.ImageDigest, as
// the archive helm package would make and as the OCI artifact helm push would make, with every
// timestamp o.Created: the same inputs give the same bytes.
func packageChart(o chartOptions) (*chartResult, error) {
	if !chartVersionPattern.MatchString(o.Version) {
		return nil, fmt.Errorf("chart version %q is not semver MAJOR.MINOR.PATCH[-PRERELEASE] "+
			"(no leading v, no +build)", o.Version)
	}
	if o.ImageDigest.Algorithm != "sha256" || len(o.ImageDigest.Hex) != 64 {
		return nil, fmt.Errorf("chart: the image digest %q is not a sha256 digest", o.ImageDigest)
	}
	files, err := readChart(o.Dir)
	if err != nil {
		return nil, err
	}
	if err := pinChart(files, o); err != nil {
		return nil, err
	}
	meta, err := chartMetadataOf(files[0].data)
	if err != nil {
		return nil, err
	}
	archive, err := chartArchive(meta.Name, files, o.Created)
	if err != nil {
		return nil, err
	}
	res := &chartResult{Name: meta.Name, Version: meta.Version,
		Archive: filepath.Join(o.Out, meta.Name+"-"+meta.Version+".tgz")}
	if res.ArchiveDigest, _, err = v1.SHA256(bytes.NewReader(archive)); err != nil {
		return nil, err
	}
	if err := writeFileAtomic(res.Archive, archive); err != nil {
		return nil, fmt.Errorf("write the chart archive: %w", err)
	}
	if res.Image, err = newChartImage(meta, archive, o.Created); err != nil {
		return nil, err
	}
	if res.Digest, err = res.Image.Digest(); err != nil {
		return nil, err
	}
	res.Layout = filepath.Join(o.Out, chartLayoutDir)
	if err := writeChartLayout(res.Layout, res.Image, meta.Version); err != nil {
		return nil, err
	}
	return res, nil
}

// pinChart sets the version and appVersion of Chart.yaml (files[0]) to o.Version, and image.tag
// of values.yaml (files[1]) to "<Version>@<digest>", so the chart installs exactly that image.
func pinChart(files []chartFile, o chartOptions) error {
	var err error
	for _, key := range []string{"version", "appVersion"} {
		if files[0].data, err = setYAMLScalar(files[0].data, []string{key}, o.Version); err != nil {
			return fmt.Errorf("chart: Chart.yaml: %w", err)
		}
	}
	tag := o.Version + "@" + o.ImageDigest.String()
	if files[1].data, err = setYAMLScalar(files[1].data, []string{"image", "tag"}, tag); err != nil {
		return fmt.Errorf("chart: values.yaml: %w", err)
	}
	return nil
}

// readChart reads the files helm package would put in the archive, in the order it writes them:
// Chart.yaml, values.yaml, values.schema.json, the templates, then every other file not ignored
// by .helmignore, each group in the order of a lexical walk (helm's chartutil.Save).
func readChart(dir string) ([]chartFile, error) {
	rules, err := readHelmignore(dir)
	if err != nil {
		return nil, err
	}
	var first, templates, rest []chartFile
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil || rel == "." {
			return err
		}
		f, skip, err := readChartEntry(p, filepath.ToSlash(rel), d, rules)
		switch {
		case skip:
			return filepath.SkipDir
		case err != nil || f == nil:
			return err
		case f.name == "Chart.yaml" || f.name == "values.yaml" || f.name == "values.schema.json":
			first = append(first, *f)
		case strings.HasPrefix(f.name, "templates/"):
			templates = append(templates, *f)
		default:
			rest = append(rest, *f)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("chart: read %s: %w", dir, err)
	}
	return orderChart(first, templates, rest)
}

// readChartEntry is the file at p (rel inside the chart), or nil for a folder or an ignored
// file; skip says p is an ignored folder. It refuses what helm would treat specially and this
// packager does not do: dependencies, symlinks, other irregular files.
func readChartEntry(p, rel string, d fs.DirEntry, rules []ignoreRule) (f *chartFile, skip bool, err error) {
	if ignored(rules, rel, d.IsDir()) {
		return nil, d.IsDir(), nil
	}
	switch {
	case rel == "charts" || rel == "Chart.lock" || rel == "requirements.yaml" || rel == "requirements.lock":
		return nil, false, fmt.Errorf("%s: chart dependencies are not supported", rel)
	case d.IsDir():
		return nil, false, nil
	case !d.Type().IsRegular():
		return nil, false, fmt.Errorf("%s is not a regular file (symlinks are not supported)", rel)
	}
	data, err := os.ReadFile(p)
	if err != nil {
		return nil, false, err
	}
	// helm's loader drops a UTF-8 byte order mark from every file.
	return &chartFile{name: rel, data: bytes.TrimPrefix(data, []byte("\xef\xbb\xbf"))}, false, nil
}

// orderChart joins the groups of readChart, checking Chart.yaml and values.yaml are there.
func orderChart(first, templates, rest []chartFile) ([]chartFile, error) {
	order := map[string]int{"Chart.yaml": 0, "values.yaml": 1, "values.schema.json": 2}
	sorted := make([]chartFile, 3)
	for _, f := range first {
		sorted[order[f.name]] = f
	}
	if sorted[0].name == "" || sorted[1].name == "" {
		return nil, errors.New("chart: the chart has no Chart.yaml or no values.yaml")
	}
	if sorted[2].name == "" {
		sorted = sorted[:2]
	}
	return append(append(sorted, templates...), rest...), nil
}

// ignoreRule is one line of a .helmignore (helm.sh/helm/v3/pkg/ignore): a path.Match pattern
// matched against the base name, or against the whole path when it holds a slash.
type ignoreRule struct {
	pattern    string
	dirOnly    bool // the pattern ended with a slash: it matches folders only
	structural bool // the pattern holds a slash: it matches the path from the chart's root
}

// readHelmignore reads the chart's .helmignore, if it has one, and adds helm's default rule that
// ignores dotfiles in templates/. Negated patterns are refused: their meaning in helm is subtle
// and the chart does not need them.
func readHelmignore(dir string) ([]ignoreRule, error) {
	data, err := os.ReadFile(filepath.Join(dir, ".helmignore"))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("chart: %w", err)
	}
	rules := []ignoreRule{}
	lines := strings.Split(string(bytes.TrimPrefix(data, []byte("\xef\xbb\xbf"))), "\n")
	for _, line := range append(lines, "templates/.?*") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if strings.Contains(line, "**") || strings.HasPrefix(line, "!") {
			return nil, fmt.Errorf("chart: .helmignore: pattern %q is not supported (no ** or !)", line)
		}
		if _, err := path.Match(line, "abc"); err != nil {
			return nil, fmt.Errorf("chart: .helmignore: pattern %q: %w", line, err)
		}
		r := ignoreRule{pattern: strings.TrimSuffix(line, "/"), dirOnly: strings.HasSuffix(line, "/")}
		r.structural = strings.Contains(r.pattern, "/")
		r.pattern = strings.TrimPrefix(r.pattern, "/")
		rules = append(rules, r)
	}
	return rules, nil
}

// ignored says whether name (a slash-separated path inside the chart) matches a rule.
func ignored(rules []ignoreRule, name string, isDir bool) bool {
	for _, r := range rules {
		if r.dirOnly && !isDir {
			continue
		}
		subject := name
		if !r.structural {
			subject = path.Base(name)
		}
		if ok, _ := path.Match(r.pattern, subject); ok {
			return true
		}
	}
	return false
}

// chartArchive is the gzip'd tar helm package writes: every file under name/, mode 0644, owned
// by 0:0 with no user or group names, no folder entries; every mtime is created, and the gzip
// header has neither a name nor an mtime.
func chartArchive(name string, files []chartFile, created time.Time) ([]byte, error) {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for _, f := range files {
		h := &tar.Header{Typeflag: tar.TypeReg, Name: name + "/" + f.name, Mode: 0o644,
			Size: int64(len(f.data)), ModTime: created.UTC().Truncate(time.Second)}
		if err := tw.WriteHeader(h); err != nil {
			return nil, fmt.Errorf("chart archive: %w", err)
		}
		if _, err := tw.Write(f.data); err != nil {
			return nil, fmt.Errorf("chart archive: %w", err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("chart archive: %w", err)
	}
	if err := zw.Close(); err != nil {
		return nil, fmt.Errorf("chart archive: %w", err)
	}
	return buf.Bytes(), nil
}

// writeFileAtomic writes data to name through a temporary file beside it.
func writeFileAtomic(name string, data []byte) error {
	tmp := name + ".tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return err
	}
	if err := os.Rename(tmp, name); err != nil {
		_ = os.Remove(tmp)
		return err
	}
	return nil
}

// writeChartLayout writes the OCI layout at dir, replacing it, with the chart's manifest alone
// in index.json, named by its tag, as crane push and oras want it.
func writeChartLayout(dir string, img v1.Image, version string) error {
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("write the chart layout: %w", err)
	}
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return fmt.Errorf("write the chart layout: %w", err)
	}
	err = p.AppendImage(img, layout.WithAnnotations(map[string]string{
		"org.opencontainers.image.ref.name": version,
	}))
	if err != nil {
		return fmt.Errorf("write the chart layout: %w", err)
	}
	return nil
}

// chartMetadata is Chart.yaml as helm reads it (helm.sh/helm/v3/pkg/chart.Metadata): the fields
// in its order with its JSON names, so the config blob is byte for byte the one helm push writes.
type chartMetadata struct {
	Name         string            `json:"name,omitempty"`
	Home         string            `json:"home,omitempty"`
	Sources      []string          `json:"sources,omitempty"`
	Version      string            `json:"version,omitempty"`
	Description  string            `json:"description,omitempty"`
	Keywords     []string          `json:"keywords,omitempty"`
	Maintainers  []chartMaintainer `json:"maintainers,omitempty"`
	Icon         string            `json:"icon,omitempty"`
	APIVersion   string            `json:"apiVersion,omitempty"`
	Condition    string            `json:"condition,omitempty"`
	Tags         string            `json:"tags,omitempty"`
	AppVersion   string            `json:"appVersion,omitempty"`
	Deprecated   bool              `json:"deprecated,omitempty"`
	Annotations  map[string]string `json:"annotations,omitempty"`
	KubeVersion  string            `json:"kubeVersion,omitempty"`
	Dependencies []json.RawMessage `json:"dependencies,omitempty"`
	Type         string            `json:"type,omitempty"`
}

// chartMaintainer is one of Chart.yaml's maintainers.
type chartMaintainer struct {
	Name  string `json:"name,omitempty"`
	Email string `json:"email,omitempty"`
	URL   string `json:"url,omitempty"`
}

// chartMetadataOf reads Chart.yaml as helm's loader does, sanitized as helm's Validate does it.
func chartMetadataOf(data []byte) (*chartMetadata, error) {
	var m chartMetadata
	if err := yaml.Unmarshal(data, &m); err != nil {
		return nil, fmt.Errorf("chart: Chart.yaml: %w", err)
	}
	switch {
	case m.APIVersion != "v2":
		return nil, fmt.Errorf("chart: Chart.yaml: apiVersion %q, want v2", m.APIVersion)
	case m.Name == "" || m.Name == "." || m.Name == ".." || path.Base(m.Name) != m.Name:
		return nil, fmt.Errorf("chart: Chart.yaml: name %q is not a chart name", m.Name)
	case len(m.Dependencies) > 0:
		return nil, errors.New("chart: Chart.yaml: chart dependencies are not supported")
	}
	for _, s := range []*string{&m.Name, &m.Description, &m.Home, &m.Icon, &m.Condition, &m.Tags,
		&m.AppVersion, &m.KubeVersion} {
		*s = sanitizeChartString(*s)
	}
	for i := range m.Sources {
		m.Sources[i] = sanitizeChartString(m.Sources[i])
	}
	for i := range m.Keywords {
		m.Keywords[i] = sanitizeChartString(m.Keywords[i])
	}
	for i, mt := range m.Maintainers {
		m.Maintainers[i] = chartMaintainer{Name: sanitizeChartString(mt.Name),
			Email: sanitizeChartString(mt.Email), URL: sanitizeChartString(mt.URL)}
	}
	return &m, nil
}

// sanitizeChartString is helm's sanitizeString: white space becomes a space, unprintable runes go.
func sanitizeChartString(s string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case unicode.IsSpace(r):
			return ' '
		case unicode.IsPrint(r):
			return r
		}
		return -1
	}, s)
}

// chartManifest is an OCI image manifest as helm push writes it (helm's registry.Client.Push,
// through oras): no mediaType field, descriptors of media type, digest and size alone.
type chartManifest struct {
	SchemaVersion int               `json:"schemaVersion"`
	Config        chartDescriptor   `json:"config"`
	Layers        []chartDescriptor `json:"layers"`
	Annotations   map[string]string `json:"annotations,omitempty"`
}

// chartDescriptor is a descriptor of chartManifest.
type chartDescriptor struct {
	MediaType string `json:"mediaType"`
	Digest    string `json:"digest"`
	Size      int64  `json:"size"`
}

// chartImage is the chart's manifest as a go-containerregistry image: its config is the chart's
// metadata and its one layer the archive.
type chartImage struct {
	manifest, config []byte
	layer            v1.Layer
}

var _ partial.CompressedImageCore = chartImage{}

func (c chartImage) RawConfigFile() ([]byte, error)      { return c.config, nil }
func (c chartImage) MediaType() (types.MediaType, error) { return types.OCIManifestSchema1, nil }
func (c chartImage) RawManifest() ([]byte, error)        { return c.manifest, nil }

func (c chartImage) LayerByDigest(h v1.Hash) (partial.CompressedLayer, error) {
	if d, err := c.layer.Digest(); err != nil || d != h {
		return nil, fmt.Errorf("the chart artifact has no layer %s", h)
	}
	return c.layer, nil
}

// newChartImage is the manifest helm push would push for archive, created at created.
func newChartImage(meta *chartMetadata, archive []byte, created time.Time) (v1.Image, error) {
	config, err := json.Marshal(meta)
	if err != nil {
		return nil, fmt.Errorf("chart config: %w", err)
	}
	describe := func(mediaType string, data []byte) (chartDescriptor, error) {
		h, n, err := v1.SHA256(bytes.NewReader(data))
		return chartDescriptor{MediaType: mediaType, Digest: h.String(), Size: n}, err
	}
	m := chartManifest{SchemaVersion: 2, Annotations: chartAnnotations(meta, created)}
	if m.Config, err = describe(helmConfigMediaType, config); err != nil {
		return nil, err
	}
	layer, err := describe(helmChartMediaType, archive)
	if err != nil {
		return nil, err
	}
	m.Layers = []chartDescriptor{layer}
	raw, err := json.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("chart manifest: %w", err)
	}
	return partial.CompressedToImage(chartImage{manifest: raw, config: config,
		layer: static.NewLayer(archive, helmChartMediaType)})
}

// chartAnnotations are the manifest annotations helm push sets (helm's generateOCIAnnotations):
// the chart's description, name, version, home, first source and maintainers, then the chart's
// own annotations, which may not replace the title or the version.
func chartAnnotations(meta *chartMetadata, created time.Time) map[string]string {
	a := map[string]string{}
	add := func(key, value string) {
		if strings.TrimSpace(value) != "" {
			a[key] = value
		}
	}
	add("org.opencontainers.image.description", meta.Description)
	add("org.opencontainers.image.title", meta.Name)
	add("org.opencontainers.image.version", meta.Version)
	add("org.opencontainers.image.url", meta.Home)
	add("org.opencontainers.image.created", created.UTC().Format(time.RFC3339))
	if len(meta.Sources) > 0 {
		add("org.opencontainers.image.source", meta.Sources[0])
	}
	var authors []string
	for _, m := range meta.Maintainers {
		author := m.Name
		if m.Email != "" {
			author += " (" + m.Email + ")"
		}
		authors = append(authors, author)
	}
	add("org.opencontainers.image.authors", strings.Join(authors, ", "))
	for k, v := range meta.Annotations {
		if k != "org.opencontainers.image.title" && k != "org.opencontainers.image.version" {
			a[k] = v
		}
	}
	return a
}

// setYAMLScalar sets the string at keys (a path of block mapping keys) of the YAML document data
// to value by rewriting the value's text on its line alone, so comments and layout stay. It
// refuses a missing key or a value that is not a one-line string, and checks the result decodes
// as the original with that one value changed.
func setYAMLScalar(data []byte, keys []string, value string) ([]byte, error) {
	name := strings.Join(keys, ".")
	node, err := findYAMLScalar(data, keys)
	if err != nil {
		return nil, err
	}
	lines := bytes.SplitAfter(data, []byte("\n"))
	line := string(lines[node.Line-1])
	start := runeOffset(line, node.Column-1)
	end, err := scalarEnd(line, start, node.Style)
	if err != nil {
		return nil, fmt.Errorf("%s (line %d): %w", name, node.Line, err)
	}
	text := strconv.Quote(value)
	if node.Style == 0 { // plain stays plain; checkYAMLEdit refuses a value that would not read back
		text = value
	}
	lines[node.Line-1] = []byte(line[:start] + text + line[end:])
	out := bytes.Join(lines, nil)
	if err := checkYAMLEdit(data, out, keys, value); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return out, nil
}

// findYAMLScalar is the value node at keys, which must be a one-line string in block mappings.
func findYAMLScalar(data []byte, keys []string) (*yamlv3.Node, error) {
	var doc yamlv3.Node
	if err := yamlv3.Unmarshal(data, &doc); err != nil {
		return nil, err
	}
	if doc.Kind != yamlv3.DocumentNode || len(doc.Content) != 1 {
		return nil, errors.New("not one YAML document")
	}
	n := doc.Content[0]
	for i, key := range keys {
		name := strings.Join(keys[:i+1], ".")
		if n.Kind != yamlv3.MappingNode || n.Style&yamlv3.FlowStyle != 0 {
			return nil, fmt.Errorf("%s: its parent is not a block mapping", name)
		}
		var next *yamlv3.Node
		for j := 0; j+1 < len(n.Content); j += 2 {
			if n.Content[j].Value == key {
				next = n.Content[j+1]
			}
		}
		if next == nil {
			return nil, fmt.Errorf("no key %s", name)
		}
		n = next
	}
	if n.Kind != yamlv3.ScalarNode || n.Tag != "!!str" || n.Style&(yamlv3.LiteralStyle|yamlv3.FoldedStyle) != 0 {
		return nil, fmt.Errorf("%s is not a one-line string (line %d)", strings.Join(keys, "."), n.Line)
	}
	return n, nil
}

// runeOffset is the byte offset of the col-th rune of line (yaml.v3 counts columns in runes).
func runeOffset(line string, col int) int {
	for i := range line {
		if col == 0 {
			return i
		}
		col--
	}
	return len(line)
}

// scalarEnd is the byte offset just past the scalar of the given style that starts at start.
func scalarEnd(line string, start int, style yamlv3.Style) (int, error) {
	switch {
	case style&yamlv3.DoubleQuotedStyle != 0:
		for i := start + 1; i < len(line); i++ {
			switch line[i] {
			case '\\':
				i++
			case '"':
				return i + 1, nil
			}
		}
	case style&yamlv3.SingleQuotedStyle != 0:
		for i := start + 1; i < len(line); i++ {
			if line[i] == '\'' && i+1 < len(line) && line[i+1] == '\'' {
				i++
			} else if line[i] == '\'' {
				return i + 1, nil
			}
		}
	case style == 0:
		end := len(strings.TrimRight(line, "\r\n"))
		for i := start + 1; i < end; i++ {
			if line[i] == '#' && (line[i-1] == ' ' || line[i-1] == '\t') {
				end = i
				break
			}
		}
		return start + len(strings.TrimRight(line[start:end], " \t")), nil
	}
	return 0, errors.New("the value does not end on its line, or its style is not supported")
}

// checkYAMLEdit checks that after decodes as before with the string at keys set to value.
func checkYAMLEdit(before, after []byte, keys []string, value string) error {
	var want, got map[string]any
	if err := yamlv3.Unmarshal(before, &want); err != nil {
		return err
	}
	if err := yamlv3.Unmarshal(after, &got); err != nil {
		return fmt.Errorf("the edit breaks the YAML: %w", err)
	}
	m := want
	for _, k := range keys[:len(keys)-1] {
		m, _ = m[k].(map[string]any)
	}
	if m == nil {
		return errors.New("its parent is not a mapping of strings")
	}
	m[keys[len(keys)-1]] = value
	if !reflect.DeepEqual(want, got) {
		return errors.New("the edit would change more than this value")
	}
	return nil
}
