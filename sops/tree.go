package sops

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strings"

	"go.yaml.in/yaml/v3"
)

// rules selects the leaves that are encrypted, with sops's precedence: an unencrypted suffix,
// an encrypted suffix, an unencrypted regex or an encrypted regex, tested on every key of the path.
type rules struct {
	unencryptedSuffix string
	encryptedSuffix   string
	unencryptedRegex  *regexp.Regexp
	encryptedRegex    *regexp.Regexp
}

// encrypted reports whether the leaf at path is (to be) encrypted.
func (r rules) encrypted(path []string) bool {
	enc := r.unencryptedSuffix == "" || !anyKey(path, func(k string) bool { return strings.HasSuffix(k, r.unencryptedSuffix) })
	if r.encryptedSuffix != "" {
		enc = anyKey(path, func(k string) bool { return strings.HasSuffix(k, r.encryptedSuffix) })
	}
	if r.unencryptedRegex != nil && anyKey(path, r.unencryptedRegex.MatchString) {
		enc = false
	}
	if r.encryptedRegex != nil {
		enc = anyKey(path, r.encryptedRegex.MatchString)
	}
	return enc
}

func anyKey(path []string, match func(string) bool) bool {
	for _, k := range path {
		if match(k) {
			return true
		}
	}
	return false
}

// additionalData is the AES-GCM additional data of the leaf at path: its mapping keys joined
// with ':' and a trailing ':' (sequence indexes are not part of a path).
func additionalData(path []string) string {
	return strings.Join(path, ":") + ":"
}

// parseMapping parses doc as one YAML document whose root is a mapping, with aliases expanded
// and comments dropped, and returns the mapping node.
func parseMapping(doc []byte) (*yaml.Node, error) {
	dec := yaml.NewDecoder(bytes.NewReader(doc))
	var root yaml.Node
	if err := dec.Decode(&root); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, errors.New("empty YAML document")
		}
		return nil, fmt.Errorf("parse YAML: %w", err)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return nil, errors.New("more than one YAML document is not supported")
	}
	if root.Kind != yaml.DocumentNode || len(root.Content) != 1 || root.Content[0].Kind != yaml.MappingNode {
		return nil, errors.New("the YAML document is not a mapping")
	}
	m := normalize(root.Content[0])
	return m, nil
}

// normalize returns n with aliases replaced by copies of their anchored nodes, anchors and
// comments removed.
func normalize(n *yaml.Node) *yaml.Node {
	if n.Kind == yaml.AliasNode && n.Alias != nil {
		return normalize(n.Alias)
	}
	c := *n
	c.Anchor, c.HeadComment, c.LineComment, c.FootComment = "", "", "", ""
	c.Content = make([]*yaml.Node, len(n.Content))
	for i, child := range n.Content {
		c.Content[i] = normalize(child)
	}
	return &c
}

// walk calls leaf for every scalar under n in document order, with its path of mapping keys.
func walk(n *yaml.Node, path []string, leaf func(n *yaml.Node, path []string) error) error {
	switch n.Kind {
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := n.Content[i]
			if k.Kind != yaml.ScalarNode || k.ShortTag() != "!!str" {
				return fmt.Errorf("mapping key %q at %q is not a string; only string keys are supported", k.Value, additionalData(path))
			}
			if err := walk(n.Content[i+1], append(path[:len(path):len(path)], k.Value), leaf); err != nil {
				return err
			}
		}
	case yaml.SequenceNode:
		for _, item := range n.Content {
			if err := walk(item, path, leaf); err != nil {
				return err
			}
		}
	case yaml.ScalarNode:
		return leaf(n, path)
	default:
		return fmt.Errorf("unexpected YAML node kind %d at %q", n.Kind, additionalData(path))
	}
	return nil
}

// leafValue decodes a scalar the way sops's YAML store does; nil means null.
func leafValue(n *yaml.Node, path []string) (any, error) {
	var v any
	if err := n.Decode(&v); err != nil {
		return nil, fmt.Errorf("decode the value at %q: %w", additionalData(path), err)
	}
	return v, nil
}

// keyIndex returns the index of key's key node in mapping m, or -1.
func keyIndex(m *yaml.Node, key string) int {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if k := m.Content[i]; k.Kind == yaml.ScalarNode && k.Value == key {
			return i
		}
	}
	return -1
}

// encodeYAML writes the mapping m as a YAML document with the given indent.
func encodeYAML(m *yaml.Node, indent int) ([]byte, error) {
	var b bytes.Buffer
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(indent)
	if err := enc.Encode(&yaml.Node{Kind: yaml.DocumentNode, Content: []*yaml.Node{m}}); err != nil {
		return nil, fmt.Errorf("encode YAML: %w", err)
	}
	if err := enc.Close(); err != nil {
		return nil, fmt.Errorf("encode YAML: %w", err)
	}
	return b.Bytes(), nil
}
