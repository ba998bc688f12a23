package placement

import (
	"go.yaml.in/yaml/v3"
)

// addKey adds key k with value v to the block mapping at p, after the line that ends its last
// value (so before the blank lines and comments that open what follows), at its keys' column.
func (d *document) addKey(p place, k string, v any, at Path) error {
	m := p.node
	lastKey, lastValue := m.Content[len(m.Content)-2], m.Content[len(m.Content)-1]
	r := d.renderer()
	if err := r.entry(k, v, m.Content[0].Column-1); err != nil {
		return d.errorf(m, at, "%w", err)
	}
	pos := d.lineAfter(lastValue, lastKey.Column-1)
	d.splice(splice{from: pos, to: pos, with: r.b.String()})
	return nil
}

// insertItem adds item v to the block list at the end of trail, with its dashes at the list's
// column (so in its own style, flush-left or indented): before the item whose field match is
// before (and the comments right above it), or after the last item when before is nil.
func (d *document) insertItem(trail []place, v any, match string, before any, at Path) error {
	l := trail[len(trail)-1].node
	dashCol := l.Column - 1
	pos := -1
	for i, item := range l.Content {
		if name, ok := fieldValue(item, match); ok && before != nil && equal(name, before) {
			if !d.ownLine(item, l) {
				return d.rewriteList(trail, at, insertedAt(i, v))
			}
			pos = d.commentsAbove(d.lineStart(d.dash(item, l)), dashCol)
		}
	}
	first := itemOrder
	if match != "" {
		first = append([]string{match}, itemOrder...)
	}
	r := d.renderer()
	if err := r.item(v, dashCol, first); err != nil {
		return d.errorf(l, at, "%w", err)
	}
	if pos < 0 {
		pos = d.lineAfter(l.Content[len(l.Content)-1], dashCol)
	}
	d.splice(splice{from: pos, to: pos, with: r.b.String()})
	return nil
}

// commentsAbove is where the comment lines right above the line at pos start, counting only
// comments at column col (those are about the line at pos; deeper ones belong to what is above).
func (d *document) commentsAbove(pos, col int) int {
	for pos > 0 {
		prev := d.lineStart(pos - 1)
		ind := d.indentAt(prev)
		if ind != col || prev+ind >= len(d.text) || d.text[prev+ind] != '#' {
			break
		}
		pos = prev
	}
	return pos
}

// isBlock reports whether n is a block mapping or list (one with something in it).
func isBlock(n *yaml.Node) bool {
	return (n.Kind == yaml.MappingNode || n.Kind == yaml.SequenceNode) &&
		n.Style&yaml.FlowStyle == 0 && len(n.Content) > 0
}

// renderer writes new values in the document's list style.
func (d *document) renderer() *renderer {
	return &renderer{listIndent: d.listIndent, quoteLines: d.quoteLines}
}
