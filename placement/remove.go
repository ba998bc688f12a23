package placement

import (
	"go.yaml.in/yaml/v3"
)

// remove deletes the node at the end of trail with its lines: a mapping's key and its whole
// value, or a list's item. The comment lines after it stay (they are about what follows). A
// mapping or list left empty is written {} or [].
func (d *document) remove(trail []place, at Path) error {
	p := trail[len(trail)-1]
	if err := d.plainTree(p.node, at); err != nil {
		return err
	}
	parent := p.parent
	switch {
	case parent.Kind == yaml.MappingNode && len(parent.Content) <= 2:
		return d.replaceInline(trail[:len(trail)-1], "{}")
	case parent.Kind == yaml.SequenceNode && len(parent.Content) <= 1:
		return d.replaceInline(trail[:len(trail)-1], "[]")
	case p.key != nil:
		return d.removeEntry(p, at)
	case !d.ownLine(p.node, parent):
		return d.rewriteList(trail[:len(trail)-1], at, without(indexOf(parent, p.node)))
	}
	return d.removeItem(p)
}

// removeEntry deletes the key of p and its value. When the key opens a list item's line
// (- name: web), the key after it moves up into its place.
func (d *document) removeEntry(p place, at Path) error {
	keyAt := d.offset(p.key.Line, p.key.Column)
	if d.firstOnLine(keyAt) {
		to := d.nextLine(d.end(p.node, p.key.Column-1))
		d.splice(splice{from: d.lineStart(keyAt), to: to})
		return nil
	}
	m := p.parent.Content
	for i := 0; i+2 < len(m); i += 2 {
		if m[i] == p.key {
			next := m[i+2]
			d.splice(splice{from: keyAt, to: d.offset(next.Line, next.Column)})
			return nil
		}
	}
	return d.errorf(p.key, at, "a last key that shares its line with another")
}

// removeItem deletes list item p, whose dash opens its line: the dash's line to the end of the
// item.
func (d *document) removeItem(p place) error {
	dash := d.dash(p.node, p.parent)
	to := d.nextLine(d.end(p.node, p.parent.Column-1))
	d.splice(splice{from: d.lineStart(dash), to: to})
	return nil
}
