package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/partial"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// sbomMediaType is the SBOM layer's media type and the artifact's artifactType.
const sbomMediaType = "application/spdx+json"

// emptyConfig is the content of the OCI empty descriptor, the config of an artifact that has none.
var emptyConfig = []byte("{}")

// artifact is an OCI manifest of one layer that is no container image: the SBOM (whose subject is
// the image index, so registries with the referrers API list it under the index's digest), or the
// Helm chart (whose config is the chart's metadata).
type artifact struct {
	manifest, config []byte
	layer            v1.Layer
}

var _ partial.CompressedImageCore = artifact{}

func (a artifact) RawConfigFile() ([]byte, error)      { return a.config, nil }
func (a artifact) MediaType() (types.MediaType, error) { return types.OCIManifestSchema1, nil }
func (a artifact) RawManifest() ([]byte, error)        { return a.manifest, nil }

func (a artifact) LayerByDigest(h v1.Hash) (partial.CompressedLayer, error) {
	if d, err := a.layer.Digest(); err != nil || d != h {
		return nil, fmt.Errorf("the artifact has no layer %s", h)
	}
	return a.layer, nil
}

// newSBOMArtifact is the artifact holding sbom that refers to subject.
func newSBOMArtifact(sbom []byte, subject v1.Descriptor, created time.Time) (v1.Image, error) {
	layer := static.NewLayer(sbom, sbomMediaType)
	digest, err := layer.Digest()
	if err != nil {
		return nil, err
	}
	configDigest, _, err := v1.SHA256(bytes.NewReader(emptyConfig))
	if err != nil {
		return nil, err
	}
	m := v1.Manifest{
		SchemaVersion: 2,
		MediaType:     types.OCIManifestSchema1,
		ArtifactType:  sbomMediaType,
		Config: v1.Descriptor{MediaType: types.OCIEmptyJSON, Size: int64(len(emptyConfig)),
			Digest: configDigest, Data: emptyConfig},
		Layers: []v1.Descriptor{{MediaType: sbomMediaType, Size: int64(len(sbom)), Digest: digest,
			Annotations: map[string]string{"org.opencontainers.image.title": sbomFile}}},
		Subject:     &subject,
		Annotations: map[string]string{"org.opencontainers.image.created": created.UTC().Format(time.RFC3339)},
	}
	raw, err := json.Marshal(m)
	if err != nil {
		return nil, err
	}
	return partial.CompressedToImage(artifact{manifest: raw, config: emptyConfig, layer: layer})
}

// writeSBOMArtifact writes the SBOM artifact alone into an OCI layout at dir, so crane push can
// push it, and returns its digest.
func writeSBOMArtifact(dir string, sbom []byte, subject v1.Descriptor, created time.Time) (v1.Hash, error) {
	img, err := newSBOMArtifact(sbom, subject, created)
	if err != nil {
		return v1.Hash{}, err
	}
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return v1.Hash{}, fmt.Errorf("write SBOM layout: %w", err)
	}
	if err := p.AppendImage(img); err != nil {
		return v1.Hash{}, fmt.Errorf("write SBOM layout: %w", err)
	}
	return img.Digest()
}
