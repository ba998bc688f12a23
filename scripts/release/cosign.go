package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/secure-systems-lab/go-securesystemslib/dsse"
	bundlepb "github.com/sigstore/protobuf-specs/gen/pb-go/bundle/v1"
	commonpb "github.com/sigstore/protobuf-specs/gen/pb-go/common/v1"
	"github.com/sigstore/sigstore/pkg/signature/payload"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

// What cosign writes beside an image, in the layout every cosign verifier, Kyverno and Sigstore's
// policy-controller read: a manifest tagged sha256-<hex>.sig holding the signature, and one tagged
// sha256-<hex>.att holding the attestations, one layer each. cosign 3 reads these too when it
// finds no Sigstore bundle. Each manifest also names the signed manifest as its subject, so a
// registry with the OCI referrers API lists it under the image's digest.
const (
	simpleSigningMediaType = "application/vnd.dev.cosign.simplesigning.v1+json"
	dsseMediaType          = "application/vnd.dsse.envelope.v1+json"
	signatureAnnotation    = "dev.cosignproject.cosign/signature"
	predicateAnnotation    = "predicateType"
	inTotoPayloadType      = "application/vnd.in-toto+json"
	bundleMediaType        = "application/vnd.dev.sigstore.bundle.v0.3+json"
)

// cosignLayer is one layer of a signature or attestation manifest.
type cosignLayer struct {
	payload     []byte
	mediaType   types.MediaType
	annotations map[string]string
}

// cosignTag is the tag cosign gives the signatures (suffix "sig") or attestations ("att") of
// the manifest with digest d.
func cosignTag(d v1.Hash, suffix string) string {
	return d.Algorithm + "-" + d.Hex + "." + suffix
}

// signatureImage is cosign sign's signature of subject: the simple signing payload naming
// repository and the subject's digest, and its signature, in the layer's annotation.
func signatureImage(k *signingKey, repository string, subject v1.Descriptor) (v1.Image, error) {
	ref, err := name.NewDigest(repository + "@" + subject.Digest.String())
	if err != nil {
		return nil, fmt.Errorf("sign %s: %w", repository, err)
	}
	body, err := json.Marshal(payload.Cosign{Image: ref})
	if err != nil {
		return nil, err
	}
	sig, err := k.sign(body)
	if err != nil {
		return nil, fmt.Errorf("sign %s: %w", ref, err)
	}
	return cosignImage(subject, cosignLayer{payload: body, mediaType: simpleSigningMediaType,
		annotations: map[string]string{signatureAnnotation: base64.StdEncoding.EncodeToString(sig)}})
}

// attestation is an in-toto statement to attest: its predicate type and the statement's JSON.
type attestation struct {
	PredicateType string
	Statement     []byte
}

// attestationImage is cosign attest's manifest of subject: one DSSE envelope per statement,
// signed with k, each layer annotated with its predicate type. It returns the envelopes too.
func attestationImage(k *signingKey, subject v1.Descriptor, atts ...attestation) (v1.Image, [][]byte, error) {
	signer, err := dsse.NewEnvelopeSigner(k)
	if err != nil {
		return nil, nil, err
	}
	var layers []cosignLayer
	var envelopes [][]byte
	for _, a := range atts {
		env, err := signer.SignPayload(context.Background(), inTotoPayloadType, a.Statement)
		if err != nil {
			return nil, nil, fmt.Errorf("sign the %s statement: %w", a.PredicateType, err)
		}
		raw, err := json.Marshal(env)
		if err != nil {
			return nil, nil, err
		}
		envelopes = append(envelopes, raw)
		layers = append(layers, cosignLayer{payload: raw, mediaType: dsseMediaType,
			annotations: map[string]string{signatureAnnotation: "", predicateAnnotation: a.PredicateType}})
	}
	img, err := cosignImage(subject, layers...)
	return img, envelopes, err
}

// cosignImage is the manifest cosign writes: OCI, an empty OCI config, the layers as they are,
// and subject as its subject.
func cosignImage(subject v1.Descriptor, layers ...cosignLayer) (v1.Image, error) {
	img := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	for _, l := range layers {
		var err error
		img, err = mutate.Append(img, mutate.Addendum{Layer: static.NewLayer(l.payload, l.mediaType), Annotations: l.annotations})
		if err != nil {
			return nil, err
		}
	}
	return mutate.Subject(img, subject).(v1.Image), nil
}

// blobSignature is what cosign sign-blob writes for data: the signature in base64 (for
// cosign verify-blob --signature) and a Sigstore bundle holding it with the public key's hint
// and no transparency log entry (for --bundle, cosign 3's way).
func blobSignature(k *signingKey, data []byte) (sig, bundle []byte, err error) {
	raw, err := k.sign(data)
	if err != nil {
		return nil, nil, err
	}
	digest := sha256.Sum256(data)
	b := &bundlepb.Bundle{
		MediaType: bundleMediaType,
		VerificationMaterial: &bundlepb.VerificationMaterial{
			Content: &bundlepb.VerificationMaterial_PublicKey{PublicKey: &commonpb.PublicKeyIdentifier{Hint: k.hint()}},
		},
		Content: &bundlepb.Bundle_MessageSignature{MessageSignature: &commonpb.MessageSignature{
			MessageDigest: &commonpb.HashOutput{Algorithm: commonpb.HashAlgorithm_SHA2_256, Digest: digest[:]},
			Signature:     raw,
		}},
	}
	if bundle, err = compactProtoJSON(b); err != nil {
		return nil, nil, err
	}
	return []byte(base64.StdEncoding.EncodeToString(raw)), bundle, nil
}

// compactProtoJSON is m in protobuf's JSON form without its deliberately unstable spacing, so
// the same message always gives the same bytes.
func compactProtoJSON(m proto.Message) ([]byte, error) {
	raw, err := protojson.Marshal(m)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
