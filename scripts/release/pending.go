package main

// Stubs of what the helpers write (chart.go, binaries.go, krew.go); removed when they land.

import (
	"errors"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

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
