package main

import (
	"archive/tar"
	"compress/gzip"
	"crypto/sha256"
	"debug/buildinfo"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// cliBinary is the binary's name in every archive, at its root: the krew manifest's bin, and the
// name people install it under (docs/cli.md).
const cliBinary = "gitops-reverser"

// binaryArchive is one platform's archive of the gitops-reverser binary.
type binaryArchive struct {
	Platform string  // os/arch, e.g. darwin/arm64
	Name     string  // the file name under the output folder: gitops-reverser_<version>_<os>_<arch>.tar.gz
	Path     string  // its path
	Digest   v1.Hash // sha256 of the archive
}

// archiveFile is one regular file of an archive: its name in the archive, its mode, and the file
// on disk that holds its content.
type archiveFile struct {
	Name   string
	Mode   int64
	Source string
}

// archiveBinaries packs each platform's binary (bins: os/arch → path) into a reproducible
// tar.gz under out, in the order of platforms, holding `gitops-reverser` (mode 0755) at its root
// and nothing else: the repository has no LICENSE file to ship beside it (krew's index wants one,
// see krew.go).
func archiveBinaries(out, version string, created time.Time, platforms []string, bins map[string]string) ([]binaryArchive, error) {
	if err := checkSemver(version); err != nil {
		return nil, err
	}
	if err := checkBinaries(platforms, bins); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return nil, fmt.Errorf("create %s: %w", out, err)
	}
	archives := make([]binaryArchive, 0, len(platforms))
	for _, platform := range platforms {
		goos, goarch, _ := splitPlatform(platform)
		a := binaryArchive{Platform: platform, Name: fmt.Sprintf("%s_%s_%s_%s.tar.gz", cliBinary, version, goos, goarch)}
		a.Path = filepath.Join(out, a.Name)
		var err error
		if a.Digest, err = writeArchive(a.Path, created, []archiveFile{{Name: cliBinary, Mode: 0o755, Source: bins[platform]}}); err != nil {
			return nil, fmt.Errorf("archive the binary for %s: %w", platform, err)
		}
		archives = append(archives, a)
	}
	return archives, nil
}

// checkBinaries checks, before any archive is written, that each platform is os/arch, listed
// once, and has a binary that Go built for it: a binary packed under the wrong platform would
// reach people who cannot run it.
func checkBinaries(platforms []string, bins map[string]string) error {
	if len(platforms) == 0 {
		return errors.New("no platforms to archive")
	}
	seen := map[string]bool{}
	for _, platform := range platforms {
		if goos, _, err := splitPlatform(platform); err != nil {
			return err
		} else if goos == "windows" {
			return fmt.Errorf("platform %s: a Windows binary must be named %s.exe, which the archives do not do yet", platform, cliBinary)
		}
		if seen[platform] {
			return fmt.Errorf("platform %s is listed twice", platform)
		}
		seen[platform] = true
		bin, ok := bins[platform]
		if !ok {
			return fmt.Errorf("no binary for platform %s", platform)
		}
		if built, err := builtFor(bin); err != nil {
			return fmt.Errorf("the binary for %s: %w", platform, err)
		} else if built != platform {
			return fmt.Errorf("the binary for %s, %s, is built for %s", platform, bin, built)
		}
	}
	return nil
}

// builtFor is the os/arch Go built the binary at path for, from its build information.
func builtFor(path string) (string, error) {
	info, err := buildinfo.ReadFile(path)
	if err != nil {
		return "", err
	}
	var goos, goarch string
	for _, s := range info.Settings {
		switch s.Key {
		case "GOOS":
			goos = s.Value
		case "GOARCH":
			goarch = s.Value
		}
	}
	return goos + "/" + goarch, nil
}

// splitPlatform splits os/arch, refusing anything else (a variant such as linux/arm/v7 has no
// place in the archive's name or in krew's selector).
func splitPlatform(platform string) (goos, goarch string, err error) {
	goos, goarch, ok := strings.Cut(platform, "/")
	if !ok || goos == "" || goarch == "" || strings.Contains(goarch, "/") {
		return "", "", fmt.Errorf("platform %q is not os/arch", platform)
	}
	return goos, goarch, nil
}

// writeArchive writes files, sorted by name, as a tar.gz at path and returns its sha256. The same
// files give the same bytes: every entry is a regular file owned by 0:0 without user or group
// names, dated created, in the USTAR format (no PAX records with access times), and the gzip
// header has neither a file name nor a time. A failed write leaves no file behind.
func writeArchive(path string, created time.Time, files []archiveFile) (v1.Hash, error) {
	f, err := os.Create(path)
	if err != nil {
		return v1.Hash{}, err
	}
	h := sha256.New()
	err = writeTarGz(io.MultiWriter(f, h), created, files)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = os.Remove(path) // a half-written archive must not be published
		return v1.Hash{}, err
	}
	return v1.Hash{Algorithm: "sha256", Hex: hex.EncodeToString(h.Sum(nil))}, nil
}

// writeTarGz writes the tar.gz of files to w (see writeArchive). gzip's default level, as for the
// image's layer: the best one saves little for much more time.
func writeTarGz(w io.Writer, created time.Time, files []archiveFile) error {
	sorted := slices.Clone(files)
	slices.SortFunc(sorted, func(a, b archiveFile) int { return strings.Compare(a.Name, b.Name) })
	zw, err := gzip.NewWriterLevel(w, gzip.DefaultCompression)
	if err != nil {
		return err
	}
	tw := tar.NewWriter(zw)
	for _, file := range sorted {
		if err := addArchiveFile(tw, created, file); err != nil {
			return fmt.Errorf("add %s: %w", file.Name, err)
		}
	}
	return errors.Join(tw.Close(), zw.Close())
}

// addArchiveFile writes one file's header and content to tw.
func addArchiveFile(tw *tar.Writer, created time.Time, file archiveFile) error {
	src, err := os.Open(file.Source)
	if err != nil {
		return err
	}
	defer func() { _ = src.Close() }() // read only: a close error loses nothing
	info, err := src.Stat()
	if err != nil {
		return err
	}
	if !info.Mode().IsRegular() {
		return fmt.Errorf("%s is not a regular file", file.Source)
	}
	hdr := &tar.Header{
		Typeflag: tar.TypeReg,
		Name:     file.Name,
		Mode:     file.Mode,
		Size:     info.Size(),
		ModTime:  created.Truncate(time.Second),
		Format:   tar.FormatUSTAR,
	}
	if err := tw.WriteHeader(hdr); err != nil {
		return err
	}
	n, err := io.Copy(tw, src)
	if err == nil && n != info.Size() {
		err = fmt.Errorf("%s changed while it was read", file.Source)
	}
	return err
}
