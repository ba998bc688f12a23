package main

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/partial"
)

// The annotations of a manifest in the signatures layout: its tag, and which of the release's
// repositories it goes to (image or chart).
const (
	refNameAnnotation    = "org.opencontainers.image.ref.name"
	repositoryAnnotation = "dev.configbutler.release/repository"
)

// writeChecksums writes checksums.txt over files (named relative to dir), in sha256sum's format
// and sorted by name, with its signature in the two forms cosign verify-blob reads. It returns
// the files with their digests.
func writeChecksums(k *signingKey, dir string, files []string) ([]subject, error) {
	files = slices.Sorted(slices.Values(files))
	var list bytes.Buffer
	var subjects []subject
	for _, name := range files {
		data, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			return nil, err
		}
		sum := sha256.Sum256(data)
		d := v1.Hash{Algorithm: "sha256", Hex: fmt.Sprintf("%x", sum)}
		subjects = append(subjects, subject{Name: filepath.ToSlash(name), Digest: d})
		fmt.Fprintf(&list, "%s  %s\n", d.Hex, filepath.ToSlash(name))
	}
	sig, bundle, err := blobSignature(k, list.Bytes())
	if err != nil {
		return nil, err
	}
	for name, data := range map[string][]byte{checksumsFile: list.Bytes(), checksumsFile + ".sig": sig, checksumsFile + ".sigstore.json": bundle} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			return nil, err
		}
	}
	sum := sha256.Sum256(list.Bytes())
	return append(subjects, subject{Name: checksumsFile, Digest: v1.Hash{Algorithm: "sha256", Hex: fmt.Sprintf("%x", sum)}}), nil
}

// signedManifest is one manifest of the signatures layout.
type signedManifest struct {
	repository string // "image" or "chart"
	tag        string
	image      v1.Image
}

// signRelease signs the image index and the chart, attests the provenance on both and the SBOM
// on the image, and writes the signatures layout, the provenance file and the public key.
func signRelease(k *signingKey, dir string, img *result, chart *chartResult, provenance []byte, res *releaseResult) error {
	sbom, err := os.ReadFile(filepath.Join(dir, sbomFile))
	if err != nil {
		return err
	}
	sbomStmt, err := sbomStatement(subject{Name: res.Image.Repository, Digest: img.Digest}, sbom)
	if err != nil {
		return err
	}
	chartSubject, err := partial.Descriptor(chart.Image)
	if err != nil {
		return err
	}
	var manifests []signedManifest
	var envelope []byte
	for _, s := range []struct {
		repository, name string
		subject          v1.Descriptor
		atts             []attestation
	}{
		{"image", res.Image.Repository, img.Index, []attestation{{slsaProvenanceType, provenance}, {spdxPredicateType, sbomStmt}}},
		{"chart", res.Chart.Repository, *chartSubject, []attestation{{slsaProvenanceType, provenance}}},
	} {
		sig, err := signatureImage(k, s.name, s.subject)
		if err != nil {
			return err
		}
		att, envelopes, err := attestationImage(k, s.subject, s.atts...)
		if err != nil {
			return err
		}
		if envelope == nil {
			envelope = envelopes[0] // the image's provenance: the file holds it
		}
		manifests = append(manifests, signedManifest{s.repository, cosignTag(s.subject.Digest, "sig"), sig},
			signedManifest{s.repository, cosignTag(s.subject.Digest, "att"), att})
	}
	if err := writeSignatures(filepath.Join(dir, signaturesDir), manifests); err != nil {
		return err
	}
	res.Signatures, res.Provenance, res.PublicKey = signaturesDir, provenanceFile, publicKeyFile
	if err := os.WriteFile(filepath.Join(dir, provenanceFile), append(envelope, '\n'), 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, publicKeyFile), k.PublicPEM, 0o644)
}

// writeSignatures writes the manifests into an OCI layout, each named by its tag and repository.
func writeSignatures(dir string, manifests []signedManifest) error {
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return fmt.Errorf("write the signatures: %w", err)
	}
	for _, m := range manifests {
		err := p.AppendImage(m.image, layout.WithAnnotations(map[string]string{refNameAnnotation: m.tag, repositoryAnnotation: m.repository}))
		if err != nil {
			return fmt.Errorf("write the signatures: %w", err)
		}
	}
	return nil
}
