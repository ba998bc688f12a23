package main

import (
	"archive/tar"
	"context"
	"debug/elf"
	"errors"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// readIndex reads the image index back from the OCI layout, checking the layout lists it alone
// (crane push needs that) under its tag.
func readIndex(t testing.TB, res *result) v1.ImageIndex {
	t.Helper()
	outer, err := layout.ImageIndexFromPath(res.Layout)
	if err != nil {
		t.Fatal(err)
	}
	m, err := outer.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Manifests) != 1 || m.Manifests[0].MediaType != types.OCIImageIndex || m.Manifests[0].Digest != res.Digest {
		t.Fatalf("index.json lists %+v, want the image index %s alone", m.Manifests, res.Digest)
	}
	if got := m.Manifests[0].Annotations["org.opencontainers.image.ref.name"]; got != res.Version {
		t.Errorf("the layout names the index %q, want the tag %q", got, res.Version)
	}
	idx, err := outer.ImageIndex(res.Digest)
	if err != nil {
		t.Fatal(err)
	}
	return idx
}

// platformImages are the index's images by os/arch.
func platformImages(t testing.TB, idx v1.ImageIndex) map[string]v1.Image {
	t.Helper()
	m, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	imgs := map[string]v1.Image{}
	for _, d := range m.Manifests {
		if d.Platform == nil || d.MediaType != types.OCIManifestSchema1 {
			t.Fatalf("index entry %+v: want an OCI image manifest with a platform", d)
		}
		img, err := idx.Image(d.Digest)
		if err != nil {
			t.Fatal(err)
		}
		imgs[d.Platform.OS+"/"+d.Platform.Architecture] = img
	}
	return imgs
}

// TestIndexHoldsBothPlatformsRunAsNonroot reads the image back: an index of linux/amd64 and
// linux/arm64, each image running the binary as 65532:65532 with the OCI labels of the build.
func TestIndexHoldsBothPlatformsRunAsNonroot(t *testing.T) {
	res := sharedBuild(t)
	o := testOptions("")
	idx := readIndex(t, res)
	imgs := platformImages(t, idx)
	if got := slices.Sorted(maps.Keys(imgs)); !slices.Equal(got, []string{"linux/amd64", "linux/arm64"}) {
		t.Fatalf("index platforms %v, want linux/amd64 and linux/arm64", got)
	}
	wantLabels := map[string]string{
		"org.opencontainers.image.source":   "https://github.com/configbutler/gitops-reverser",
		"org.opencontainers.image.version":  "1.2.3-test",
		"org.opencontainers.image.revision": o.Revision,
		"org.opencontainers.image.created":  "2023-11-14T22:13:20Z",
	}
	idxManifest, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	checkLabels(t, "index annotations", idxManifest.Annotations, wantLabels)
	for platform, img := range imgs {
		cf, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		if got := cf.OS + "/" + cf.Architecture; got != platform {
			t.Errorf("%s: config says %s", platform, got)
		}
		if cf.Config.User != "65532:65532" {
			t.Errorf("%s: user %q, want 65532:65532", platform, cf.Config.User)
		}
		if !slices.Equal(cf.Config.Entrypoint, []string{"/gitops-reverser"}) || len(cf.Config.Cmd) > 0 {
			t.Errorf("%s: entrypoint %q cmd %q, want [/gitops-reverser] alone", platform, cf.Config.Entrypoint, cf.Config.Cmd)
		}
		if !cf.Created.Equal(o.Created) {
			t.Errorf("%s: created %s, want the source date %s", platform, cf.Created, o.Created)
		}
		checkLabels(t, platform+" labels", cf.Config.Labels, wantLabels)
		files := layerFiles(t, img)
		if len(files) != 1 || files[0].Name != "gitops-reverser" {
			t.Errorf("%s: layer holds %v, want the binary alone (no shell, nothing else)", platform, fileNames(files))
			continue
		}
		f := files[0]
		if f.Typeflag != tar.TypeReg || f.Mode != 0o755 || f.Uid != 0 || f.Gid != 0 || f.ModTime.Unix() != 0 {
			t.Errorf("%s: %s mode %o uid %d gid %d mtime %s, want a root-owned 0755 file dated the epoch",
				platform, f.Name, f.Mode, f.Uid, f.Gid, f.ModTime)
		}
	}
}

func checkLabels(t *testing.T, what string, got, want map[string]string) {
	t.Helper()
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: %s = %q, want %q", what, k, got[k], v)
		}
	}
}

