package sanitize

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"
)

// Documents reads the YAML documents of data as node trees, for ObjectOf. A character no YAML
// reader accepts raw (a control character, DEL, a C1 character) is reported where it stands and
// with the escape that carries it, rather than as yaml.v3's bare "control characters are not
// allowed".
func Documents(data []byte) ([]*yaml.Node, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var docs []*yaml.Node
	for {
		var doc yaml.Node
		err := dec.Decode(&doc)
		if errors.Is(err, io.EOF) {
			return docs, nil
		}
		if err != nil {
			if line, col, r, ok := refusedCharacter(data); ok {
				return nil, fmt.Errorf("line %d, column %d: the character %U cannot stand unescaped in YAML: write the value in double quotes with %s in its place",
					line, col, r, escapeOf(r))
			}
			return nil, fmt.Errorf("parse YAML: %w", err)
		}
		docs = append(docs, &doc)
	}
}

// refusedCharacter finds the first character of data that YAML readers refuse raw: C0 controls
// but tab, LF and CR; DEL; C1 controls but NEL; U+FFFE and U+FFFF; invalid UTF-8 (as U+FFFD).
func refusedCharacter(data []byte) (line, col int, r rune, ok bool) {
	line, col = 1, 1
	for i := 0; i < len(data); {
		r, size := utf8.DecodeRune(data[i:])
		switch {
		case r == '\n':
			line, col = line+1, 0
		case r == utf8.RuneError && size == 1,
			r < 0x20 && r != '\t' && r != '\r',
			r >= 0x7f && r <= 0x9f && r != 0x85,
			r == 0xfffe, r == 0xffff:
			return line, col, r, true
		}
		i += size
		col++
	}
	return 0, 0, 0, false
}

// escapeOf is the YAML double-quoted escape of r.
func escapeOf(r rune) string {
	if r <= 0xff {
		return fmt.Sprintf(`\x%02X`, r)
	}
	return fmt.Sprintf(`\u%04X`, r)
}

// ObjectOf reads a document (or the mapping at its top) as the object it describes, with the
// Go types a JSON decode of the same object gives the dynamic client: map[string]any, []any,
// string, bool, nil, int64 for integers and float64 for other numbers. Nothing is lost on the
// way: an integer stays exact (2^53+1 does not become a float64), a string keeps every
// character, a date-like scalar stays its text (as kubectl keeps it), null stays null and ""
// stays "". It refuses, naming the field: aliases and merge keys (write the value out), keys that
// are not scalars or are given twice, and numbers JSON cannot hold (NaN, infinities).
func ObjectOf(doc *yaml.Node) (map[string]any, error) {
	if doc.Kind == yaml.DocumentNode {
		if len(doc.Content) != 1 {
			return nil, errors.New("an empty document")
		}
		doc = doc.Content[0]
	}
	if doc.Kind != yaml.MappingNode {
		return nil, fmt.Errorf("line %d: the document is a %s, not a mapping", doc.Line, doc.ShortTag())
	}
	v, err := valueOf(doc, "")
	if err != nil {
		return nil, err
	}
	return v.(map[string]any), nil
}

// valueOf converts n, found at path (a field path as kubectl prints it: spec.containers[0].name).
func valueOf(n *yaml.Node, path string) (any, error) {
	where := func(format string, args ...any) error {
		at := path
		if at == "" {
			at = "the document"
		}
		return fmt.Errorf("%s (line %d): %s", at, n.Line, fmt.Sprintf(format, args...))
	}
	switch n.Kind {
	case yaml.AliasNode:
		return nil, where("the alias *%s is not read: write the value out", n.Value)
	case yaml.MappingNode:
		m := make(map[string]any, len(n.Content)/2)
		lines := make(map[string]int, len(n.Content)/2)
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := n.Content[i]
			if k.Kind != yaml.ScalarNode {
				return nil, where("a key that is a %s: keys are strings", k.ShortTag())
			}
			if first, ok := lines[k.Value]; ok {
				return nil, where("the key %q is given twice (lines %d and %d): keep one", k.Value, first, k.Line)
			}
			lines[k.Value] = k.Line
			if k.Value == "<<" && k.Style == 0 && k.ShortTag() == "!!merge" {
				return nil, where("the merge key << is not read: write the fields out")
			}
			v, err := valueOf(n.Content[i+1], join(path, k.Value))
			if err != nil {
				return nil, err
			}
			m[k.Value] = v
		}
		return m, nil
	case yaml.SequenceNode:
		s := make([]any, len(n.Content))
		for i, c := range n.Content {
			v, err := valueOf(c, path+"["+strconv.Itoa(i)+"]")
			if err != nil {
				return nil, err
			}
			s[i] = v
		}
		return s, nil
	case yaml.ScalarNode:
		v, err := scalarValue(n)
		if err != nil {
			return nil, where("%v", err)
		}
		return v, nil
	}
	return nil, where("a YAML node of kind %d", n.Kind)
}

// join appends key k to path, bracketed when it is no plain name.
func join(path, k string) string {
	if k == "" || strings.ContainsAny(k, ".[]\"") {
		return path + "[" + strconv.Quote(k) + "]"
	}
	if path == "" {
		return k
	}
	return path + "." + k
}

// scalarValue converts one scalar as its tag says (yaml.v3 resolves plain scalars as YAML 1.2's
// core schema does: 1 an integer, 1.5 a float, true a bool, ~ or null a null, on and yes strings).
func scalarValue(n *yaml.Node) (any, error) {
	switch n.ShortTag() {
	case "!!str", "!!timestamp", "!!binary":
		return n.Value, nil
	case "!!null":
		return nil, nil
	case "!!bool":
		var b bool
		err := n.Decode(&b)
		return b, err
	case "!!int":
		var v any
		if err := n.Decode(&v); err != nil {
			return nil, err
		}
		switch x := v.(type) {
		case int:
			return int64(x), nil
		case int64:
			return x, nil
		case uint64: // beyond int64: what a JSON decode makes of it
			return float64(x), nil
		case float64:
			return x, nil
		}
		return nil, fmt.Errorf("the integer %q", n.Value)
	case "!!float":
		var f float64
		if err := n.Decode(&f); err != nil {
			return nil, err
		}
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return nil, fmt.Errorf("%s is a number JSON cannot hold, nor Kubernetes", n.Value)
		}
		return f, nil
	}
	return nil, fmt.Errorf("a value tagged %s: write it as a string", n.Tag)
}
