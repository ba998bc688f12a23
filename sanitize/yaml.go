package sanitize

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// leadingKeys open every document in this order, as kubectl prints them; the rest follow sorted.
var leadingKeys = [...]string{"apiVersion", "kind", "metadata"}

// flowDepth is the nesting level (the document's root mapping is level 0) from which mappings and
// sequences are written in flow style, as one line of JSON ({"a":{"b":1}}, [1,2]), instead of
// block style. Block indentation grows with depth, so a deeply nested object (a custom resource
// with preserved unknown fields can nest thousands of levels) would cost bytes quadratic in its
// depth; a flow subtree on one line keeps the output linear in the object's size. 64 is far
// deeper than real objects go (a Deployment's pod template reaches ~12 levels, the openAPIV3Schema
// of a CRD that embeds a pod template ~30), so their files keep their block layout, while
// indentation never exceeds 2×flowDepth columns.
const flowDepth = 64

// YAML renders a (sanitized) object as canonical YAML: apiVersion, kind, metadata first, then every
// other top-level key sorted; nested map keys sorted; 2-space indent with kubectl-style sequences;
// multi-line strings as literal blocks; integers stay integers (also when a JSON decoder made them
// float64). Deterministic: the same object gives the same bytes.
//
// The node tree is built by hand rather than by marshalling through reflection or JSON, because this
// runs on every watch event and inside the admission handler.
//
// Collections nested flowDepth levels deep or more are written in flow style, as JSON on one line
// with sorted keys (see renderer), so the bytes grow linearly with the object however deep it
// nests.
func YAML(obj map[string]any) ([]byte, error) {
	if out, ok := fastYAML(obj); ok {
		return out, nil
	}
	return yamlV3(obj)
}

// yamlV3 is YAML written through yaml.v3's node tree: every object, at its cost.
func yamlV3(obj map[string]any) ([]byte, error) {
	r := &renderer{}
	root := &yaml.Node{Kind: yaml.MappingNode, Content: make([]*yaml.Node, 0, 2*len(obj))}
	rest := make([]string, 0, len(obj))
	for k := range obj {
		if !slices.Contains(leadingKeys[:], k) {
			rest = append(rest, k)
		}
	}
	slices.Sort(rest)
	for _, k := range leadingKeys {
		if v, ok := obj[k]; ok {
			if err := r.appendPair(root, k, v, 1); err != nil {
				return nil, err
			}
		}
	}
	for _, k := range rest {
		if err := r.appendPair(root, k, obj[k], 1); err != nil {
			return nil, err
		}
	}
	var buf bytes.Buffer
	buf.Grow(1024)
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	enc.CompactSeqIndent()
	if err := enc.Encode(root); err != nil {
		return nil, fmt.Errorf("encode yaml: %w", err)
	}
	if err := enc.Close(); err != nil {
		return nil, fmt.Errorf("encode yaml: %w", err)
	}
	return r.substitute(buf.Bytes()), nil
}

// JSON renders a (sanitized) object as canonical JSON: map keys sorted, numbers as the shortest
// text of their value, so an integer reads the same whether a JSON decoder made it a float64 (the
// admission webhook's decode) or an int64 (the dynamic client's). Both sides of the correlation
// of a change with its author key on it: it costs a tenth of YAML, and the webhook needs no file.
func JSON(obj map[string]any) ([]byte, error) {
	out, err := json.Marshal(obj)
	if err != nil {
		return nil, fmt.Errorf("encode json: %w", err)
	}
	return out, nil
}

// Hash is a short, stable content hash of canonical bytes (the first 16 hex digits of their
// sha256), used in correlation keys.
func Hash(canonical []byte) string {
	sum := sha256.Sum256(canonical)
	return hex.EncodeToString(sum[:8])
}

// appendPair adds key k and value v, whose nesting level is level, to mapping m.
func (r *renderer) appendPair(m *yaml.Node, k string, v any, level int) error {
	n, err := r.node(v, level)
	if err != nil {
		return fmt.Errorf("%s: %w", k, err)
	}
	m.Content = append(m.Content, keyNode(k), n)
	return nil
}

// node builds the node of v, nested level levels below the document's root.
func (r *renderer) node(v any, level int) (*yaml.Node, error) {
	switch x := v.(type) {
	case map[string]any, []any:
		if level >= flowDepth {
			return r.flow(x)
		}
	}
	switch x := v.(type) {
	case map[string]any:
		return r.mapping(x, level)
	case []any:
		n := &yaml.Node{Kind: yaml.SequenceNode, Content: make([]*yaml.Node, len(x))}
		for i, e := range x {
			c, err := r.node(e, level+1)
			if err != nil {
				return nil, fmt.Errorf("[%d]: %w", i, err)
			}
			n.Content[i] = c
		}
		return n, nil
	}
	return scalarOf(v)
}

