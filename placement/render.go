package placement

import (
	"fmt"
	"slices"
	"strings"
)

// Render is the YAML of a new object written into a team's folder: block style, 2-space indent,
// lists flush-left under their keys as kubectl writes them, strings quoted only when they must
// be; apiVersion, kind, metadata (name, namespace, labels, annotations, then the rest sorted),
// spec, then the rest sorted; a list item's mapping opens with its name. It reads back, through
// sanitize.Documents and sanitize.ObjectOf, as obj.
func Render(obj map[string]any) ([]byte, error) {
	v, err := normal(obj)
	if err != nil {
		return nil, fmt.Errorf("render: %w", err)
	}
	r := &renderer{}
	if err := r.entries(v.(map[string]any), rootOrder, 0); err != nil {
		return nil, fmt.Errorf("render: %w", err)
	}
	if len(v.(map[string]any)) == 0 {
		return []byte("{}\n"), nil
	}
	return []byte(r.b.String()), nil
}

// Key orders: these keys open a mapping in this order, the others follow sorted.
var (
	rootOrder     = []string{"apiVersion", "kind", "metadata", "spec"}
	metadataOrder = []string{"name", "namespace", "labels", "annotations"}
	itemOrder     = []string{"name"}
)

// orderOf is the key order of the mapping that is the value of key.
func orderOf(key string) []string {
	if key == "metadata" {
		return metadataOrder
	}
	return nil
}

// ordered is the keys of m, those of first first (in that order), the rest sorted.
func ordered(m map[string]any, first []string) []string {
	keys := make([]string, 0, len(m))
	for _, k := range first {
		if _, ok := m[k]; ok && !slices.Contains(keys, k) {
			keys = append(keys, k)
		}
	}
	rest := make([]string, 0, len(m)-len(keys))
	for k := range m {
		if !slices.Contains(keys, k) {
			rest = append(rest, k)
		}
	}
	slices.Sort(rest)
	return append(keys, rest...)
}

// renderer writes new values in block style, each line indented by a given number of spaces.
type renderer struct {
	b          strings.Builder
	listIndent int  // how far a list's dashes stand right of its key: 0 flush-left
	quoteLines bool // strings of several lines double-quoted, not literal blocks
}

// entries writes the entries of mapping m, keys at column indent.
func (r *renderer) entries(m map[string]any, first []string, indent int) error {
	for _, k := range ordered(m, first) {
		if err := r.entry(k, m[k], indent); err != nil {
			return err
		}
	}
	return nil
}

// entry writes key k and its value v, the key at column indent.
func (r *renderer) entry(k string, v any, indent int) error {
	key, err := keyText(k)
	if err != nil {
		return err
	}
	pad := strings.Repeat(" ", indent)
	switch x := v.(type) {
	case map[string]any:
		if len(x) > 0 {
			r.b.WriteString(pad + key + ":\n")
			return r.entries(x, orderOf(k), indent+2)
		}
	case []any:
		if len(x) > 0 {
			r.b.WriteString(pad + key + ":\n")
			return r.items(x, indent+r.listIndent)
		}
	}
	text, err := r.scalar(v, indent+2)
	if err != nil {
		return fmt.Errorf("%s: %w", k, err)
	}
	r.b.WriteString(pad + key + ": " + text + "\n")
	return nil
}

// items writes the items of list l, dashes at column dash.
func (r *renderer) items(l []any, dash int) error {
	for i, v := range l {
		if err := r.item(v, dash, itemOrder); err != nil {
			return fmt.Errorf("[%d]: %w", i, err)
		}
	}
	return nil
}

// item writes one list item v, its dash at column dash; a mapping's keys in first come first. A
// mapping or list item is written indented as its content stands (dash+2) and its first line's
// indent then made the dash.
func (r *renderer) item(v any, dash int, first []string) error {
	opened := r.b.Len()
	var err error
	switch x := v.(type) {
	case map[string]any:
		if len(x) > 0 {
			err = r.entries(x, first, dash+2)
			r.openItem(opened, dash)
			return err
		}
	case []any:
		if len(x) > 0 {
			err = r.items(x, dash+2)
			r.openItem(opened, dash)
			return err
		}
	}
	text, err := r.scalar(v, dash+2)
	r.b.WriteString(strings.Repeat(" ", dash) + "- " + text + "\n")
	return err
}

// openItem puts a dash in the first line written since opened, at column dash.
func (r *renderer) openItem(opened, dash int) {
	s := r.b.String()
	r.b.Reset()
	r.b.WriteString(s[:opened] + strings.Repeat(" ", dash) + "- " + s[opened+dash+2:])
}

// scalar is v written after a key or dash: inline, {} or [] for an empty collection, or a
// literal block whose lines are indented by indent.
func (r *renderer) scalar(v any, indent int) (string, error) {
	switch x := v.(type) {
	case map[string]any:
		return "{}", nil
	case []any:
		return "[]", nil
	case string:
		if !r.quoteLines && literal(x) {
			head, body := literalText(x, indent)
			return head + "\n" + body, nil
		}
	}
	return inline(v)
}
