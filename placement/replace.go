package placement

import (
	"go.yaml.in/yaml/v3"
)

// setScalar replaces scalar p's token with v, in place: the rest of its line (a comment) stays,
// and so does the comment on a block scalar's header line. A string keeps the quotes it had
// when it can (see replacement); a tag in front of the token goes with it.
func (d *document) setScalar(p place, v any, at Path) error {
	n := p.node
	col := p.parentCol()
	head, body, err := replacement(n, v, col+2, d.quoteLines)
	if err != nil {
		return d.errorf(n, at, "%w", err)
	}
	from, token := d.offset(n.Line, n.Column), d.start(n)
	if from > 0 && !isSpace(d.text[from-1]) {
		head = " " + head // a null with no token: `key:`
	}
	if body != "" {
		body = "\n" + body
	}
	end := d.end(n, col)
	if n.Style&(yaml.LiteralStyle|yaml.FoldedStyle) != 0 {
		comment := string(d.text[d.headerEnd(token):d.contentEnd(token)])
		d.splice(splice{from: from, to: end, with: head + comment + body})
		return nil
	}
	le := d.lineEnd(end)
	d.splice(splice{from: from, to: le, with: head + string(d.text[end:le]) + body})
	return nil
}

// replace writes the node at the end of trail again as v: a non-empty mapping or list in block
// style, anything else on the line of its key or dash.
func (d *document) replace(trail []place, v any, at Path) error {
	p := trail[len(trail)-1]
	if err := d.plainTree(p.node, at); err != nil {
		return err
	}
	switch x := v.(type) {
	case map[string]any:
		if len(x) > 0 {
			return d.replaceBlock(trail, v, at)
		}
	case []any:
		if len(x) > 0 {
			return d.replaceBlock(trail, v, at)
		}
	}
	// A literal block cannot stand where a collection's lines were.
	text, err := (&renderer{quoteLines: true}).scalar(v, 0)
	if err != nil {
		return d.errorf(p.node, at, "%w", err)
	}
	return d.replaceInline(trail, text)
}

// replaceInline writes text, a scalar or flow collection on one line, in place of the node at
// the end of trail. A block collection under a key loses its lines and text goes after the
// key's colon, before any comment on the key's line.
func (d *document) replaceInline(trail []place, text string) error {
	p := trail[len(trail)-1]
	n := p.node
	if p.key != nil && isBlock(n) {
		colon := d.colonAfter(p.key)
		to := d.nextLine(d.end(n, p.key.Column-1))
		d.splice(splice{from: colon + 1, to: colon + 1, with: " " + text}, splice{from: d.lineStart(d.start(n)), to: to})
		return nil
	}
	from, end := d.offset(n.Line, n.Column), d.end(n, p.parentCol())
	if from > 0 && !isSpace(d.text[from-1]) {
		text = " " + text
	}
	d.splice(splice{from: from, to: end, with: text})
	return nil
}

// replaceBlock writes the non-empty mapping or list v in block style in place of the node at
// the end of trail: under its key (a list in the style of the list it replaces, or of the
// document), or as the list item it is.
func (d *document) replaceBlock(trail []place, v any, at Path) error {
	p := trail[len(trail)-1]
	n := p.node
	r := d.renderer()
	switch {
	case p.parent == nil:
		return d.errorf(n, at, "the document's root is not replaced")
	case p.key == nil && !d.ownLine(n, p.parent):
		return d.rewriteList(trail[:len(trail)-1], at, replacedAt(indexOf(p.parent, n), v))
	case p.key == nil:
		return d.replaceItem(p, v, r, at)
	}
	keyCol := p.key.Column - 1
	if n.Kind == yaml.SequenceNode && isBlock(n) && n.Column > keyCol {
		r.listIndent = n.Column - 1 - keyCol
	}
	var err error
	switch x := v.(type) {
	case map[string]any:
		err = r.entries(x, orderFor(at), keyCol+2)
	case []any:
		err = r.items(x, keyCol+r.listIndent)
	}
	if err != nil {
		return d.errorf(n, at, "%w", err)
	}
	if isBlock(n) {
		to := d.nextLine(d.end(n, keyCol))
		d.splice(splice{from: d.lineStart(d.start(n)), to: to, with: r.b.String()})
		return nil
	}
	colon, end := d.colonAfter(p.key), d.end(n, keyCol)
	pos := d.lineAfter(n, keyCol)
	d.splice(splice{from: colon + 1, to: end}, splice{from: pos, to: pos, with: r.b.String()})
	return nil
}

// replaceItem writes list item p, whose dash opens its line, again as v, its dash where p's is.
func (d *document) replaceItem(p place, v any, r *renderer, at Path) error {
	dash := d.dash(p.node, p.parent)
	dashCol := p.parent.Column - 1
	if err := r.item(v, dashCol, itemOrder); err != nil {
		return d.errorf(p.node, at, "%w", err)
	}
	to := d.nextLine(d.end(p.node, dashCol))
	d.splice(splice{from: d.lineStart(dash), to: to, with: r.b.String()})
	return nil
}

// colonAfter is the offset of the colon that follows key k.
func (d *document) colonAfter(k *yaml.Node) int {
	at := d.start(k)
	if k.Style&(yaml.DoubleQuotedStyle|yaml.SingleQuotedStyle) != 0 {
		at = d.quotedEnd(at)
	} else {
		at += len(k.Value)
	}
	for at < len(d.text) && d.text[at] != ':' {
		at++
	}
	return at
}
