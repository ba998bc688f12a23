package placement

import (
	"slices"

	"go.yaml.in/yaml/v3"
)

// edit is one change the editor makes to the text: an Op, or a finer one the editor derives
// from an Op that sets a whole mapping or list (one key, one item).
type edit struct {
	Op
	before any // for a missing named item: the key value of the item it goes before; nil: at the end
}

// apply makes edit e on the document's current text, or returns the finer edits it is made of.
func (d *document) apply(e edit) ([]edit, error) {
	root, err := d.parse()
	if err != nil {
		return nil, err
	}
	trail, err := d.walk(root, e.Path)
	if err != nil {
		return nil, err
	}
	if unchanged(trail, e) {
		return nil, nil // so an anchor in a part that does not change is no concern
	}
	if i := flowIndex(trail, e); i >= 0 {
		return nil, d.replaceFlow(trail[:i+1], e)
	}
	found := len(trail) - 1
	switch {
	case found < len(e.Path) && e.Remove:
		return nil, nil
	case found < len(e.Path):
		return nil, d.create(trail, e.Path[found:], e)
	case e.Remove:
		return nil, d.remove(trail, e.Path)
	}
	return d.set(trail, e)
}

// unchanged reports whether e sets a node that exists to the value it has.
func unchanged(trail []place, e edit) bool {
	if e.Remove || len(trail) != len(e.Path)+1 {
		return false
	}
	cur, err := valueOf(trail[len(trail)-1].node)
	return err == nil && equal(cur, e.Value)
}

// flowIndex is the index in trail of the first non-empty flow collection the edit changes
// something in, or -1. A flow collection is written again as a whole, in flow style.
func flowIndex(trail []place, e edit) int {
	for i, p := range trail {
		removed := i == len(trail)-1 && i == len(e.Path) && e.Remove // removing a flow node is removing a key
		if isFlow(p.node) && !removed {
			return i
		}
	}
	return -1
}

// replaceFlow writes the flow collection at the end of trail again with e applied.
func (d *document) replaceFlow(trail []place, e edit) error {
	p := trail[len(trail)-1]
	at := e.Path[:len(trail)-1]
	if err := d.plainTree(p.node, at); err != nil {
		return err
	}
	cur, err := valueOf(p.node)
	if err != nil {
		return d.errorf(p.node, at, "%w", err)
	}
	v, err := applyOp(cur, Op{Path: e.Path[len(trail)-1:], Value: e.Value, Remove: e.Remove})
	if err != nil {
		return d.errorf(p.node, e.Path, "%w", err)
	}
	text, err := flowText(p.node, v)
	if err != nil {
		return d.errorf(p.node, e.Path, "%w", err)
	}
	return d.replaceInline(trail, text)
}

// set sets the existing node at the end of trail to e.Value: a scalar's token in place, a
// mapping key by key and a list item by item (as finer edits), anything else as a whole.
func (d *document) set(trail []place, e edit) ([]edit, error) {
	n := trail[len(trail)-1].node
	if err := d.plainNode(n, e.Path); err != nil {
		return nil, err
	}
	switch v := e.Value.(type) {
	case map[string]any:
		if n.Kind == yaml.MappingNode && len(n.Content) > 0 && len(v) > 0 {
			return mappingEdits(e.Path, n, v), nil
		}
	case []any:
		if n.Kind == yaml.SequenceNode && len(n.Content) > 0 && len(v) > 0 {
			if edits, ok := listEdits(e.Path, n, v); ok {
				return edits, nil
			}
		}
	default:
		if n.Kind == yaml.ScalarNode {
			return nil, d.setScalar(trail[len(trail)-1], v, e.Path)
		}
	}
	return nil, d.replace(trail, e.Value, e.Path)
}

// create makes the missing part rest of e's path, from the last node of trail: a key added to
// its mapping, an item to its list, or a null replaced.
func (d *document) create(trail []place, rest Path, e edit) error {
	p := trail[len(trail)-1]
	n, s := p.node, rest[0]
	at := e.Path[:len(e.Path)-len(rest)+1]
	if err := d.plainNode(n, at[:len(at)-1]); err != nil {
		return err
	}
	var v any
	var err error
	switch {
	case n.Kind == yaml.ScalarNode: // a null: walk refuses other scalars
		v, err = setIn(nil, rest, e.Value)
	case s.Field != "":
		v, err = setIn(nil, rest[1:], e.Value)
		if err == nil && len(n.Content) > 0 {
			return d.addKey(p, s.Field, v, at)
		}
		v = map[string]any{s.Field: v}
	case s.Match != "":
		v, err = newItem(s, rest[1:], e.Value)
		if err == nil && len(n.Content) > 0 {
			return d.insertItem(trail, v, s.Match, e.before, at)
		}
		v = []any{v}
	case s.Index != len(n.Content):
		return d.errorf(n, at, "the list has %d items", len(n.Content))
	default:
		v, err = setIn(nil, rest[1:], e.Value)
		if err == nil && len(n.Content) > 0 {
			return d.insertItem(trail, v, "", nil, at)
		}
		v = []any{v}
	}
	if err != nil {
		return d.errorf(n, e.Path, "%w", err)
	}
	return d.replace(trail, v, at[:len(at)-1])
}

// mappingEdits sets mapping n at path to v key by key: keys v lacks are removed, the others
// set, and v's new keys added in the order a new mapping's keys get.
func mappingEdits(path Path, n *yaml.Node, v map[string]any) []edit {
	var out []edit
	have := make(map[string]bool, len(n.Content)/2)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k := n.Content[i].Value
		have[k] = true
		if _, keep := v[k]; !keep {
			out = append(out, edit{Op: Op{Path: with(path, Step{Field: k}), Remove: true}})
		}
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if k := n.Content[i].Value; keyIn(v, k) {
			out = append(out, edit{Op: Op{Path: with(path, Step{Field: k}), Value: v[k]}})
		}
	}
	for _, k := range ordered(v, orderFor(path)) {
		if !have[k] {
			out = append(out, edit{Op: Op{Path: with(path, Step{Field: k}), Value: v[k]}})
		}
	}
	return nameLast(path, out)
}

// nameLast moves the edit of the field that names the item at path (when path ends at a named
// item) after the others: once it changes, the path no longer leads to the item.
func nameLast(path Path, edits []edit) []edit {
	if len(path) == 0 || path[len(path)-1].Match == "" {
		return edits
	}
	name := path[len(path)-1].Match
	var last []edit
	out := edits[:0:0]
	for _, e := range edits {
		if e.Path[len(e.Path)-1].Field == name {
			last = append(last, e)
		} else {
			out = append(out, e)
		}
	}
	return append(out, last...)
}

func keyIn(m map[string]any, k string) bool {
	_, ok := m[k]
	return ok
}

// orderFor is the key order of new keys in the mapping at path.
func orderFor(path Path) []string {
	switch {
	case len(path) == 0:
		return rootOrder
	case path[len(path)-1].Field == "metadata":
		return metadataOrder
	case path[len(path)-1].Match != "":
		return append([]string{path[len(path)-1].Match}, itemOrder...)
	}
	return nil
}

// with is path with s appended, in a new slice.
func with(path Path, s Step) Path {
	return append(slices.Clip(path), s)
}
