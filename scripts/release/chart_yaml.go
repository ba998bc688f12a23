package main

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"

	yamlv3 "go.yaml.in/yaml/v3"
)

// setYAMLScalar sets the string at keys (a path of block mapping keys) of the YAML document data
// to value by rewriting the value's text on its line alone, so comments and layout stay. It
// refuses a missing key or a value that is not a one-line string, and checks the result decodes
// as the original with that one value changed.
func setYAMLScalar(data []byte, keys []string, value string) ([]byte, error) {
	name := strings.Join(keys, ".")
	node, err := findYAMLScalar(data, keys)
	if err != nil {
		return nil, err
	}
	lines := bytes.SplitAfter(data, []byte("\n"))
	line := string(lines[node.Line-1])
	start := runeOffset(line, node.Column-1)
	end, err := scalarEnd(line, start, node.Style)
	if err != nil {
		return nil, fmt.Errorf("%s (line %d): %w", name, node.Line, err)
	}
	text := strconv.Quote(value)
	if node.Style == 0 { // plain stays plain; checkYAMLEdit refuses a value that would not read back
		text = value
	}
	lines[node.Line-1] = []byte(line[:start] + text + line[end:])
	out := bytes.Join(lines, nil)
	if err := checkYAMLEdit(data, out, keys, value); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return out, nil
}

// findYAMLScalar is the value node at keys, which must be a one-line string in block mappings.
func findYAMLScalar(data []byte, keys []string) (*yamlv3.Node, error) {
	var doc yamlv3.Node
	if err := yamlv3.Unmarshal(data, &doc); err != nil {
		return nil, err
	}
	if doc.Kind != yamlv3.DocumentNode || len(doc.Content) != 1 {
		return nil, errors.New("not one YAML document")
	}
	n := doc.Content[0]
	for i, key := range keys {
		name := strings.Join(keys[:i+1], ".")
		if n.Kind != yamlv3.MappingNode || n.Style&yamlv3.FlowStyle != 0 {
			return nil, fmt.Errorf("%s: its parent is not a block mapping", name)
		}
		var next *yamlv3.Node
		for j := 0; j+1 < len(n.Content); j += 2 {
			if n.Content[j].Value == key {
				next = n.Content[j+1]
			}
		}
		if next == nil {
			return nil, fmt.Errorf("no key %s", name)
		}
		n = next
	}
	if n.Kind != yamlv3.ScalarNode || n.Tag != "!!str" || n.Style&(yamlv3.LiteralStyle|yamlv3.FoldedStyle) != 0 {
		return nil, fmt.Errorf("%s is not a one-line string (line %d)", strings.Join(keys, "."), n.Line)
	}
	return n, nil
}

// runeOffset is the byte offset of the col-th rune of line (yaml.v3 counts columns in runes).
func runeOffset(line string, col int) int {
	for i := range line {
		if col == 0 {
			return i
		}
		col--
	}
	return len(line)
}

// scalarEnd is the byte offset just past the scalar of the given style that starts at start.
func scalarEnd(line string, start int, style yamlv3.Style) (int, error) {
	switch {
	case style&yamlv3.DoubleQuotedStyle != 0:
		for i := start + 1; i < len(line); i++ {
			switch line[i] {
			case '\\':
				i++
			case '"':
				return i + 1, nil
			}
		}
	case style&yamlv3.SingleQuotedStyle != 0:
		for i := start + 1; i < len(line); i++ {
			if line[i] == '\'' && i+1 < len(line) && line[i+1] == '\'' {
				i++
			} else if line[i] == '\'' {
				return i + 1, nil
			}
		}
	case style == 0:
		end := len(strings.TrimRight(line, "\r\n"))
		for i := start + 1; i < end; i++ {
			if line[i] == '#' && (line[i-1] == ' ' || line[i-1] == '\t') {
				end = i
				break
			}
		}
		return start + len(strings.TrimRight(line[start:end], " \t")), nil
	}
	return 0, errors.New("the value does not end on its line, or its style is not supported")
}

// checkYAMLEdit checks that after decodes as before with the string at keys set to value.
func checkYAMLEdit(before, after []byte, keys []string, value string) error {
	var want, got map[string]any
	if err := yamlv3.Unmarshal(before, &want); err != nil {
		return err
	}
	if err := yamlv3.Unmarshal(after, &got); err != nil {
		return fmt.Errorf("the edit breaks the YAML: %w", err)
	}
	m := want
	for _, k := range keys[:len(keys)-1] {
		m, _ = m[k].(map[string]any)
	}
	if m == nil {
		return errors.New("its parent is not a mapping of strings")
	}
	m[keys[len(keys)-1]] = value
	if !reflect.DeepEqual(want, got) {
		return errors.New("the edit would change more than this value")
	}
	return nil
}
