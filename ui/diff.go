package ui

import (
	"regexp"
	"strconv"
	"strings"
)

// lineKind is what a row of a diff view shows.
type lineKind string

const (
	lineContext lineKind = "ctx"
	lineAdded   lineKind = "add"
	lineRemoved lineKind = "del"
	lineHunk    lineKind = "hunk" // an @@ header; Text holds it
	lineNote    lineKind = "note" // headers, "\ No newline", the cut note; Text holds it
)

// diffLine is one line of a unified diff, ready to render.
type diffLine struct {
	Kind     lineKind
	Old, New int     // line numbers in live and desired; 0 when the line is not on that side
	Tokens   []token // the line's content without its +/-/space marker, highlighted as YAML
	Text     string  // hunk header or note text (Kind hunk/note)
}

// token is a piece of a line with its highlighting class: "" plain, "k" key, "s" string value,
// "n" number, bool or null, "c" comment, "p" punctuation (":", "- ", "|", ">", "---").
type token struct{ Class, Text string }

// splitRow is one row of the side-by-side view: a removed line beside the added line that
// replaced it; context lines on both sides; hunk and note rows span both (Left == Right).
type splitRow struct{ Left, Right *diffLine }

// parseDiff splits a unified diff, as writeback.UnifiedDiff writes it, into lines to render.
// The counts in each @@ header say how many lines the hunk holds on each side, so a content
// line is told from a header by position, not by look: a removed YAML line "-- x" reads
// "--- x" in the diff and is still a removal. Anything that is not where a diff would have it
// (file headers, "\ No newline at end of file", the note of a cut diff, a broken header, lines
// beyond a hunk's counts) becomes a note showing the line as it is. It never panics.
func parseDiff(diff string) []diffLine {
	if diff == "" {
		return nil
	}
	raw := strings.Split(strings.TrimSuffix(diff, "\n"), "\n")
	lines := make([]diffLine, 0, len(raw))
	// oldNo and newNo number the next line on each side; oldLeft and newLeft are the lines
	// the current hunk still holds there.
	var oldNo, newNo, oldLeft, newLeft int
	for _, l := range raw {
		marker := byte(' ') // an empty line in a hunk is an empty context line whose space was lost
		if l != "" {
			marker = l[0]
		}
		switch {
		case strings.HasPrefix(l, "@@"):
			var ok bool
			oldNo, oldLeft, newNo, newLeft, ok = parseHunkHeader(l)
			if !ok {
				oldLeft, newLeft = 0, 0
				lines = append(lines, diffLine{Kind: lineNote, Text: l})
				continue
			}
			lines = append(lines, diffLine{Kind: lineHunk, Text: l})
		case marker == ' ' && oldLeft > 0 && newLeft > 0:
			lines = append(lines, diffLine{Kind: lineContext, Old: oldNo, New: newNo, Tokens: highlightYAML(content(l))})
			oldNo, newNo, oldLeft, newLeft = oldNo+1, newNo+1, oldLeft-1, newLeft-1
		case marker == '-' && oldLeft > 0:
			lines = append(lines, diffLine{Kind: lineRemoved, Old: oldNo, Tokens: highlightYAML(l[1:])})
			oldNo, oldLeft = oldNo+1, oldLeft-1
		case marker == '+' && newLeft > 0:
			lines = append(lines, diffLine{Kind: lineAdded, New: newNo, Tokens: highlightYAML(l[1:])})
			newNo, newLeft = newNo+1, newLeft-1
		default:
			lines = append(lines, diffLine{Kind: lineNote, Text: l})
		}
	}
	return lines
}

// content is a diff line without its one-byte marker ("" for an empty line).
func content(l string) string {
	if l == "" {
		return ""
	}
	return l[1:]
}