// TestDaemonFromTheImageRuns takes the daemon out of the amd64 image (this machine's) and runs
// it: a static binary that prints the build's version and its flags.
func TestDaemonFromTheImageRuns(t *testing.T) {
	res := sharedBuild(t)
	img := platformImages(t, readIndex(t, res))["linux/amd64"]
	bin := filepath.Join(t.TempDir(), "gitops-reverser")
	extractFile(t, img, "gitops-reverser", bin)

	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Errorf("the image's daemon is dynamically linked; the image has no libc")
		}
	}
	out, err := exec.Command(bin, "--version").CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "gitops-reverser version 1.2.3-test" {
		t.Errorf("gitops-reverser --version: %v\n%s\nwant: gitops-reverser version 1.2.3-test", err, out)
	}
	out, err = exec.Command(bin, "--help").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--webhook-bind-address") || !strings.Contains(string(out), "--version") {
		t.Errorf("gitops-reverser --help: %v\n%s", err, out)
	}
}

// TestSameSourcesSameDigest builds a second time, compiling again: the index, every image and the
// SBOM have the same digests, so anyone can check a pushed image against the commit.
func TestSameSourcesSameDigest(t *testing.T) {
	first := sharedBuild(t)
	second, err := build(context.Background(), testOptions(filepath.Join(t.TempDir(), "image")))
	if err != nil {
		t.Fatal(err)
	}
	if second.Digest != first.Digest || second.SBOMDigest != first.SBOMDigest {
		t.Errorf("second build: index %s, SBOM %s; first: %s, %s", second.Digest, second.SBOMDigest, first.Digest, first.SBOMDigest)
	}
	for i := range first.Platforms {
		if a, b := first.Platforms[i], second.Platforms[i]; a.Digest != b.Digest {
			t.Errorf("%s: image %s, then %s", a.Platform, a.Digest, b.Digest)
		}
	}
	a, err := os.ReadFile(first.SBOMFile)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(second.SBOMFile)
	if err != nil {
		t.Fatal(err)
	}
	if string(a) != string(b) {
		t.Errorf("the SBOM files differ")
	}
}

// TestRefusesWhatItCannotShip: a binary for another platform than its slot, a version that is not
// an image tag, an output directory that is the working directory.
func TestRefusesWhatItCannotShip(t *testing.T) {
	res := sharedBuild(t)
	amd64 := res.Platforms[0]
	if amd64.Platform != "linux/amd64" {
		t.Fatalf("first platform %s", amd64.Platform)
	}
	if _, err := checkStatic(amd64.Binary, "linux/arm64"); err == nil || !strings.Contains(err.Error(), "built for linux/amd64") {
		t.Errorf("amd64 binary as linux/arm64: %v, want refused", err)
	}
	for _, o := range []options{
		{Out: "x", Repository: "r", Version: "1.0 beta", Platforms: defaultPlatforms},
		{Out: ".", Repository: "r", Version: "1", Platforms: defaultPlatforms},
		{Out: "x", Repository: "r@sha256:00", Version: "1", Platforms: defaultPlatforms},
		{Out: "x", Repository: "r", Version: "1", Platforms: []string{"darwin/arm64"}},
	} {
		if err := o.validate(); err == nil {
			t.Errorf("options %+v: no error", o)
		}
	}
}

// layerFiles lists the headers of every layer's entries.
func layerFiles(t testing.TB, img v1.Image) []*tar.Header {
	t.Helper()
	var hdrs []*tar.Header
	walkLayers(t, img, func(h *tar.Header, _ io.Reader) { hdrs = append(hdrs, h) })
	return hdrs
}

// extractFile writes the file name from img's layers to dst, executable.
func extractFile(t testing.TB, img v1.Image, name, dst string) {
	t.Helper()
	found := false
	walkLayers(t, img, func(h *tar.Header, r io.Reader) {
		if h.Name != name {
			return
		}
		found = true
		f, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.Copy(f, r); err != nil {
			t.Fatal(err)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
	})
	if !found {
		t.Fatalf("no %s in the image", name)
	}
}

func walkLayers(t testing.TB, img v1.Image, visit func(*tar.Header, io.Reader)) {
	t.Helper()
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range layers {
		rc, err := l.Uncompressed()
		if err != nil {
			t.Fatal(err)
		}
		tr := tar.NewReader(rc)
		for {
			h, err := tr.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			visit(h, tr)
		}
		_ = rc.Close()
	}
}

func fileNames(hdrs []*tar.Header) []string {
	names := make([]string, len(hdrs))
	for i, h := range hdrs {
		names[i] = h.Name
	}
	return names
}
