package placement

import (
	"go.yaml.in/yaml/v3"
)

// place is a node reached by a path: the node, the key it is the value of (nil for a list's
// item and the root) and the mapping or list that holds it (nil for the root).
type place struct {
	node, key, parent *yaml.Node
}

// parentCol is the column (0-based) of what p's node hangs from: its key, or its list's dashes;
// -1 for the root.
func (p place) parentCol() int {
	switch {
	case p.key != nil:
		return p.key.Column - 1
	case p.parent != nil:
		return p.parent.Column - 1
	}
	return -1
}

// walk follows path from root as far as it exists. It returns the places passed, the root
// first: when the last is path's target, the trail is one longer than path. A step into a
// null stops the walk there (the caller replaces the null); a step into another scalar, a field
// of a list, an item of a mapping, a name two items share, or through an anchor, alias or merge
// key is an error. The last node is the caller's to check (see plainNode): a node that does not
// change may be anchored.
func (d *document) walk(root *yaml.Node, path Path) ([]place, error) {
	trail := []place{{node: root}}
	for i, s := range path {
		cur := trail[len(trail)-1].node
		if err := d.plainNode(cur, path[:i]); err != nil {
			return nil, err
		}
		next, err := d.step(cur, s, path[:i+1])
		if err != nil || next.node == nil {
			return trail, err
		}
		trail = append(trail, next)
	}
	return trail, nil
}

// step takes one step s from node cur; the zero place when what s names does not exist.
func (d *document) step(cur *yaml.Node, s Step, at Path) (place, error) {
	if cur.Kind == yaml.ScalarNode {
		if isNull(cur) {
			return place{}, nil
		}
		return place{}, d.errorf(cur, at, "the path steps into the scalar %q", cur.Value)
	}
	if s.Field != "" {
		if cur.Kind != yaml.MappingNode {
			return place{}, d.errorf(cur, at, "the field %q of a list", s.Field)
		}
		for i := 0; i+1 < len(cur.Content); i += 2 {
			if cur.Content[i].Value == s.Field {
				return place{node: cur.Content[i+1], key: cur.Content[i], parent: cur}, nil
			}
		}
		return place{}, nil
	}
	if cur.Kind != yaml.SequenceNode {
		return place{}, d.errorf(cur, at, "an item of a mapping")
	}
	if s.Match == "" {
		if s.Index < 0 {
			return place{}, d.errorf(cur, at, "the index %d", s.Index)
		}
		if s.Index < len(cur.Content) {
			return place{node: cur.Content[s.Index], parent: cur}, nil
		}
		return place{}, nil
	}
	return d.match(cur, s, at)
}

// match finds the item of list whose field s.Match has the value s.Value.
func (d *document) match(list *yaml.Node, s Step, at Path) (place, error) {
	var found place
	for _, item := range list.Content {
		v, ok := fieldValue(item, s.Match)
		if !ok || !equal(v, s.Value) {
			continue
		}
		if found.node != nil {
			return place{}, d.errorf(item, at, "two items have %s %v (lines %d and %d)",
				s.Match, s.Value, d.firstLine+found.node.Line, d.firstLine+item.Line)
		}
		found = place{node: item, parent: list}
	}
	return found, nil
}

// fieldValue is the value of scalar field key of mapping item.
func fieldValue(item *yaml.Node, key string) (any, bool) {
	if item.Kind != yaml.MappingNode {
		return nil, false
	}
	for i := 0; i+1 < len(item.Content); i += 2 {
		if item.Content[i].Value == key && item.Content[i+1].Kind == yaml.ScalarNode {
			v, err := scalarOf(item.Content[i+1])
			return v, err == nil
		}
	}
	return nil, false
}

// plainNode refuses a node the editor must not change through: an alias, an anchored node (its
// aliases would change with it) and a mapping with a merge key.
func (d *document) plainNode(n *yaml.Node, at Path) error {
	switch {
	case n.Kind == yaml.AliasNode:
		return d.errorf(n, at, "the alias *%s is not edited: write the value out", n.Value)
	case n.Anchor != "":
		return d.errorf(n, at, "the anchor &%s is not edited: write the values out", n.Anchor)
	case n.Kind == yaml.MappingNode:
		for i := 0; i < len(n.Content); i += 2 {
			if k := n.Content[i]; k.Value == "<<" && k.ShortTag() == "!!merge" {
				return d.errorf(k, at, "the merge key << is not edited: write the fields out")
			}
		}
	}
	return nil
}

// plainTree is plainNode for n and everything below it.
func (d *document) plainTree(n *yaml.Node, at Path) error {
	if err := d.plainNode(n, at); err != nil {
		return err
	}
	for _, c := range n.Content {
		if err := d.plainTree(c, at); err != nil {
			return err
		}
	}
	return nil
}

func isNull(n *yaml.Node) bool { return n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null" }

// isFlow reports whether n is a flow collection with something in it ({} and [] are not: an
// empty collection is replaced as a whole, in block style).
func isFlow(n *yaml.Node) bool {
	return (n.Kind == yaml.MappingNode || n.Kind == yaml.SequenceNode) &&
		n.Style&yaml.FlowStyle != 0 && len(n.Content) > 0
}

// listIndentOf is how the document indents block lists under their keys: the dash's column
// less the key's for its first such list; 0 (flush-left, as kubectl writes) when it has none.
func listIndentOf(root *yaml.Node) int {
	ind, _ := firstListIndent(root)
	return ind
}

func firstListIndent(n *yaml.Node) (int, bool) {
	if n.Kind == yaml.MappingNode {
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			if v.Kind == yaml.SequenceNode && v.Style&yaml.FlowStyle == 0 && len(v.Content) > 0 && v.Column >= k.Column {
				return v.Column - k.Column, true
			}
			if ind, ok := firstListIndent(v); ok {
				return ind, true
			}
		}
		return 0, false
	}
	for _, c := range n.Content {
		if ind, ok := firstListIndent(c); ok {
			return ind, true
		}
	}
	return 0, false
}
