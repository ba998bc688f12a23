package main

import (
	"context"
	"debug/buildinfo"
	"encoding/json"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"golang.org/x/sync/errgroup"
)

// The files and folders of a release under its output folder, besides the chart's and the
// archives' (chart.go, binaries.go) and the krew manifest (krew.go).
const (
	releaseImageDir     = "image"                   // make image's output: the image layout, the SBOM and its artifact
	signaturesDir       = "signatures"              // an OCI layout of the cosign signature and attestation manifests
	checksumsFile       = "checksums.txt"           // sha256sum's format, over every file of the release
	provenanceFile      = "provenance.intoto.jsonl" // the signed provenance, one DSSE envelope per line
	publicKeyFile       = "cosign.pub"              // the public half of the key everything is signed with
	releaseManifestFile = "release.json"            // what release publish pushes (releaseResult)
)

// defaultBinaryPlatforms are the platforms of the CLI binaries and the krew manifest.
var defaultBinaryPlatforms = []string{"linux/amd64", "linux/arm64", "darwin/amd64", "darwin/arm64"}

// releaseOptions says what release build makes.
type releaseOptions struct {
	Image           options  // the image's; its Out is the release's Out
	BinaryPlatforms []string // os/arch of the binaries
	ChartDir        string   // the chart's source folder
	DownloadURL     string   // where the archives will be downloadable: the krew manifest's URIs
	GoFlags         string   // GOFLAGS as the go command reads it (goEnv), for the provenance
	Snapshot        bool     // built although the tag v<version> is not at the commit: a trial
	Key             *signingKey
}

// releaseResult is what a release holds, written as release.json: the names are relative to
// the release's folder, so the folder can move before it is published.
type releaseResult struct {
	Version    string        `json:"version"`
	Revision   string        `json:"revision"`
	Snapshot   bool          `json:"snapshot,omitempty"` // not built at the tag v<version>
	Image      releaseObject `json:"image"`
	SBOM       releaseObject `json:"sbom"`
	Chart      releaseObject `json:"chart"`
	Signatures string        `json:"signatures"` // an OCI layout: each manifest names its tag and repository
	Files      []subject     `json:"files"`      // every file of checksums.txt
	Provenance string        `json:"provenance"`
	PublicKey  string        `json:"publicKey"`

	Compile, Total time.Duration `json:"-"`
}

// releaseObject is one thing release publish pushes: an OCI layout holding it, its digest and
// the repository it was signed for.
type releaseObject struct {
	Repository string  `json:"repository"`
	Tag        string  `json:"tag,omitempty"`
	Digest     v1.Hash `json:"digest"`
	Layout     string  `json:"layout"`
}

// makeRelease builds the release into ro.Image.Out (replaced as a whole) and signs it.
func makeRelease(ctx context.Context, ro releaseOptions) (*releaseResult, error) {
	start := time.Now()
	var err error
	if ro.GoFlags, err = goEnv(ctx, ro.Image.Dir, "GOFLAGS"); err != nil {
		return nil, err
	}
	out := filepath.Clean(ro.Image.Out)
	tmp := out + ".tmp"
	if err := os.RemoveAll(tmp); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		return nil, err
	}
	defer func() { _ = os.RemoveAll(tmp) }()

	imageOptions := ro.Image
	imageOptions.Out = filepath.Join(tmp, releaseImageDir)
	img, err := build(ctx, imageOptions)
	if err != nil {
		return nil, err
	}
	compileMore := time.Now()
	bins, mods, err := releaseBinaries(ctx, ro, img, filepath.Join(tmp, "bin"))
	if err != nil {
		return nil, err
	}
	res := &releaseResult{Version: ro.Image.Version, Revision: ro.Image.Revision, Snapshot: ro.Snapshot, Compile: img.Compile + time.Since(compileMore)}
	if err := packageRelease(ro, tmp, img, bins, mods, res); err != nil {
		return nil, err
	}
	if err := os.RemoveAll(filepath.Join(tmp, "bin")); err != nil {
		return nil, err
	}
	if err := os.RemoveAll(out); err != nil {
		return nil, err
	}
	if err := os.Rename(tmp, out); err != nil {
		return nil, err
	}
	res.Total = time.Since(start)
	return res, nil
}