// mapping builds the node of a map, its keys sorted.
func (r *renderer) mapping(x map[string]any, level int) (*yaml.Node, error) {
	keys := make([]string, 0, len(x))
	for k := range x {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	n := &yaml.Node{Kind: yaml.MappingNode, Content: make([]*yaml.Node, 0, 2*len(x))}
	for _, k := range keys {
		if err := r.appendPair(n, k, x[k], level+1); err != nil {
			return nil, err
		}
	}
	return n, nil
}

// scalarOf builds the node of a value that is neither a map nor a list.
func scalarOf(v any) (*yaml.Node, error) {
	switch x := v.(type) {
	case string:
		return stringNode(x), nil
	case bool:
		return scalar("!!bool", strconv.FormatBool(x)), nil
	case nil:
		return scalar("!!null", "null"), nil
	case int64:
		return scalar("!!int", strconv.FormatInt(x, 10)), nil
	case int:
		return scalar("!!int", strconv.Itoa(x)), nil
	case int32:
		return scalar("!!int", strconv.FormatInt(int64(x), 10)), nil
	case float64:
		return floatNode(x), nil
	case json.Number:
		if i, err := x.Int64(); err == nil {
			return scalar("!!int", strconv.FormatInt(i, 10)), nil
		}
		f, err := x.Float64()
		if err != nil {
			return nil, fmt.Errorf("number %q: %w", x, err)
		}
		return floatNode(f), nil
	}
	// Not produced by JSON decoding; let yaml.v3 reflect on it rather than fail.
	n := &yaml.Node{}
	if err := n.Encode(v); err != nil {
		return nil, fmt.Errorf("encode %T: %w", v, err)
	}
	return n, nil
}

func scalar(tag, value string) *yaml.Node {
	return &yaml.Node{Kind: yaml.ScalarNode, Tag: tag, Value: value}
}

// floatNode writes integral values as integers, so an int64 from the dynamic client and the
// float64 a plain encoding/json decode gives for the same number render the same.
func floatNode(f float64) *yaml.Node { return scalar(formatFloat(f)) }

// formatFloat is the tag and text of f: see floatNode.
func formatFloat(f float64) (tag, text string) {
	switch {
	case f == math.Trunc(f) && math.Abs(f) < 1<<63:
		return "!!int", strconv.FormatInt(int64(f), 10)
	case math.IsNaN(f):
		return "!!float", ".nan"
	case math.IsInf(f, 1):
		return "!!float", ".inf"
	case math.IsInf(f, -1):
		return "!!float", "-.inf"
	}
	format := byte('f') // as encoding/json does: plain digits unless the exponent is extreme
	if abs := math.Abs(f); abs < 1e-6 || abs >= 1e21 {
		format = 'e'
	}
	return "!!float", strconv.FormatFloat(f, format, -1, 64)
}

// stringNode lets yaml.v3 quote strings that would read back as another type, shows multi-line
// text as a literal block, and double-quotes YAML 1.1 booleans (yes, on, n, ...) that yaml.v3
// considers plain strings but kubectl's YAML 1.1 parser would turn into bools. Multi-line text
// that holds a character a literal block cannot carry as it is goes in double quotes, escaped.
func stringNode(s string) *yaml.Node {
	n := scalar("!!str", s)
	switch {
	case strings.Contains(s, "\n") && literalSafe(s):
		n.Style = yaml.LiteralStyle
	case strings.Contains(s, "\n"), IsYAML11Bool(s):
		n.Style = yaml.DoubleQuotedStyle
	}
	return n
}

// literalSafe says whether s reads back from a literal block exactly: no line break other than
// "\n" (a YAML reader turns \r, NEL, LS and PS into "\n", or folds them), no character YAML
// readers refuse raw (C0 controls but tab, DEL, C1, the byte-order mark, U+FFFE, U+FFFF), and no
// tab at the start or end of a line (a reader takes it for indentation).
func literalSafe(s string) bool {
	prev := rune('\n')
	for _, r := range s {
		switch {
		case r == '\n':
			if prev == '\t' {
				return false
			}
		case r == '\t':
			if prev == '\n' {
				return false
			}
		case r < 0x20, r >= 0x7f && r <= 0x9f, r == 0x2028, r == 0x2029, r == 0xfeff, r == 0xfffe, r == 0xffff:
			return false
		}
		prev = r
	}
	return true
}

// keyNode is a mapping key, quoted by the rules of stringNode except that a key is never a block,
// "<<" is quoted (plain, it is YAML's merge key), and so is a key of several lines (yaml.v3 would
// write a block).
func keyNode(s string) *yaml.Node {
	n := scalar("!!str", s)
	if IsYAML11Bool(s) || s == "<<" || strings.ContainsRune(s, '\n') {
		n.Style = yaml.DoubleQuotedStyle
	}
	return n
}

// IsYAML11Bool reports whether s is a boolean in YAML 1.1 (which kubectl reads) but a string in
// YAML 1.2 (which yaml.v3 reads): such strings are written quoted.
func IsYAML11Bool(s string) bool {
	switch s {
	case "y", "Y", "yes", "Yes", "YES", "on", "On", "ON",
		"n", "N", "no", "No", "NO", "off", "Off", "OFF":
		return true
	}
	return false
}
