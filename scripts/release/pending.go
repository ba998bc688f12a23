package main

// Stubs of what the helpers write (chart.go, binaries.go, krew.go); removed when they land.

import (
	"errors"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

type chartOptions struct {
	Dir         string
	Out         string
	Version     string
	ImageDigest v1.Hash
	Created     time.Time
}

type chartResult struct {
	Name          string
	Version       string
	Archive       string
	ArchiveDigest v1.Hash
	Layout        string
	Digest        v1.Hash
	Image         v1.Image
}

func packageChart(o chartOptions) (*chartResult, error) { return nil, errors.New("pending") }

type binaryArchive struct {
	Platform string
	Name     string
	Path     string
	Digest   v1.Hash
}

func archiveBinaries(out, version string, created time.Time, platforms []string, bins map[string]string) ([]binaryArchive, error) {
	return nil, errors.New("pending")
}

func writeKrewManifest(out, version, downloadURL string, archives []binaryArchive) (string, error) {
	return "", errors.New("pending")
}
