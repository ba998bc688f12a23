package sops

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strings"

	"filippo.io/age"
	"filippo.io/age/armor"
	"go.yaml.in/yaml/v3"
)

// ageEntry is one age recipient of the metadata with the data key wrapped for it.
type ageEntry struct {
	Recipient string `yaml:"recipient"`
	Enc       string `yaml:"enc"`
}

// metadataOut is the `sops` mapping Encrypt writes, in sops's key order.
type metadataOut struct {
	Age            []ageEntry `yaml:"age"`
	LastModified   string     `yaml:"lastmodified"`
	MAC            string     `yaml:"mac"`
	EncryptedRegex string     `yaml:"encrypted_regex"`
	Version        string     `yaml:"version"`
}

// metadataIn is the part of a `sops` mapping Decrypt understands, plus what it refuses.
type metadataIn struct {
	Age                     []ageEntry  `yaml:"age"`
	LastModified            string      `yaml:"lastmodified"`
	MAC                     string      `yaml:"mac"`
	UnencryptedSuffix       string      `yaml:"unencrypted_suffix"`
	EncryptedSuffix         string      `yaml:"encrypted_suffix"`
	UnencryptedRegex        string      `yaml:"unencrypted_regex"`
	EncryptedRegex          string      `yaml:"encrypted_regex"`
	UnencryptedCommentRegex string      `yaml:"unencrypted_comment_regex"`
	EncryptedCommentRegex   string      `yaml:"encrypted_comment_regex"`
	MACOnlyEncrypted        bool        `yaml:"mac_only_encrypted"`
	KeyGroups               []yaml.Node `yaml:"key_groups"`
	ShamirThreshold         int         `yaml:"shamir_threshold"`
	Version                 string      `yaml:"version"`
}

// readMetadata returns the decoded `sops` mapping of the document mapping m and its key index.
func readMetadata(m *yaml.Node) (metadataIn, int, error) {
	i := keyIndex(m, metadataKey)
	if i < 0 || m.Content[i+1].Kind != yaml.MappingNode {
		return metadataIn{}, -1, errors.New("not a SOPS document: no top-level sops mapping")
	}
	var md metadataIn
	if err := m.Content[i+1].Decode(&md); err != nil {
		return metadataIn{}, -1, fmt.Errorf("decode the sops metadata: %w", err)
	}
	if md.MAC == "" {
		return metadataIn{}, -1, errors.New("not a SOPS document: the sops metadata has no mac")
	}
	return md, i, nil
}

// rules returns the encryption rule of the metadata, as sops reads it.
func (md metadataIn) rules() (rules, error) {
	if md.UnencryptedCommentRegex != "" || md.EncryptedCommentRegex != "" {
		return rules{}, errors.New("SOPS documents with comment rules are not supported")
	}
	set := 0
	for _, s := range []string{md.UnencryptedSuffix, md.EncryptedSuffix, md.UnencryptedRegex, md.EncryptedRegex} {
		if s != "" {
			set++
		}
	}
	if set > 1 {
		return rules{}, errors.New("the sops metadata has more than one encryption rule")
	}
	r := rules{unencryptedSuffix: md.UnencryptedSuffix, encryptedSuffix: md.EncryptedSuffix}
	if set == 0 {
		r.unencryptedSuffix = "_unencrypted" // sops's default
	}
	var err error
	if md.UnencryptedRegex != "" {
		if r.unencryptedRegex, err = regexp.Compile(md.UnencryptedRegex); err != nil {
			return rules{}, fmt.Errorf("the sops metadata's unencrypted_regex: %w", err)
		}
	}
	if md.EncryptedRegex != "" {
		if r.encryptedRegex, err = regexp.Compile(md.EncryptedRegex); err != nil {
			return rules{}, fmt.Errorf("the sops metadata's encrypted_regex: %w", err)
		}
	}
	return r, nil
}

// IsEncrypted reports whether doc is a SOPS document (a top-level `sops` mapping with a mac).
func IsEncrypted(doc []byte) bool {
	m, err := parseMapping(doc)
	if err != nil {
		return false
	}
	_, _, err = readMetadata(m)
	return err == nil
}

