package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/partial"
	"golang.org/x/sync/errgroup"
)

// The image as the chart (deploy/helm/gitops-reverser, values image.repository, the tag defaulting
// to the chart's appVersion) and deploy/deployment.yaml name it; a test keeps them in line.
const (
	defaultRepository = "ghcr.io/configbutler/gitops-reverser"
	defaultSource     = "https://github.com/configbutler/gitops-reverser"
	// imageUser is the uid:gid the daemon runs as (the "nonroot" of distroless images, which the
	// image used to be based on), the runAsUser and runAsGroup of the shipped manifests.
	imageUser = "65532:65532"
	// entrypoint is the binary's path in the image, the image's only file.
	entrypoint = "/gitops-reverser"
	// versionVariable is what -ldflags -X sets to the version: the daemon's --version.
	versionVariable = "github.com/configbutler/gitops-reverser/daemon.Version"
)

// defaultPlatforms are the platforms of the image index.
var defaultPlatforms = []string{"linux/amd64", "linux/arm64"}

// The OCI layouts and files under options.Out.
const (
	layoutDir     = "oci"            // the image index, to push with crane push
	sbomFile      = "sbom.spdx.json" // the SBOM, SPDX 2.3 JSON
	sbomLayoutDir = "sbom"           // the SBOM as an OCI artifact whose subject is the index
)