// releaseBinaries are the binaries of every binary platform: the image's for linux, compiled
// into dir for the others. It returns their modules too.
func releaseBinaries(ctx context.Context, ro releaseOptions, img *result, dir string) (map[string]string, []*moduleSet, error) {
	bins := map[string]string{}
	for _, p := range img.Platforms {
		bins[p.Platform] = p.Binary
	}
	mods := slices.Clone(img.Modules)
	g, gctx := errgroup.WithContext(ctx)
	var extra []string
	for _, p := range ro.BinaryPlatforms {
		if bins[p] == "" {
			bin := filepath.Join(dir, "gitops-reverser-"+strings.ReplaceAll(p, "/", "-"))
			bins[p] = bin
			extra = append(extra, p)
			g.Go(func() error { return compile(gctx, ro.Image, p, bin) })
		}
	}
	if err := g.Wait(); err != nil {
		return nil, nil, err
	}
	for _, p := range extra {
		info, err := buildinfo.ReadFile(bins[p])
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", bins[p], err)
		}
		mods = append(mods, newModuleSet(info))
	}
	return bins, mods, nil
}

// packageRelease writes the archives, the chart, the krew manifest, the checksums, the
// provenance and every signature into dir.
func packageRelease(ro releaseOptions, dir string, img *result, bins map[string]string, mods []*moduleSet, res *releaseResult) error {
	o := ro.Image
	archives, err := archiveBinaries(dir, o.Version, o.Created, ro.BinaryPlatforms, bins)
	if err != nil {
		return err
	}
	chart, err := packageChart(chartOptions{Dir: ro.ChartDir, Out: dir, Version: o.Version, ImageDigest: img.Digest, Created: o.Created})
	if err != nil {
		return err
	}
	krew, err := writeKrewManifest(dir, o.Version, ro.DownloadURL, archives)
	if err != nil {
		return err
	}
	// The SBOM is also at the release's top, as the release page serves it beside the archives.
	if err := copyFile(filepath.Join(dir, releaseImageDir, sbomFile), filepath.Join(dir, sbomFile)); err != nil {
		return err
	}
	files := []string{sbomFile, filepath.Base(chart.Archive), filepath.Base(krew)}
	for _, a := range archives {
		files = append(files, a.Name)
	}
	if res.Files, err = writeChecksums(ro.Key, dir, files); err != nil {
		return err
	}
	res.Image = releaseObject{Repository: o.Repository, Tag: o.Version, Digest: img.Digest, Layout: filepath.Join(releaseImageDir, layoutDir)}
	res.SBOM = releaseObject{Repository: o.Repository, Digest: img.SBOMDigest, Layout: filepath.Join(releaseImageDir, sbomLayoutDir)}
	res.Chart = releaseObject{Repository: chartRepository(o.Repository, chart.Name), Tag: chart.Version, Digest: chart.Digest,
		Layout: filepath.Base(chart.Layout)}
	statement, err := provenanceStatement(provenanceFor(ro, img, mods, res))
	if err != nil {
		return err
	}
	if err := signRelease(ro.Key, dir, img, chart, statement, res); err != nil {
		return err
	}
	return writeJSON(filepath.Join(dir, releaseManifestFile), res)
}

// chartRepository is where the chart goes beside the image: <registry and owner>/charts/<name>,
// where helm push oci://<registry and owner>/charts puts it.
func chartRepository(imageRepository, chartName string) string {
	return path.Join(path.Dir(imageRepository), "charts", chartName)
}

// provenanceFor is what the provenance of the release says: its subjects are the image, the
// chart and every file of checksums.txt; the platform images and the SBOM artifact are its
// byproducts.
func provenanceFor(ro releaseOptions, img *result, mods []*moduleSet, res *releaseResult) provenanceInput {
	o := ro.Image
	in := provenanceInput{Source: o.Source, Revision: o.Revision, Version: o.Version, Snapshot: ro.Snapshot, GoFlags: ro.GoFlags,
		Created: o.Created.Unix(), GoVersion: mods[0].GoVersion, Modules: unionModules(mods)}
	for _, p := range ro.BinaryPlatforms {
		env, args := goBuild(o, p, "gitops-reverser-"+strings.ReplaceAll(p, "/", "-"))
		in.Commands = append(in.Commands, commandLine(env, args))
	}
	in.Subjects = append([]subject{
		{Name: res.Image.Repository, Digest: res.Image.Digest},
		{Name: res.Chart.Repository, Digest: res.Chart.Digest},
	}, res.Files...)
	for _, p := range img.Platforms {
		in.Byproducts = append(in.Byproducts, subject{Name: res.Image.Repository + " " + p.Platform, Digest: p.Digest})
	}
	in.Byproducts = append(in.Byproducts, subject{Name: res.SBOM.Repository + " SBOM", Digest: res.SBOM.Digest})
	return in
}

func writeJSON(file string, v any) error {
	raw, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(file, append(raw, '\n'), 0o644)
}

func copyFile(from, to string) error {
	data, err := os.ReadFile(from)
	if err != nil {
		return err
	}
	return os.WriteFile(to, data, 0o644)
}
