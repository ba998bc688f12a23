package main

import (
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	provenancepb "github.com/in-toto/attestation/go/predicates/provenance/v1"
	intoto "github.com/in-toto/attestation/go/v1"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
)

// The predicate types release attests, as cosign verify-attestation --type names them:
// slsaprovenance1 and spdxjson.
const (
	slsaProvenanceType = "https://slsa.dev/provenance/v1"
	spdxPredicateType  = "https://spdx.dev/Document"
)

// buildType is the URI of the build the provenance describes: docs/release.md says what its
// parameters mean and how to rebuild from them.
const buildType = "https://github.com/configbutler/gitops-reverser/blob/main/docs/release.md#the-build-type"

// builderID names who built: release run on the releaser's machine. It is no hosted build
// platform; the provenance is as trustworthy as the key that signs it, and a rebuild from the
// same commit gives the same digests (docs/release.md).
const builderID = "https://github.com/configbutler/gitops-reverser/blob/main/scripts/release"

// provenanceInput is what the provenance states: what was built from what, and how.
type provenanceInput struct {
	Source, Revision, Version string
	Snapshot                  bool // built with SNAPSHOT=1, away from the tag v<version>
	GoVersion                 string
	GoFlags                   string   // go env GOFLAGS: the environment's or the go env file's
	Commands                  []string // every go build, as a shell runs it
	Created                   int64    // SOURCE_DATE_EPOCH
	Modules                   []module // every module any binary links
	Subjects                  []subject
	Byproducts                []subject
}

// subject is one artifact of the release: a name and its SHA-256.
type subject struct {
	Name   string
	Digest v1.Hash
}

// provenanceStatement is the in-toto statement with a SLSA v1 provenance predicate of the
// release: its subjects are every artifact, and it names the commit, the commands and the Go
// toolchain, and every module with its go.sum hash. No time and no machine goes in, so the same
// commit gives the same statement.
func provenanceStatement(in provenanceInput) ([]byte, error) {
	command := "make release VERSION=" + in.Version
	if in.Snapshot {
		command += " SNAPSHOT=1" // a rebuild of the same commit needs it too
	}
	external, err := structpb.NewStruct(map[string]any{
		"source":  map[string]any{"repository": in.Source, "revision": in.Revision},
		"version": in.Version,
		"command": command,
	})
	if err != nil {
		return nil, err
	}
	internal, err := structpb.NewStruct(map[string]any{
		"goVersion":         in.GoVersion,
		"GOFLAGS":           in.GoFlags,
		"SOURCE_DATE_EPOCH": fmt.Sprint(in.Created),
		"builds":            toAny(in.Commands),
	})
	if err != nil {
		return nil, err
	}
	deps, err := resolvedDependencies(in)
	if err != nil {
		return nil, err
	}
	predicate := &provenancepb.Provenance{
		BuildDefinition: &provenancepb.BuildDefinition{BuildType: buildType, ExternalParameters: external,
			InternalParameters: internal, ResolvedDependencies: deps},
		RunDetails: &provenancepb.RunDetails{
			Builder:    &provenancepb.Builder{Id: builderID, Version: map[string]string{"go": in.GoVersion}},
			Byproducts: descriptors(in.Byproducts),
		},
	}
	if err := predicate.Validate(); err != nil {
		return nil, fmt.Errorf("provenance: %w", err)
	}
	fields, err := asStruct(predicate)
	if err != nil {
		return nil, err
	}
	return statementOf(slsaProvenanceType, in.Subjects, fields)
}

// resolvedDependencies are the build's inputs: the commit, the Go toolchain and every module.
func resolvedDependencies(in provenanceInput) ([]*intoto.ResourceDescriptor, error) {
	deps := []*intoto.ResourceDescriptor{
		{Uri: "git+" + in.Source + "@" + in.Revision, Digest: map[string]string{"gitCommit": in.Revision}},
		{Name: "go", Uri: "pkg:golang/stdlib@" + in.GoVersion},
	}
	for _, m := range in.Modules {
		d := &intoto.ResourceDescriptor{Uri: goPURL(m.Path, m.Version)}
		if m.Sum != "" {
			h1, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(m.Sum, "h1:"))
			if err != nil || !strings.HasPrefix(m.Sum, "h1:") {
				return nil, fmt.Errorf("module %s@%s: go.sum hash %q is not an h1 hash", m.Path, m.Version, m.Sum)
			}
			d.Digest = map[string]string{"dirHash": hex.EncodeToString(h1)}
		}
		deps = append(deps, d)
	}
	return deps, nil
}

// asStruct is a protobuf message as the JSON fields of a predicate.
func asStruct(m proto.Message) (*structpb.Struct, error) {
	raw, err := protojson.Marshal(m)
	if err != nil {
		return nil, err
	}
	fields := &structpb.Struct{}
	if err := protojson.Unmarshal(raw, fields); err != nil {
		return nil, err
	}
	return fields, nil
}

// statementOf is the in-toto v1 statement of a predicate given as JSON fields.
func statementOf(predicateType string, subjects []subject, predicate *structpb.Struct) ([]byte, error) {
	st := &intoto.Statement{Type: intoto.StatementTypeUri, Subject: descriptors(subjects),
		PredicateType: predicateType, Predicate: predicate}
	if err := st.Validate(); err != nil {
		return nil, fmt.Errorf("in-toto statement: %w", err)
	}
	return compactProtoJSON(st)
}

// sbomStatement is the in-toto statement whose predicate is the SPDX document, about the image.
func sbomStatement(image subject, sbom []byte) ([]byte, error) {
	doc := &structpb.Struct{}
	if err := protojson.Unmarshal(sbom, doc); err != nil {
		return nil, fmt.Errorf("the SBOM as a predicate: %w", err)
	}
	return statementOf(spdxPredicateType, []subject{image}, doc)
}

func descriptors(subjects []subject) []*intoto.ResourceDescriptor {
	out := make([]*intoto.ResourceDescriptor, 0, len(subjects))
	for _, s := range subjects {
		out = append(out, &intoto.ResourceDescriptor{Name: s.Name, Digest: map[string]string{s.Digest.Algorithm: s.Digest.Hex}})
	}
	return out
}

func toAny(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}
