package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"debug/buildinfo"
	"debug/elf"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// newPlatformImage is the image of one binary: from nothing, one layer holding only the binary,
// run as imageUser. It refuses a binary that is not a static build for platform, since the image
// has no libc, and returns the binary's Go modules for the SBOM.
func newPlatformImage(o options, platform, bin string) (v1.Image, *moduleSet, error) {
	mods, err := checkStatic(bin, platform)
	if err != nil {
		return nil, nil, err
	}
	layer, err := binaryLayer(bin)
	if err != nil {
		return nil, nil, err
	}
	created := v1.Time{Time: o.Created}
	img := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	img, err = mutate.Append(img, mutate.Addendum{
		Layer:     layer,
		MediaType: types.OCILayer,
		History:   v1.History{Created: created, CreatedBy: "scripts/release: the daemon binary as " + entrypoint},
	})
	if err != nil {
		return nil, nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture, _ = strings.Cut(platform, "/")
	cf.Created = created
	cf.Config = v1.Config{User: imageUser, Entrypoint: []string{entrypoint}, Labels: o.labels()}
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		return nil, nil, err
	}
	return mutate.Annotations(img, o.annotations()).(v1.Image), mods, nil
}

// checkStatic reads the binary's build info and ELF header: a Go program for platform, built
// without cgo and without a dynamic loader. It returns the modules the build info lists.
func checkStatic(bin, platform string) (*moduleSet, error) {
	info, err := buildinfo.ReadFile(bin)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", bin, err)
	}
	settings := map[string]string{}
	for _, s := range info.Settings {
		settings[s.Key] = s.Value
	}
	if got := settings["GOOS"] + "/" + settings["GOARCH"]; got != platform {
		return nil, fmt.Errorf("%s is built for %s, not %s", bin, got, platform)
	}
	if settings["CGO_ENABLED"] != "0" {
		return nil, fmt.Errorf("%s is built with cgo; the image has no libc", bin)
	}
	f, err := elf.Open(bin)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return nil, fmt.Errorf("%s is dynamically linked; the image has no libc", bin)
		}
	}
	return newModuleSet(info), nil
}

// binaryLayer is a gzip layer holding the binary at entrypoint, owned by root, mode 0755, dated
// the Unix epoch: the same bytes every time for the same binary. gzip's default level: the best
// one saves 0.4% of the daemon's layer for three times the time.
func binaryLayer(bin string) (v1.Layer, error) {
	data, err := os.ReadFile(bin)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	hdr := &tar.Header{
		Typeflag: tar.TypeReg,
		Name:     strings.TrimPrefix(entrypoint, "/"),
		Mode:     0o755,
		Size:     int64(len(data)),
		ModTime:  time.Unix(0, 0),
		Format:   tar.FormatUSTAR,
	}
	if err := tw.WriteHeader(hdr); err != nil {
		return nil, err
	}
	if _, err := tw.Write(data); err != nil {
		return nil, err
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	tarBytes := buf.Bytes()
	opener := func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(tarBytes)), nil }
	return tarball.LayerFromOpener(opener,
		tarball.WithMediaType(types.OCILayer),
		tarball.WithCompressionLevel(gzip.DefaultCompression),
		tarball.WithCompressedCaching)
}
