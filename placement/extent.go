package placement

import (
	"bytes"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"
)

// This file finds where a node's text starts and ends. yaml.v3 gives only where a node starts
// (its line and column, the column counted in characters); the end is found by reading the
// node's token again as the YAML reader did: a quoted scalar up to its closing quote, a plain
// one up to a comment or the end of its lines, a block scalar over its indented lines, a flow
// collection up to its closing bracket, a block collection up to the end of its last child.

// offset is the byte offset of a 1-based line and character column.
func (d *document) offset(line, col int) int {
	if line < 1 {
		return 0
	}
	if line > len(d.lines) {
		return len(d.text)
	}
	at := d.lines[line-1]
	for i := 1; i < col && at < len(d.text) && d.text[at] != '\n'; i++ {
		_, size := utf8.DecodeRune(d.text[at:])
		at += size
	}
	return at
}

// lineStart is where the line holding offset at starts.
func (d *document) lineStart(at int) int { return bytes.LastIndexByte(d.text[:at], '\n') + 1 }

// lineEnd is the offset of the newline that ends the line holding at (len(text) on a last line
// without one).
func (d *document) lineEnd(at int) int {
	if i := bytes.IndexByte(d.text[at:], '\n'); i >= 0 {
		return at + i
	}
	return len(d.text)
}

// nextLine is where the line after the one holding at starts (len(text) if there is none).
func (d *document) nextLine(at int) int {
	if e := d.lineEnd(at); e < len(d.text) {
		return e + 1
	}
	return len(d.text)
}

// indentAt is the number of spaces that open the line starting at offset at.
func (d *document) indentAt(at int) int {
	n := 0
	for at+n < len(d.text) && d.text[at+n] == ' ' {
		n++
	}
	return n
}

// blankFrom reports whether the line from at holds only spaces and tabs.
func (d *document) blankFrom(at int) bool {
	return len(bytes.Trim(d.text[at:d.lineEnd(at)], " \t\r")) == 0
}

// contentEnd is lineEnd before the carriage return of a line that ends with CRLF (in a file
// that mixes line ends; one that ends every line so is edited with LF).
func (d *document) contentEnd(at int) int {
	e := d.lineEnd(at)
	if e > at && d.text[e-1] == '\r' {
		return e - 1
	}
	return e
}

// firstOnLine reports whether only spaces come before offset at on its line.
func (d *document) firstOnLine(at int) bool {
	return d.indentAt(d.lineStart(at)) == at-d.lineStart(at)
}

// start is where node n's own token starts, after any tag or anchor in front of it.
func (d *document) start(n *yaml.Node) int {
	at := d.offset(n.Line, n.Column)
	for at < len(d.text) && (d.text[at] == '!' || d.text[at] == '&') {
		for at < len(d.text) && !isSpace(d.text[at]) {
			at++
		}
		for at < len(d.text) && (d.text[at] == ' ' || d.text[at] == '\t') {
			at++
		}
	}
	return at
}

// end is the offset just after the last character of node n, whose parent (the key of a
// mapping's value, the dash of a list's item) stands at column parentCol (0-based; -1 for the
// document's root).
func (d *document) end(n *yaml.Node, parentCol int) int {
	at := d.start(n)
	switch {
	case n.Kind == yaml.AliasNode:
		return at + 1 + len(n.Value)
	case n.Kind == yaml.MappingNode || n.Kind == yaml.SequenceNode:
		if n.Style&yaml.FlowStyle != 0 || len(n.Content) == 0 {
			return d.flowEnd(at)
		}
		last := n.Content[len(n.Content)-1]
		if n.Kind == yaml.MappingNode {
			return d.end(last, n.Content[len(n.Content)-2].Column-1)
		}
		return d.end(last, n.Column-1)
	case n.Style&(yaml.DoubleQuotedStyle|yaml.SingleQuotedStyle) != 0:
		return d.quotedEnd(at)
	case n.Style&(yaml.LiteralStyle|yaml.FoldedStyle) != 0:
		return d.blockEnd(at, parentCol)
	}
	return d.plainEnd(at, parentCol)
}

