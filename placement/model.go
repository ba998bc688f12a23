package placement

import (
	"errors"
	"fmt"
	"math"

	"github.com/configbutler/gitops-reverser/sanitize"
	"go.yaml.in/yaml/v3"
)

// This file is the editor's model: a document read as the object sanitize.ObjectOf reads, and
// ops applied to such an object in memory. Edit applies its ops to the model first and checks
// that the edited text reads back as the model does.

// valueOf reads node n as sanitize.ObjectOf reads a document (map[string]any, []any, string,
// int64, float64, bool, nil), except that it follows aliases, so that a document with anchors
// in a part no op touches can still be edited and checked.
func valueOf(n *yaml.Node) (any, error) { return valueAt(n, 0) }

// maxAliasDepth bounds how deep aliases may lead, against a document made to blow up.
const maxAliasDepth = 64

func valueAt(n *yaml.Node, aliases int) (any, error) {
	switch n.Kind {
	case yaml.AliasNode:
		if aliases >= maxAliasDepth || n.Alias == nil {
			return nil, fmt.Errorf("line %d: the alias *%s leads too deep", n.Line, n.Value)
		}
		return valueAt(n.Alias, aliases+1)
	case yaml.MappingNode:
		m := make(map[string]any, len(n.Content)/2)
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := n.Content[i]
			if _, twice := m[k.Value]; twice {
				return nil, fmt.Errorf("line %d: the key %q is given twice", k.Line, k.Value)
			}
			v, err := valueAt(n.Content[i+1], aliases)
			if err != nil {
				return nil, err
			}
			m[k.Value] = v
		}
		return m, nil
	case yaml.SequenceNode:
		s := make([]any, len(n.Content))
		for i, c := range n.Content {
			v, err := valueAt(c, aliases)
			if err != nil {
				return nil, err
			}
			s[i] = v
		}
		return s, nil
	}
	return scalarOf(n)
}

// scalarOf reads a scalar exactly as sanitize.ObjectOf does, by asking it.
func scalarOf(n *yaml.Node) (any, error) {
	m, err := sanitize.ObjectOf(&yaml.Node{Kind: yaml.MappingNode, Tag: "!!map", Content: []*yaml.Node{
		{Kind: yaml.ScalarNode, Tag: "!!str", Value: "v"}, n,
	}})
	if err != nil {
		return nil, err
	}
	return m["v"], nil
}

// normalOp is op with its values in the types valueOf reads: any integer an int64 (a float64
// too when it is integral, as sanitize renders it), any float a float64.
func normalOp(op Op) (Op, error) {
	out := Op{Path: make(Path, len(op.Path)), Remove: op.Remove}
	for i, s := range op.Path {
		out.Path[i] = s
		if s.Match == "" {
			continue
		}
		v, err := normal(s.Value)
		if err != nil {
			return Op{}, err
		}
		switch v.(type) {
		case map[string]any, []any, nil:
			return Op{}, fmt.Errorf("the item's key %s must be a scalar", s.Match)
		}
		out.Path[i].Value = v
	}
	if op.Remove {
		if len(op.Path) == 0 {
			return Op{}, errors.New("removing the whole document: use RemoveDocument")
		}
		return out, nil
	}
	v, err := normal(op.Value)
	out.Value = v
	return out, err
}

// normal is v in the types valueOf reads.
func normal(v any) (any, error) {
	switch x := v.(type) {
	case map[string]any:
		m := make(map[string]any, len(x))
		for k, e := range x {
			n, err := normal(e)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", k, err)
			}
			m[k] = n
		}
		return m, nil
	case []any:
		s := make([]any, len(x))
		for i, e := range x {
			n, err := normal(e)
			if err != nil {
				return nil, fmt.Errorf("[%d]: %w", i, err)
			}
			s[i] = n
		}
		return s, nil
	case nil, string, bool, int64:
		return x, nil
	case int:
		return int64(x), nil
	case int32:
		return int64(x), nil
	case float32:
		return normalFloat(float64(x))
	case float64:
		return normalFloat(x)
	}
	return nil, fmt.Errorf("a value of type %T", v)
}

func normalFloat(f float64) (any, error) {
	switch {
	case math.IsNaN(f) || math.IsInf(f, 0):
		return nil, fmt.Errorf("%v is a number JSON cannot hold", f)
	case f == math.Trunc(f) && math.Abs(f) < 1<<63:
		return int64(f), nil
	}
	return f, nil
}