// parseHunkHeader reads "@@ -a,b +c,d @@" (a count left out is 1, as diff -u writes a
// one-line range), followed by anything (git puts a section heading there).
func parseHunkHeader(h string) (oldStart, oldCount, newStart, newCount int, ok bool) {
	rest, ok := strings.CutPrefix(h, "@@ -")
	if !ok {
		return 0, 0, 0, 0, false
	}
	ranges, _, ok := strings.Cut(rest, " @@")
	if !ok {
		return 0, 0, 0, 0, false
	}
	oldRange, newRange, ok := strings.Cut(ranges, " +")
	if !ok {
		return 0, 0, 0, 0, false
	}
	oldStart, oldCount, okOld := parseRange(oldRange)
	newStart, newCount, okNew := parseRange(newRange)
	if !okOld || !okNew {
		return 0, 0, 0, 0, false
	}
	return oldStart, oldCount, newStart, newCount, true
}

// parseRange reads "start,count" or "start".
func parseRange(r string) (start, count int, ok bool) {
	s, c, hasCount := strings.Cut(r, ",")
	start, ok = parseLineNumber(s)
	count = 1
	if ok && hasCount {
		count, ok = parseLineNumber(c)
	}
	return start, count, ok
}

// parseLineNumber reads a number of at most 9 digits: more than any diff holds, and small
// enough that counting on from it cannot overflow.
func parseLineNumber(s string) (int, bool) {
	if s == "" || len(s) > 9 || strings.Trim(s, "0123456789") != "" {
		return 0, false
	}
	n, err := strconv.Atoi(s)
	return n, err == nil
}

// splitView lays lines out side by side. A run of removed lines and the run of added lines
// right after it are the same change, so they are paired in order, the shorter run's extra
// lines getting a nil partner; an added run with no removed run before it stands alone.
// Context lines show on both sides, hunk headers and notes span both.
func splitView(lines []diffLine) []splitRow {
	rows := make([]splitRow, 0, len(lines))
	for i := 0; i < len(lines); {
		l := &lines[i]
		if l.Kind != lineRemoved && l.Kind != lineAdded {
			rows = append(rows, splitRow{Left: l, Right: l})
			i++
			continue
		}
		var dels, adds, notes []*diffLine
		i = takeRun(lines, i, lineRemoved, &dels, &notes)
		i = takeRun(lines, i, lineAdded, &adds, &notes)
		for j := range max(len(dels), len(adds)) {
			var row splitRow
			if j < len(dels) {
				row.Left = dels[j]
			}
			if j < len(adds) {
				row.Right = adds[j]
			}
			rows = append(rows, row)
		}
		for _, n := range notes {
			rows = append(rows, splitRow{Left: n, Right: n})
		}
	}
	return rows
}

