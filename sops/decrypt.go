package sops

import (
	"crypto/cipher"
	"crypto/subtle"
	"errors"
	"fmt"
	"slices"
	"time"

	"go.yaml.in/yaml/v3"
)

// Decrypt returns the plaintext YAML of a SOPS document, given age identities ("AGE-SECRET-KEY-1...").
// It verifies the MAC and fails on any tampering.
//
// It reads documents the sops CLI writes with any of its suffix or regex rules and age recipients
// (not key groups or comment rules). Key order is kept; comments are dropped.
func Decrypt(doc []byte, identities []string) ([]byte, error) {
	m, err := parseMapping(doc)
	if err != nil {
		return nil, fmt.Errorf("sops decrypt: %w", err)
	}
	md, idx, err := readMetadata(m)
	if err != nil {
		return nil, fmt.Errorf("sops decrypt: %w", err)
	}
	if len(md.KeyGroups) > 0 || md.ShamirThreshold > 0 {
		return nil, errors.New("sops decrypt: SOPS documents with key groups are not supported")
	}
	r, err := md.rules()
	if err != nil {
		return nil, fmt.Errorf("sops decrypt: %w", err)
	}
	lastModified, err := time.Parse(time.RFC3339, md.LastModified)
	if err != nil {
		return nil, fmt.Errorf("sops decrypt: the sops metadata's lastmodified: %w", err)
	}
	dataKey, err := unwrapKey(md.Age, identities)
	if err != nil {
		return nil, fmt.Errorf("sops decrypt: %w", err)
	}
	gcm, err := newGCM(dataKey)
	if err != nil {
		return nil, fmt.Errorf("sops decrypt: %w", err)
	}

	m.Content = slices.Delete(m.Content, idx, idx+2)
	mac := newMAC(md.MACOnlyEncrypted)
	if err := decryptLeaves(m, r, gcm, mac); err != nil {
		return nil, fmt.Errorf("sops decrypt: %w", err)
	}

	_, stored, err := decryptValue(gcm, md.MAC, lastModified.Format(time.RFC3339))
	if err != nil {
		return nil, fmt.Errorf("sops decrypt: decrypt the mac: %w", err)
	}
	storedMAC, ok := stored.(string)
	if !ok || subtle.ConstantTimeCompare([]byte(storedMAC), []byte(mac.sum())) != 1 {
		return nil, errors.New("sops decrypt: MAC mismatch: the document was modified or corrupted")
	}
	out, err := encodeYAML(m, 2)
	if err != nil {
		return nil, fmt.Errorf("sops decrypt: %w", err)
	}
	return out, nil
}

// decryptLeaves replaces every value of m that r says is encrypted by its plaintext, adding each
// value to mac as it goes.
func decryptLeaves(m *yaml.Node, r rules, gcm cipher.AEAD, mac *macHash) error {
	return walk(m, nil, func(n *yaml.Node, path []string) error {
		v, err := leafValue(n, path)
		if err != nil || v == nil {
			return err
		}
		enc := r.encrypted(path)
		if enc {
			s, ok := v.(string)
			if !ok {
				return fmt.Errorf("the value at %q should be encrypted but is a %T", additionalData(path), v)
			}
			if _, v, err = decryptValue(gcm, s, additionalData(path)); err != nil {
				return fmt.Errorf("decrypt the value at %q: %w", additionalData(path), err)
			}
			var plain yaml.Node
			if err := plain.Encode(v); err != nil {
				return fmt.Errorf("encode the value at %q: %w", additionalData(path), err)
			}
			*n = plain
		}
		if err := mac.add(v, enc); err != nil {
			return fmt.Errorf("the value at %q: %w", additionalData(path), err)
		}
		return nil
	})
}
