package placement

import (
	"go.yaml.in/yaml/v3"
)

// An item that shares its line with the dash of the item that holds it (- - a: a list in a
// list) cannot be cut out or put in by its lines: the list that holds it is written again
// instead, as a whole.

// ownLine reports whether the dash of item of list opens its line.
func (d *document) ownLine(item, list *yaml.Node) bool { return d.firstOnLine(d.dash(item, list)) }

// rewriteList writes the list at the end of trail again, with the items change makes of its
// items.
func (d *document) rewriteList(trail []place, at Path, change func([]any) []any) error {
	l := trail[len(trail)-1].node
	cur, err := valueOf(l)
	if err != nil {
		return d.errorf(l, at, "%w", err)
	}
	return d.replace(trail, change(cur.([]any)), at)
}

// indexOf is the index of item n in list l.
func indexOf(l, n *yaml.Node) int {
	for i, c := range l.Content {
		if c == n {
			return i
		}
	}
	return -1
}

// without is the change that removes item i.
func without(i int) func([]any) []any {
	return func(l []any) []any { return append(append([]any{}, l[:i]...), l[i+1:]...) }
}

// insertedAt is the change that puts v in at index i.
func insertedAt(i int, v any) func([]any) []any {
	return func(l []any) []any { return append(append(append([]any{}, l[:i]...), v), l[i:]...) }
}

// replacedAt is the change that makes item i v.
func replacedAt(i int, v any) func([]any) []any {
	return func(l []any) []any {
		out := append([]any{}, l...)
		out[i] = v
		return out
	}
}