// applyOp is root with op applied.
func applyOp(root any, op Op) (any, error) {
	if op.Remove {
		return removeIn(root, op.Path), nil
	}
	return setIn(root, op.Path, op.Value)
}

// setIn is cur with the value at path set to v: missing mappings are created on the way, a
// missing named item is appended, an index one past the end appends.
func setIn(cur any, path Path, v any) (any, error) {
	if len(path) == 0 {
		return v, nil
	}
	s, rest := path[0], path[1:]
	if s.Field != "" {
		m, ok := cur.(map[string]any)
		if !ok && cur != nil {
			return nil, fmt.Errorf("%s: the path steps into a %T", s.Field, cur)
		}
		out := make(map[string]any, len(m)+1)
		for k, e := range m {
			out[k] = e
		}
		child, err := setIn(m[s.Field], rest, v)
		out[s.Field] = child
		return out, err
	}
	l, ok := cur.([]any)
	if !ok && cur != nil {
		return nil, fmt.Errorf("%s: the path steps into a %T", Path{s}, cur)
	}
	out := append([]any(nil), l...)
	i := itemIndex(l, s)
	switch {
	case i >= 0:
		child, err := setIn(l[i], rest, v)
		out[i] = child
		return out, err
	case s.Match != "":
		item, err := newItem(s, rest, v)
		return append(out, item), err
	case s.Index == len(l):
		item, err := setIn(nil, rest, v)
		return append(out, item), err
	}
	return nil, fmt.Errorf("%s: the list has %d items", Path{s}, len(l))
}

// newItem is the item a missing named item's path creates: {Match: Value} with the rest of the
// path set in it, or v itself (with Match set) when the path ends at the item.
func newItem(s Step, rest Path, v any) (any, error) {
	if len(rest) > 0 {
		return setIn(map[string]any{s.Match: s.Value}, rest, v)
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("%s: a named item must be a mapping, not %T", Path{s}, v)
	}
	if have, ok := m[s.Match]; ok && !equal(have, s.Value) {
		return nil, fmt.Errorf("%s: the item's %s is %v", Path{s}, s.Match, have)
	}
	out := make(map[string]any, len(m)+1)
	for k, e := range m {
		out[k] = e
	}
	out[s.Match] = s.Value
	return out, nil
}

// itemIndex is the index of the item of l that step s names, or -1.
func itemIndex(l []any, s Step) int {
	if s.Match == "" {
		if s.Index >= 0 && s.Index < len(l) {
			return s.Index
		}
		return -1
	}
	for i, item := range l {
		if m, ok := item.(map[string]any); ok {
			if v, ok := m[s.Match]; ok && equal(v, s.Value) {
				return i
			}
		}
	}
	return -1
}

// removeIn is cur without what path names; cur itself when it has nothing there.
func removeIn(cur any, path Path) any {
	s, rest := path[0], path[1:]
	switch c := cur.(type) {
	case map[string]any:
		child, ok := c[s.Field]
		if s.Field == "" || !ok {
			return cur
		}
		out := make(map[string]any, len(c))
		for k, e := range c {
			out[k] = e
		}
		if len(rest) == 0 {
			delete(out, s.Field)
		} else {
			out[s.Field] = removeIn(child, rest)
		}
		return out
	case []any:
		i := itemIndex(c, s)
		if s.Field != "" || i < 0 {
			return cur
		}
		if len(rest) > 0 {
			out := append([]any(nil), c...)
			out[i] = removeIn(c[i], rest)
			return out
		}
		return append(append([]any(nil), c[:i]...), c[i+1:]...)
	}
	return cur
}

// ValueAt is the value at path in v, and whether there is one.
func ValueAt(v any, path Path) (any, bool) {
	for _, s := range path {
		switch c := v.(type) {
		case map[string]any:
			var ok bool
			if v, ok = c[s.Field]; !ok || s.Field == "" {
				return nil, false
			}
		case []any:
			i := itemIndex(c, s)
			if i < 0 || s.Field != "" {
				return nil, false
			}
			v = c[i]
		default:
			return nil, false
		}
	}
	return v, true
}

// equal compares two values of the model; an empty list is an empty list, nil or not.
func equal(a, b any) bool {
	switch x := a.(type) {
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for k, v := range x {
			if w, ok := y[k]; !ok || !equal(v, w) {
				return false
			}
		}
		return true
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !equal(x[i], y[i]) {
				return false
			}
		}
		return true
	}
	return a == b
}
