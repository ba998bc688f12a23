package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path"
	"strings"
	"time"
	"unicode"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/partial"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"sigs.k8s.io/yaml"
)

// What helm push writes (helm.sh/helm/v3/pkg/registry, constants.go): the manifest's config is
// the chart's metadata as JSON and its one layer is the chart's archive.
const (
	helmConfigMediaType = "application/vnd.cncf.helm.config.v1+json"
	helmChartMediaType  = "application/vnd.cncf.helm.chart.content.v1.tar+gzip"
)

// writeChartLayout writes the OCI layout at dir, replacing it, with the chart's manifest alone
// in index.json, named by its tag, as crane push and oras want it.
func writeChartLayout(dir string, img v1.Image, version string) error {
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("write the chart layout: %w", err)
	}
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return fmt.Errorf("write the chart layout: %w", err)
	}
	err = p.AppendImage(img, layout.WithAnnotations(map[string]string{
		"org.opencontainers.image.ref.name": version,
	}))
	if err != nil {
		return fmt.Errorf("write the chart layout: %w", err)
	}
	return nil
}

// chartMetadata is Chart.yaml as helm reads it (helm.sh/helm/v3/pkg/chart.Metadata): the fields
// in its order with its JSON names, so the config blob is byte for byte the one helm push writes.
type chartMetadata struct {
	Name         string            `json:"name,omitempty"`
	Home         string            `json:"home,omitempty"`
	Sources      []string          `json:"sources,omitempty"`
	Version      string            `json:"version,omitempty"`
	Description  string            `json:"description,omitempty"`
	Keywords     []string          `json:"keywords,omitempty"`
	Maintainers  []chartMaintainer `json:"maintainers,omitempty"`
	Icon         string            `json:"icon,omitempty"`
	APIVersion   string            `json:"apiVersion,omitempty"`
	Condition    string            `json:"condition,omitempty"`
	Tags         string            `json:"tags,omitempty"`
	AppVersion   string            `json:"appVersion,omitempty"`
	Deprecated   bool              `json:"deprecated,omitempty"`
	Annotations  map[string]string `json:"annotations,omitempty"`
	KubeVersion  string            `json:"kubeVersion,omitempty"`
	Dependencies []json.RawMessage `json:"dependencies,omitempty"`
	Type         string            `json:"type,omitempty"`
}

// chartMaintainer is one of Chart.yaml's maintainers.
type chartMaintainer struct {
	Name  string `json:"name,omitempty"`
	Email string `json:"email,omitempty"`
	URL   string `json:"url,omitempty"`
}

// chartMetadataOf reads Chart.yaml as helm's loader does, sanitized as helm's Validate does it.
func chartMetadataOf(data []byte) (*chartMetadata, error) {
	var m chartMetadata
	if err := yaml.Unmarshal(data, &m); err != nil {
		return nil, fmt.Errorf("chart: Chart.yaml: %w", err)
	}
	switch {
	case m.APIVersion != "v2":
		return nil, fmt.Errorf("chart: Chart.yaml: apiVersion %q, want v2", m.APIVersion)
	case m.Name == "" || m.Name == "." || m.Name == ".." || path.Base(m.Name) != m.Name:
		return nil, fmt.Errorf("chart: Chart.yaml: name %q is not a chart name", m.Name)
	case len(m.Dependencies) > 0:
		return nil, errors.New("chart: Chart.yaml: chart dependencies are not supported")
	}
	for _, s := range []*string{&m.Name, &m.Description, &m.Home, &m.Icon, &m.Condition, &m.Tags,
		&m.AppVersion, &m.KubeVersion} {
		*s = sanitizeChartString(*s)
	}
	for i := range m.Sources {
		m.Sources[i] = sanitizeChartString(m.Sources[i])
	}
	for i := range m.Keywords {
		m.Keywords[i] = sanitizeChartString(m.Keywords[i])
	}
	for i, mt := range m.Maintainers {
		m.Maintainers[i] = chartMaintainer{Name: sanitizeChartString(mt.Name),
			Email: sanitizeChartString(mt.Email), URL: sanitizeChartString(mt.URL)}
	}
	return &m, nil
}

// sanitizeChartString is helm's sanitizeString: white space becomes a space, unprintable runes go.
func sanitizeChartString(s string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case unicode.IsSpace(r):
			return ' '
		case unicode.IsPrint(r):
			return r
		}
		return -1
	}, s)
}

// chartManifest is an OCI image manifest as helm push writes it (helm's registry.Client.Push,
// through oras): no mediaType field, descriptors of media type, digest and size alone.
type chartManifest struct {
	SchemaVersion int               `json:"schemaVersion"`
	Config        chartDescriptor   `json:"config"`
	Layers        []chartDescriptor `json:"layers"`
	Annotations   map[string]string `json:"annotations,omitempty"`
}

// chartDescriptor is a descriptor of chartManifest.
type chartDescriptor struct {
	MediaType string `json:"mediaType"`
	Digest    string `json:"digest"`
	Size      int64  `json:"size"`
}

// newChartImage is the manifest helm push would push for archive, created at created.
func newChartImage(meta *chartMetadata, archive []byte, created time.Time) (v1.Image, error) {
	config, err := json.Marshal(meta)
	if err != nil {
		return nil, fmt.Errorf("chart config: %w", err)
	}
	describe := func(mediaType string, data []byte) (chartDescriptor, error) {
		h, n, err := v1.SHA256(bytes.NewReader(data))
		return chartDescriptor{MediaType: mediaType, Digest: h.String(), Size: n}, err
	}
	m := chartManifest{SchemaVersion: 2, Annotations: chartAnnotations(meta, created)}
	if m.Config, err = describe(helmConfigMediaType, config); err != nil {
		return nil, err
	}
	layer, err := describe(helmChartMediaType, archive)
	if err != nil {
		return nil, err
	}
	m.Layers = []chartDescriptor{layer}
	raw, err := json.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("chart manifest: %w", err)
	}
	return partial.CompressedToImage(artifact{manifest: raw, config: config,
		layer: static.NewLayer(archive, helmChartMediaType)})
}

// chartAnnotations are the manifest annotations helm push sets (helm's generateOCIAnnotations):
// the chart's description, name, version, home, first source and maintainers, then the chart's
// own annotations, which may not replace the title or the version.
func chartAnnotations(meta *chartMetadata, created time.Time) map[string]string {
	a := map[string]string{}
	add := func(key, value string) {
		if strings.TrimSpace(value) != "" {
			a[key] = value
		}
	}
	add("org.opencontainers.image.description", meta.Description)
	add("org.opencontainers.image.title", meta.Name)
	add("org.opencontainers.image.version", meta.Version)
	add("org.opencontainers.image.url", meta.Home)
	add("org.opencontainers.image.created", created.UTC().Format(time.RFC3339))
	if len(meta.Sources) > 0 {
		add("org.opencontainers.image.source", meta.Sources[0])
	}
	var authors []string
	for _, m := range meta.Maintainers {
		author := m.Name
		if m.Email != "" {
			author += " (" + m.Email + ")"
		}
		authors = append(authors, author)
	}
	add("org.opencontainers.image.authors", strings.Join(authors, ", "))
	for k, v := range meta.Annotations {
		if k != "org.opencontainers.image.title" && k != "org.opencontainers.image.version" {
			a[k] = v
		}
	}
	return a
}
