package sops

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// DigestAnnotation is the annotation a sealed document carries: a keyed digest of its plaintext,
// recipients and lastmodified time. It is readable (outside data and stringData) and covered by
// the MAC, and it lets the daemon tell, without a key to decrypt, that a file already holds a
// Secret's current content: SOPS encryption is randomised, so the bytes cannot.
const DigestAnnotation = "configbutler.ai/sops-digest"

// MinKeyBytes is the shortest digest key a Sealer accepts.
const MinKeyBytes = 32

// Sealer encrypts Secrets for Git so that an unchanged Secret gives the same file: the document
// it returns carries the keyed digest (DigestAnnotation), and keep tells whether a file Git holds
// already carries the digest of the same plaintext and recipients. The key is secret (the daemon
// keeps it in its own namespace): an unkeyed digest of a low-entropy value could be guessed from
// Git. A document re-encrypted by anyone else (sops edit) has another lastmodified time, so its
// digest no longer matches and the mirror writes the live Secret again.
type Sealer struct {
	key []byte
	now func() time.Time
}

// NewSealer returns a Sealer with the digest key, at least MinKeyBytes long.
func NewSealer(key []byte, now func() time.Time) (*Sealer, error) {
	if len(key) < MinKeyBytes {
		return nil, fmt.Errorf("sops digest key: %d bytes, want at least %d", len(key), MinKeyBytes)
	}
	return &Sealer{key: slices.Clone(key), now: now}, nil
}

// Seal returns plaintext (the canonical YAML of a Secret) as a SOPS document for recipients,
// carrying DigestAnnotation, and keep, which reports whether a document already holds that
// plaintext for those recipients.
func (s *Sealer) Seal(plaintext []byte, recipients []string) ([]byte, func(current []byte) bool, error) {
	recipients = slices.Sorted(slices.Values(recipients))
	now := s.now().UTC().Truncate(time.Second)
	m, err := parseMapping(plaintext)
	if err != nil {
		return nil, nil, fmt.Errorf("seal: %w", err)
	}
	if err := setAnnotation(m, DigestAnnotation, s.digest(now.Format(time.RFC3339), recipients, plaintext)); err != nil {
		return nil, nil, fmt.Errorf("seal: %w", err)
	}
	doc, err := encryptMapping(m, recipients, now)
	if err != nil {
		return nil, nil, err
	}
	keep := func(current []byte) bool {
		lastModified, digest, ok := sealedDigest(current)
		return ok && hmac.Equal([]byte(digest), []byte(s.digest(lastModified, recipients, plaintext)))
	}
	return doc, keep, nil
}

// CheckRecipient is the package's CheckRecipient.
func (s *Sealer) CheckRecipient(r string) error { return CheckRecipient(r) }

// CreationRules is the package's CreationRules.
func (s *Sealer) CreationRules(recipients []string) []byte { return CreationRules(recipients) }

// digest is HMAC-SHA256 under the key of what the document holds.
func (s *Sealer) digest(lastModified string, recipients []string, plaintext []byte) string {
	mac := hmac.New(sha256.New, s.key)
	for _, part := range [][]byte{[]byte("gitops-reverser sops digest v1"), []byte(lastModified),
		[]byte(strings.Join(recipients, "\n")), plaintext} {
		_, _ = fmt.Fprintf(mac, "%d:", len(part)) // a hash never fails to write
		mac.Write(part)
	}
	return base64.RawURLEncoding.EncodeToString(mac.Sum(nil))
}

// sealedDigest reads a document's lastmodified time and DigestAnnotation; ok is false when it is
// not a SOPS document or has no digest.
func sealedDigest(doc []byte) (lastModified, digest string, ok bool) {
	m, err := parseMapping(doc)
	if err != nil {
		return "", "", false
	}
	md, _, err := readMetadata(m)
	if err != nil {
		return "", "", false
	}
	meta := mappingValue(m, "metadata")
	annotations := mappingValue(meta, "annotations")
	d := mappingValue(annotations, DigestAnnotation)
	if d == nil || d.Kind != yaml.ScalarNode {
		return "", "", false
	}
	return md.LastModified, d.Value, true
}

// mappingValue is the value of key in the mapping m; nil when m is not a mapping or lacks it.
func mappingValue(m *yaml.Node, key string) *yaml.Node {
	if m == nil || m.Kind != yaml.MappingNode {
		return nil
	}
	if i := keyIndex(m, key); i >= 0 {
		return m.Content[i+1]
	}
	return nil
}

// setAnnotation sets metadata.annotations[key] = value, creating the mappings as needed and
// keeping the annotations' keys sorted, as canonical YAML has them.
func setAnnotation(m *yaml.Node, key, value string) error {
	meta := mappingValue(m, "metadata")
	if meta == nil || meta.Kind != yaml.MappingNode {
		return errors.New("the document has no metadata mapping")
	}
	annotations := mappingValue(meta, "annotations")
	if annotations == nil {
		annotations = &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
		meta.Content = append(meta.Content, scalar("annotations"), annotations)
	}
	if annotations.Kind != yaml.MappingNode {
		return errors.New("metadata.annotations is not a mapping")
	}
	if i := keyIndex(annotations, key); i >= 0 {
		annotations.Content[i+1] = scalar(value)
		return nil
	}
	at := len(annotations.Content)
	for i := 0; i < len(annotations.Content); i += 2 {
		if annotations.Content[i].Value > key {
			at = i
			break
		}
	}
	annotations.Content = slices.Insert(annotations.Content, at, scalar(key), scalar(value))
	return nil
}

func scalar(v string) *yaml.Node { return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: v} }