// quotedEnd is the end of the single- or double-quoted scalar that starts at at.
func (d *document) quotedEnd(at int) int {
	q := d.text[at]
	for i := at + 1; i < len(d.text); i++ {
		switch {
		case q == '"' && d.text[i] == '\\':
			i++
		case q == '\'' && d.text[i] == '\'' && i+1 < len(d.text) && d.text[i+1] == '\'':
			i++
		case d.text[i] == q:
			return i + 1
		}
	}
	return len(d.text)
}

// plainEnd is the end of the plain scalar that starts at at: the rest of its line up to a
// comment, and the lines that continue it (more indented than its parent, not comments).
func (d *document) plainEnd(at, parentCol int) int {
	end, comment := d.plainLine(at)
	if end == at || comment {
		return end
	}
	for next := d.nextLine(at); next < len(d.text); next = d.nextLine(next) {
		if d.blankFrom(next) {
			continue
		}
		ind := d.indentAt(next)
		if ind <= parentCol || d.text[next+ind] == '#' {
			break
		}
		end, comment = d.plainLine(next + ind)
		if comment {
			break
		}
	}
	return end
}

// plainLine is the end of a plain scalar's text on the line from at, trailing blanks trimmed,
// and whether a comment follows it there.
func (d *document) plainLine(at int) (int, bool) {
	le := d.lineEnd(at)
	stop, comment := le, false
	for i := at; i < le; i++ {
		if d.text[i] == '#' && i > at && (d.text[i-1] == ' ' || d.text[i-1] == '\t') {
			stop, comment = i, true
			break
		}
	}
	for stop > at && (d.text[stop-1] == ' ' || d.text[stop-1] == '\t' || d.text[stop-1] == '\r') {
		stop--
	}
	return stop, comment
}

// blockEnd is the end of the block scalar (| or >) whose header starts at at: the end of its
// last line that is not blank and is more indented than its parent, or, when the header keeps
// its last line breaks (|+), of the blank lines after that too.
func (d *document) blockEnd(at, parentCol int) int {
	header := d.headerEnd(at)
	keep := bytes.IndexByte(d.text[at:header], '+') >= 0
	end, blank := header, header
	for next := d.nextLine(at); next < len(d.text); next = d.nextLine(next) {
		if d.blankFrom(next) {
			blank = d.lineEnd(next)
			continue
		}
		if d.indentAt(next) <= parentCol {
			break
		}
		end = d.contentEnd(next)
	}
	if keep && blank > end {
		return blank
	}
	return end
}

// headerEnd is the end of a block scalar's header token (|, >-, |2+ …) that starts at at.
func (d *document) headerEnd(at int) int {
	i := at + 1
	for i < len(d.text) && bytes.IndexByte([]byte("+-0123456789"), d.text[i]) >= 0 {
		i++
	}
	return i
}

// flowEnd is the end of the flow collection that starts at at, past its closing bracket.
func (d *document) flowEnd(at int) int {
	depth := 0
	for i := at; i < len(d.text); i++ {
		switch c := d.text[i]; {
		case (c == '"' || c == '\'') && (i == at || bytes.IndexByte([]byte("[{,: \t\n"), d.text[i-1]) >= 0):
			i = d.quotedEnd(i) - 1
		case c == '#' && i > at && isSpace(d.text[i-1]):
			i = d.lineEnd(i) - 1
		case c == '[' || c == '{':
			depth++
		case c == ']' || c == '}':
			depth--
			if depth == 0 {
				return i + 1
			}
		}
	}
	return len(d.text)
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// dash is the offset of the "-" that opens item of list: at the list's column, on the item's
// line or, for an item that starts below its dash (after a comment, say), the nearest line
// above that has one there.
func (d *document) dash(item, list *yaml.Node) int {
	col, start := list.Column-1, d.offset(item.Line, item.Column)
	for line := item.Line; line >= list.Line && line >= 1; line-- {
		at := d.offset(line, col+1)
		if at < len(d.text) && d.text[at] == '-' && at-d.lines[line-1] == col && at < start {
			return at
		}
	}
	return start
}

// lineAfter is where the line after the one ending node n (parent at parentCol) starts; a
// document whose last line has no newline gets one, so that a line can be added after it.
func (d *document) lineAfter(n *yaml.Node, parentCol int) int {
	end := d.lineEnd(d.end(n, parentCol))
	if end == len(d.text) {
		d.splice(splice{from: end, to: end, with: "\n"})
	}
	return end + 1
}