// tagPattern is the grammar of an image tag; the version is one.
var tagPattern = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$`)

// options says what to build and where.
type options struct {
	Dir        string    // the module root
	Out        string    // output directory, replaced as a whole
	Repository string    // image name without tag
	Version    string    // the daemon's version and the image's tag
	Revision   string    // the commit
	Source     string    // the source repository's URL
	Created    time.Time // the time every timestamp in the image and SBOM says
	Platforms  []string  // os/arch
	Log        io.Writer // the go build commands, as they run
}

// platformImage is one platform's image of the index.
type platformImage struct {
	Platform   string  // os/arch
	Binary     string  // the daemon binary, under Out
	BinarySize int64   // bytes
	LayerSize  int64   // the compressed layer's bytes: what a pull downloads
	Digest     v1.Hash // the image manifest's digest
}

// result says what build wrote and how long it took.
type result struct {
	Repository, Version string
	Digest              v1.Hash       // the image index's digest
	Index               v1.Descriptor // the image index's descriptor: what signatures refer to
	Layout              string        // the OCI layout holding the index
	SBOMFile            string
	SBOMLayout          string  // the OCI layout holding the SBOM artifact
	SBOMDigest          v1.Hash // the SBOM artifact manifest's digest
	Platforms           []platformImage
	Modules             []*moduleSet // what each platform's binary links, from its build info
	Compile, Assemble   time.Duration
}

// Reference is the image's name with its tag and digest: what to pin in the chart or deploy/.
func (r *result) Reference() string {
	return fmt.Sprintf("%s:%s@%s", r.Repository, r.Version, r.Digest)
}

// build compiles the daemon for every platform and writes the image index, the SBOM and the SBOM
// artifact under o.Out, replacing what was there.
func build(ctx context.Context, o options) (*result, error) {
	if err := o.validate(); err != nil {
		return nil, err
	}
	o.Out = filepath.Clean(o.Out) // so the scratch directory beside it is not inside it
	tmp := o.Out + ".tmp"
	if err := os.RemoveAll(tmp); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		return nil, err
	}
	defer func() { _ = os.RemoveAll(tmp) }()

	res := &result{Repository: o.Repository, Version: o.Version}
	start := time.Now()
	bins := make([]string, len(o.Platforms))
	g, gctx := errgroup.WithContext(ctx)
	for i, p := range o.Platforms {
		bins[i] = filepath.Join(tmp, "gitops-reverser-"+strings.ReplaceAll(p, "/", "-"))
		g.Go(func() error { return compile(gctx, o, p, bins[i]) })
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	res.Compile = time.Since(start)

	start = time.Now()
	if err := assemble(o, tmp, bins, res); err != nil {
		return nil, err
	}
	if err := os.RemoveAll(o.Out); err != nil {
		return nil, err
	}
	if err := os.Rename(tmp, o.Out); err != nil {
		return nil, err
	}
	res.Assemble = time.Since(start)
	return res, nil
}

// assemble makes one image per binary, the index of them, the SBOM and its artifact, in dir.
func assemble(o options, dir string, bins []string, res *result) error {
	idx := mutate.Annotations(empty.Index, o.annotations()).(v1.ImageIndex)
	var modules []*moduleSet
	for i, bin := range bins {
		img, mods, err := newPlatformImage(o, o.Platforms[i], bin)
		if err != nil {
			return err
		}
		modules = append(modules, mods)
		res.Modules = append(res.Modules, mods)
		pi := platformImage{Platform: o.Platforms[i], Binary: filepath.Join(o.Out, filepath.Base(bin))}
		if pi.Digest, err = img.Digest(); err != nil {
			return err
		}
		if pi.BinarySize, pi.LayerSize, err = sizes(bin, img); err != nil {
			return err
		}
		res.Platforms = append(res.Platforms, pi)
		goos, goarch, _ := strings.Cut(o.Platforms[i], "/")
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{
			Add:        img,
			Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: goos, Architecture: goarch}},
		})
	}
	var err error
	if res.Digest, err = idx.Digest(); err != nil {
		return err
	}
	if err := writeLayout(filepath.Join(dir, layoutDir), idx, o); err != nil {
		return err
	}
	res.Layout = filepath.Join(o.Out, layoutDir)

	subject, err := partial.Descriptor(idx)
	if err != nil {
		return err
	}
	res.Index = *subject
	sbom, err := writeSBOM(filepath.Join(dir, sbomFile), o, res.Digest, modules)
	if err != nil {
		return err
	}
	res.SBOMFile = filepath.Join(o.Out, sbomFile)
	if res.SBOMDigest, err = writeSBOMArtifact(filepath.Join(dir, sbomLayoutDir), sbom, *subject, o.Created); err != nil {
		return err
	}
	res.SBOMLayout = filepath.Join(o.Out, sbomLayoutDir)
	return nil
}

// writeLayout writes an OCI image layout whose index.json lists exactly the image index (as
// crane push wants it), named by its tag and, for containerd, by its full name.
func writeLayout(dir string, idx v1.ImageIndex, o options) error {
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return fmt.Errorf("write OCI layout: %w", err)
	}
	err = p.AppendIndex(idx, layout.WithAnnotations(map[string]string{
		"org.opencontainers.image.ref.name": o.Version,
		"io.containerd.image.name":          o.Repository + ":" + o.Version,
	}))
	if err != nil {
		return fmt.Errorf("write OCI layout: %w", err)
	}
	return nil
}

// sizes are the size of the binary and of the image's compressed layers.
func sizes(bin string, img v1.Image) (int64, int64, error) {
	st, err := os.Stat(bin)
	if err != nil {
		return 0, 0, err
	}
	layers, err := img.Layers()
	if err != nil {
		return 0, 0, err
	}
	var total int64
	for _, l := range layers {
		n, err := l.Size()
		if err != nil {
			return 0, 0, err
		}
		total += n
	}
	return st.Size(), total, nil
}

// labels are the image's OCI labels; the index and manifests carry them as annotations too.
func (o options) labels() map[string]string {
	l := map[string]string{
		"org.opencontainers.image.title":       "gitops-reverser",
		"org.opencontainers.image.description": "Mirrors a live Kubernetes cluster into Git, one canonical YAML file per object.",
		"org.opencontainers.image.source":      o.Source,
		"org.opencontainers.image.url":         o.Source,
		"org.opencontainers.image.version":     o.Version,
		"org.opencontainers.image.created":     o.Created.UTC().Format(time.RFC3339),
	}
	if o.Revision != "" {
		l["org.opencontainers.image.revision"] = o.Revision
	}
	return l
}

func (o options) annotations() map[string]string { return o.labels() }

func (o options) validate() error {
	var errs []error
	if !tagPattern.MatchString(o.Version) {
		errs = append(errs, fmt.Errorf("version %q is not an image tag (letters, digits, '_', '.', '-')", o.Version))
	}
	if o.Repository == "" || strings.Contains(o.Repository, "@") {
		errs = append(errs, fmt.Errorf("repository %q: want a name without tag or digest", o.Repository))
	}
	if o.Out == "" || filepath.Clean(o.Out) == "." {
		errs = append(errs, errors.New("out: want a directory of its own (it is replaced)"))
	}
	if len(o.Platforms) == 0 {
		errs = append(errs, errors.New("no platforms"))
	}
	seen := map[string]bool{}
	for _, p := range o.Platforms {
		goos, goarch, ok := strings.Cut(p, "/")
		if !ok || goos != "linux" || goarch == "" || strings.Contains(goarch, "/") || seen[p] {
			errs = append(errs, fmt.Errorf("platform %q: want linux/ARCH, each once", p))
		}
		seen[p] = true
	}
	return errors.Join(errs...)
}