// takeRun appends to run the lines of kind from lines[i] on and returns the index after them.
// A "\ No newline at end of file" right after the run's last line goes to notes and does not
// end the run, so that changing a file's last line still shows as one pair.
func takeRun(lines []diffLine, i int, kind lineKind, run, notes *[]*diffLine) int {
	for ; i < len(lines); i++ {
		switch l := &lines[i]; {
		case l.Kind == kind:
			*run = append(*run, l)
		case l.Kind == lineNote && strings.HasPrefix(l.Text, `\`) && i > 0 && lines[i-1].Kind == kind:
			*notes = append(*notes, l)
		default:
			return i
		}
	}
	return i
}

// yamlNumber matches the plain scalars that YAML reads as numbers, booleans or null (the core
// schema, with its capitalised spellings).
var yamlNumber = regexp.MustCompile(`^(?:` +
	`[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?` +
	`|0o[0-7]+|0x[0-9a-fA-F]+` +
	`|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN)` +
	`|true|True|TRUE|false|False|FALSE|null|Null|NULL|~` +
	`)$`)

// highlightYAML cuts one line of YAML into tokens whose Text, put together, is line again. It
// knows the line alone, so it reads a line inside a block scalar or a multi-line string as if
// it were YAML of its own; at worst such a line is coloured oddly, never changed.
func highlightYAML(line string) []token {
	h := highlighter{rest: line}
	h.plain(" \t") // indentation
	if len(h.rest) == len(line) && (line == "---" || strings.HasPrefix(line, "--- ")) {
		h.emit("p", 3) // document separator; what may follow it is read as a value
		h.value()
		return h.out
	}
	// List item markers, any number of them ("- - a" is a list in a list).
	for h.rest == "-" || strings.HasPrefix(h.rest, "- ") {
		h.emit("p", min(2, len(h.rest)))
		h.plain(" \t")
	}
	if n := keyLen(h.rest); n > 0 {
		h.emit("k", n)
		h.emit("p", 1) // the ':'
	}
	h.value()
	return h.out
}

// highlighter takes a line apart from the front: each step moves bytes from rest into out.
type highlighter struct {
	rest string
	out  []token
}

// emit moves the first n bytes of rest to a token of class.
func (h *highlighter) emit(class string, n int) {
	if n > 0 {
		h.out = append(h.out, token{Class: class, Text: h.rest[:n]})
		h.rest = h.rest[n:]
	}
}

// plain moves the leading bytes of rest that are in set to a plain token and returns how many.
func (h *highlighter) plain(set string) int {
	n := len(h.rest) - len(strings.TrimLeft(h.rest, set))
	h.emit("", n)
	return n
}

// value reads what follows a key, a list marker or nothing: a scalar, a block scalar
// indicator, a comment, or nothing at all, each maybe followed by a comment.
func (h *highlighter) value() {
	h.plain(" \t")
	if h.rest == "" {
		return
	}
	switch h.rest[0] {
	case '#':
		h.emit("c", len(h.rest))
		return
	case '"', '\'':
		n, _ := quotedLen(h.rest) // an unclosed string goes on to the next line: all of it is string
		h.emit("s", n)
	case '|', '>':
		// The indicator with its chomping ("-", "+") and indentation digits.
		h.emit("p", 1+len(h.rest[1:])-len(strings.TrimLeft(h.rest[1:], "-+0123456789")))
	default:
		// A plain scalar ends where a comment begins; spaces before the comment are not in it.
		end := commentStart(h.rest)
		scalar := strings.TrimRight(h.rest[:end], " \t")
		class := "s"
		if yamlNumber.MatchString(scalar) {
			class = "n"
		}
		h.emit(class, len(scalar))
	}
	// After the value: a comment if spaces lead to a '#', else whatever is left, plain.
	if h.plain(" \t") > 0 && strings.HasPrefix(h.rest, "#") {
		h.emit("c", len(h.rest))
	}
	h.emit("", len(h.rest))
}

// keyLen is the length of the mapping key s starts with, without the ':' after it, or 0 when s
// does not start with a key. A key ends at the first ':' that is followed by a space or ends
// the line ("url: http://a:b" has the key "url"), and holds no comment; a quoted key ends with
// its closing quote.
func keyLen(s string) int {
	if s == "" {
		return 0
	}
	switch s[0] {
	case '"', '\'':
		n, closed := quotedLen(s)
		if closed && isKeyColon(s, n) {
			return n
		}
		return 0
	case '#', '[', '{': // a comment, or a flow collection whose ':'s are its own
		return 0
	}
	for i := 1; i < len(s); i++ {
		switch {
		case s[i] == '#' && isBlank(s[i-1]):
			return 0 // a comment before any ':'
		case isKeyColon(s, i):
			return i
		}
	}
	return 0
}

// isKeyColon reports whether s[i] is a ':' that ends a key: followed by a blank or the end.
func isKeyColon(s string, i int) bool {
	return i < len(s) && s[i] == ':' && (i+1 == len(s) || isBlank(s[i+1]))
}

// quotedLen is the length of the quoted string s starts with, closing quote included, and
// whether it closes on this line (else it is len(s)). Inside double quotes a backslash
// escapes the next character; inside single quotes two quotes stand for one.
func quotedLen(s string) (n int, closed bool) {
	q := s[0]
	for i := 1; i < len(s); i++ {
		switch {
		case q == '"' && s[i] == '\\':
			i++
		case s[i] == q && q == '\'' && i+1 < len(s) && s[i+1] == '\'':
			i++
		case s[i] == q:
			return i + 1, true
		}
	}
	return len(s), false
}

// commentStart is the index of the '#' that starts a comment in s (one after a blank), or
// len(s) when there is none.
func commentStart(s string) int {
	for i := 1; i < len(s); i++ {
		if s[i] == '#' && isBlank(s[i-1]) {
			return i
		}
	}
	return len(s)
}

// isBlank reports whether b is a space or a tab, which separate things in a YAML line.
func isBlank(b byte) bool { return b == ' ' || b == '\t' }
