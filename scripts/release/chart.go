package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// chartLayoutDir is the OCI layout under chartOptions.Out that holds the chart's manifest.
const chartLayoutDir = "chart"

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
	if err := checkSemver(o.Version); err != nil {
		return nil, fmt.Errorf("chart: %w", err)
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
