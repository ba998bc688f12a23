package placement

import (
	"bytes"
	"fmt"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"
)

// fileLines is a file seen as lines, to turn the 1-based line and column (in characters) of
// yaml.v3's nodes into byte offsets and to splice whole lines.
type fileLines struct {
	data  []byte
	lines []int  // the offset where each line starts
	eol   string // the file's line ending: that of its first line, "\n" when it has none
}

func newFileLines(data []byte) fileLines {
	f := fileLines{data: data, lines: []int{0}, eol: "\n"}
	for i, c := range data {
		if c == '\n' && i+1 < len(data) {
			f.lines = append(f.lines, i+1)
		}
	}
	if i := bytes.IndexByte(data, '\n'); i > 0 && data[i-1] == '\r' {
		f.eol = "\r\n"
	}
	return f
}

// offset is the byte offset of line and column (1-based, the column in characters).
func (f *fileLines) offset(line, column int) int {
	at := f.lines[line-1]
	for range column - 1 {
		_, size := utf8.DecodeRune(f.data[at:])
		at += size
	}
	return at
}

// lineEnd is the offset just after line's line break (the file's end for its last line).
func (f *fileLines) lineEnd(line int) int {
	if line < len(f.lines) {
		return f.lines[line]
	}
	return len(f.data)
}

// lineOf is the line the byte at offset is on.
func (f *fileLines) lineOf(offset int) int {
	n := 0
	for n < len(f.lines) && f.lines[n] <= offset {
		n++
	}
	return n
}

// lineAt is the line s, ending as the file's lines do, to insert at offset at: at the end of a
// file whose last line has no line break, the break goes before s instead.
func (f *fileLines) lineAt(at int, s string) []byte {
	if at == len(f.data) && at > 0 && f.data[at-1] != '\n' {
		return []byte(f.eol + s)
	}
	return []byte(s + f.eol)
}

// itemEnd is the last line of a block list's item: its dash's line, and the lines after it
// indented deeper than the dash that are neither blank nor only a comment (a scalar that goes
// on over several lines).
func (f *fileLines) itemEnd(item *yaml.Node) int {
	line := f.data[f.lines[item.Line-1]:f.lineEnd(item.Line)]
	dash := bytes.IndexByte(line, '-')
	end := item.Line
	for n := item.Line + 1; n <= len(f.lines); n++ {
		line := f.data[f.lines[n-1]:f.lineEnd(n)]
		body := bytes.TrimLeft(line, " ")
		if t := bytes.TrimSpace(body); len(t) == 0 || t[0] == '#' || len(line)-len(body) <= dash {
			break
		}
		end = n
	}
	return end
}

// scalarEnd is the offset just after the scalar that starts at offset at: a quoted one's
// closing quote, or a plain one's last character before , ] } a comment or the line's end.
func (f *fileLines) scalarEnd(at int) int {
	d := f.data
	switch d[at] {
	case '"':
		return quotedEnd(d, at, '\\')
	case '\'':
		return quotedEnd(d, at, '\'')
	}
	end := at
	for i := at; i < len(d) && !plainEnds(d, i, at); i++ {
		if d[i] != ' ' && d[i] != '\t' {
			end = i + 1
		}
	}
	return end
}

// quotedEnd is the offset just after the closing quote of the quoted scalar that opens at
// offset at. escape is the character that makes the next one part of the text: \ in double
// quotes, a single quote in single quotes (where two of them stand for one).
func quotedEnd(d []byte, at int, escape byte) int {
	q := d[at]
	for i := at + 1; i < len(d); i++ {
		switch {
		case d[i] == escape && i+1 < len(d) && (escape == '\\' || d[i+1] == q):
			i++
		case d[i] == q:
			return i + 1
		}
	}
	return len(d)
}

// plainEnds reports whether the plain scalar that starts at offset start ends before offset i:
// at a line break, a flow list's , ] or }, a comment ( #) or a key's colon (": ", ":" at the
// end of the line).
func plainEnds(d []byte, i, start int) bool {
	switch d[i] {
	case ',', ']', '}', '\r', '\n':
		return true
	case '#':
		return i > start && (d[i-1] == ' ' || d[i-1] == '\t')
	case ':':
		return i+1 == len(d) || bytes.IndexByte([]byte(" \t\r\n,]}"), d[i+1]) >= 0
	}
	return false
}

// closingBracket is the offset of the ] that closes the empty flow list opening at offset open.
func (f *fileLines) closingBracket(open int) (int, error) {
	for i := open + 1; i < len(f.data); i++ {
		switch f.data[i] {
		case ']':
			return i, nil
		case ' ', '\t', '\r', '\n':
		default:
			return 0, fmt.Errorf("resources' empty list at byte %d is not closed by ]", open)
		}
	}
	return 0, fmt.Errorf("resources' empty list at byte %d is not closed", open)
}

// colonAfter is the offset of the colon that ends the mapping key key.
func (f *fileLines) colonAfter(key *yaml.Node) (int, error) {
	for i := f.scalarEnd(f.offset(key.Line, key.Column)); i < len(f.data); i++ {
		switch f.data[i] {
		case ':':
			return i, nil
		case ' ', '\t':
		default:
			return 0, fmt.Errorf("no colon after the key on line %d", key.Line)
		}
	}
	return 0, fmt.Errorf("no colon after the key on line %d", key.Line)
}

// spliced is data with data[start:end] replaced by insert, in a new slice.
func spliced(data []byte, start, end int, insert []byte) []byte {
	out := make([]byte, 0, len(data)-(end-start)+len(insert))
	out = append(out, data[:start]...)
	out = append(out, insert...)
	return append(out, data[end:]...)
}