// Recipients returns the age recipients a SOPS document is encrypted for, sorted.
func Recipients(doc []byte) ([]string, error) {
	m, err := parseMapping(doc)
	if err != nil {
		return nil, err
	}
	md, _, err := readMetadata(m)
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, len(md.Age))
	for _, e := range md.Age {
		out = append(out, e.Recipient)
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// CheckRecipient returns an error naming the problem unless s is a valid age X25519 recipient.
func CheckRecipient(s string) error {
	_, err := parseRecipient(s)
	return err
}

func parseRecipient(s string) (*age.X25519Recipient, error) {
	switch {
	case s == "":
		return nil, errors.New("empty age recipient: want an age X25519 public key (age1...)")
	case strings.HasPrefix(s, "ssh-") || strings.HasPrefix(s, "ecdsa-"):
		return nil, errors.New("SSH public keys are not supported as recipients: want an age X25519 public key (age1...)")
	case !strings.HasPrefix(s, "age1"):
		return nil, fmt.Errorf("age recipient %q does not start with age1: want an age X25519 public key", s)
	}
	r, err := age.ParseX25519Recipient(s)
	if err != nil {
		return nil, fmt.Errorf("invalid age recipient %q: %w", s, err)
	}
	return r, nil
}

// sortedRecipients parses recipients, sorted and without duplicates.
func sortedRecipients(recipients []string) ([]string, []*age.X25519Recipient, error) {
	if len(recipients) == 0 {
		return nil, nil, errors.New("no age recipients")
	}
	names := slices.Compact(slices.Sorted(slices.Values(recipients)))
	parsed := make([]*age.X25519Recipient, len(names))
	for i, s := range names {
		r, err := parseRecipient(s)
		if err != nil {
			return nil, nil, err
		}
		parsed[i] = r
	}
	return names, parsed, nil
}

// wrapKey returns the data key encrypted for r as an armored age file, as sops stores it.
func wrapKey(r age.Recipient, dataKey []byte) (string, error) {
	var b bytes.Buffer
	aw := armor.NewWriter(&b)
	w, err := age.Encrypt(aw, r)
	if err != nil {
		return "", fmt.Errorf("age-encrypt the data key: %w", err)
	}
	if _, err := w.Write(dataKey); err != nil {
		return "", fmt.Errorf("age-encrypt the data key: %w", err)
	}
	if err := w.Close(); err != nil {
		return "", fmt.Errorf("age-encrypt the data key: %w", err)
	}
	if err := aw.Close(); err != nil {
		return "", fmt.Errorf("armor the data key: %w", err)
	}
	return b.String(), nil
}

// unwrapKey returns the data key from the first age entry one of identities opens.
func unwrapKey(entries []ageEntry, identities []string) ([]byte, error) {
	if len(entries) == 0 {
		return nil, errors.New("the SOPS document has no age recipients")
	}
	if len(identities) == 0 {
		return nil, errors.New("no age identities")
	}
	ids := make([]age.Identity, 0, len(identities))
	for i, s := range identities {
		id, err := age.ParseX25519Identity(strings.TrimSpace(s))
		if err != nil {
			return nil, fmt.Errorf("age identity %d is not a valid X25519 identity (AGE-SECRET-KEY-1...)", i+1)
		}
		ids = append(ids, id)
	}
	var errs []error
	for _, e := range entries {
		r, err := age.Decrypt(armor.NewReader(strings.NewReader(e.Enc)), ids...)
		if err != nil {
			errs = append(errs, fmt.Errorf("recipient %s: %w", e.Recipient, err))
			continue
		}
		key, err := io.ReadAll(r)
		if err != nil {
			errs = append(errs, fmt.Errorf("recipient %s: read the data key: %w", e.Recipient, err))
			continue
		}
		if len(key) != 32 {
			errs = append(errs, fmt.Errorf("recipient %s: data key has %d bytes, want 32", e.Recipient, len(key)))
			continue
		}
		return key, nil
	}
	return nil, fmt.Errorf("no identity opens the data key: %w", errors.Join(errs...))
}

// creationRules is the content of a .sops.yaml.
type creationRules struct {
	CreationRules []creationRule `yaml:"creation_rules"`
}

type creationRule struct {
	PathRegex      string   `yaml:"path_regex"`
	EncryptedRegex string   `yaml:"encrypted_regex"`
	Age            []string `yaml:"age"`
}

// CreationRules returns the content of a .sops.yaml whose one creation rule matches every
// *.yaml file under the folder it is written in, with EncryptedRegex and these age recipients,
// so people can edit the files with `sops` too.
func CreationRules(recipients []string) []byte {
	rule := creationRule{
		// sops matches path_regex against the path relative to the .sops.yaml's folder.
		PathRegex:      `\.yaml$`,
		EncryptedRegex: EncryptedRegex,
		Age:            slices.Compact(slices.Sorted(slices.Values(recipients))),
	}
	out, err := yaml.Marshal(creationRules{CreationRules: []creationRule{rule}})
	if err != nil {
		// Marshalling strings cannot fail; keep the signature free of an error.
		return nil
	}
	return append([]byte("# Written by gitops-reverser: sops uses it to encrypt and edit the *.yaml files here.\n"), out...)
}
