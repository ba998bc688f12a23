package placement

import "bytes"

// span is one document of a file: its bytes are data[start:end], after the separator line
// that opens it (`---`, which may carry a comment), up to the next separator or `...` line or
// the end. sep is where its separator line starts, or -1 for a first document without one.
type span struct {
	sep, start, end int
}

// spans cuts a file into its documents by their separator lines, the way every reader of a
// stream of YAML documents does: a line that starts with `---` or `...` followed by the end
// of the line, a space or a tab. Documents are numbered by their place in the result, which is
// how Location.Doc and Edit count them; a document of only comments or blank lines is numbered
// too (and indexed as nothing). A `...` line ends a document; what follows up to the next
// `---` belongs to no document.
func spans(data []byte) []span {
	var out []span
	cur := span{sep: -1}
	open := true // the first document needs no separator
	for at := 0; at < len(data); {
		next := bytes.IndexByte(data[at:], '\n')
		end := len(data)
		if next >= 0 {
			end = at + next + 1
		}
		line := data[at:end]
		switch {
		case marker(line, "---"):
			if open {
				cur.end = at
				out = append(out, cur)
			}
			cur, open = span{sep: at, start: end}, true
		case marker(line, "..."):
			if open {
				cur.end = at
				out = append(out, cur)
			}
			open = false
		}
		at = end
	}
	if open {
		cur.end = len(data)
		out = append(out, cur)
	}
	// A file that starts with a separator has no document before it.
	if len(out) > 1 && out[0].sep == -1 && out[0].end == 0 {
		out = out[1:]
	}
	return out
}

// marker reports whether line is the document marker m (`---` or `...`) alone or followed by a
// space, a tab or the end of the line.
func marker(line []byte, m string) bool {
	if !bytes.HasPrefix(line, []byte(m)) {
		return false
	}
	rest := line[len(m):]
	return len(rest) == 0 || rest[0] == ' ' || rest[0] == '\t' || rest[0] == '\n' || rest[0] == '\r'
}
