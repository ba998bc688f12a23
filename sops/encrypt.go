package sops

import (
	"crypto/cipher"
	"crypto/rand"
	"errors"
	"fmt"
	"regexp"
	"time"

	"go.yaml.in/yaml/v3"
)

// encryptedRegex is EncryptedRegex compiled.
var encryptedRegex = regexp.MustCompile(EncryptedRegex)

// Encrypt returns doc (a YAML mapping, e.g. a Kubernetes Secret as canonical YAML) as a SOPS
// document: every value under a key matching EncryptedRegex is encrypted (at any depth under it),
// all other keys stay readable; the data key is wrapped for each recipient (age X25519, "age1...");
// now is the lastmodified time. The output is YAML that `sops -d` decrypts back to doc's content.
//
// Key order is kept; comments are dropped. Empty strings stay empty and nulls stay null, as in sops.
func Encrypt(doc []byte, recipients []string, now time.Time) ([]byte, error) {
	m, err := parseMapping(doc)
	if err != nil {
		return nil, fmt.Errorf("sops encrypt: %w", err)
	}
	return encryptMapping(m, recipients, now)
}

// encryptMapping is Encrypt of a parsed document; it encrypts m in place.
func encryptMapping(m *yaml.Node, recipients []string, now time.Time) ([]byte, error) {
	names, parsed, err := sortedRecipients(recipients)
	if err != nil {
		return nil, fmt.Errorf("sops encrypt: %w", err)
	}
	if keyIndex(m, metadataKey) >= 0 {
		return nil, errors.New("sops encrypt: the document already has a top-level sops key")
	}
	dataKey := make([]byte, 32)
	if _, err := rand.Read(dataKey); err != nil {
		return nil, fmt.Errorf("sops encrypt: generate the data key: %w", err)
	}
	gcm, err := newGCM(dataKey)
	if err != nil {
		return nil, fmt.Errorf("sops encrypt: %w", err)
	}
	mac := newMAC(false)
	if err := encryptLeaves(m, rules{encryptedRegex: encryptedRegex}, gcm, mac); err != nil {
		return nil, fmt.Errorf("sops encrypt: %w", err)
	}

	md := metadataOut{
		LastModified:   now.UTC().Format(time.RFC3339),
		EncryptedRegex: EncryptedRegex,
		Version:        formatVersion,
	}
	if md.MAC, err = encryptValue(gcm, mac.sum(), md.LastModified); err != nil {
		return nil, fmt.Errorf("sops encrypt: encrypt the mac: %w", err)
	}
	for i, rcp := range parsed {
		enc, err := wrapKey(rcp, dataKey)
		if err != nil {
			return nil, fmt.Errorf("sops encrypt: recipient %s: %w", names[i], err)
		}
		md.Age = append(md.Age, ageEntry{Recipient: names[i], Enc: enc})
	}
	var mdNode yaml.Node
	if err := mdNode.Encode(md); err != nil {
		return nil, fmt.Errorf("sops encrypt: encode the metadata: %w", err)
	}
	m.Content = append(m.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: metadataKey}, &mdNode)
	out, err := encodeYAML(m, 4)
	if err != nil {
		return nil, fmt.Errorf("sops encrypt: %w", err)
	}
	return out, nil
}

// encryptLeaves replaces every value of m that r says is to be encrypted by its encryption,
// adding each plaintext value to mac as it goes.
func encryptLeaves(m *yaml.Node, r rules, gcm cipher.AEAD, mac *macHash) error {
	return walk(m, nil, func(n *yaml.Node, path []string) error {
		v, err := leafValue(n, path)
		if err != nil || v == nil {
			return err
		}
		enc := r.encrypted(path)
		if err := mac.add(v, enc); err != nil {
			return fmt.Errorf("the value at %q: %w", additionalData(path), err)
		}
		if !enc {
			return nil
		}
		s, err := encryptValue(gcm, v, additionalData(path))
		if err != nil {
			return fmt.Errorf("encrypt the value at %q: %w", additionalData(path), err)
		}
		*n = yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: s}
		return nil
	})
}
