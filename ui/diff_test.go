package ui

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/configbutler/gitops-reverser/writeback"
)

// show writes a parsed diff as one string a line, "kind old new text", so that tables can
// say what a diff should parse into at a glance.
func show(lines []diffLine) []string {
	out := make([]string, 0, len(lines))
	for _, l := range lines {
		text := l.Text
		if l.Kind != lineHunk && l.Kind != lineNote {
			text = joinTokens(l.Tokens)
		}
		out = append(out, fmt.Sprintf("%s %d %d %s", l.Kind, l.Old, l.New, text))
	}
	return out
}

func joinTokens(tokens []token) string {
	var b strings.Builder
	for _, t := range tokens {
		b.WriteString(t.Text)
	}
	return b.String()
}

const liveConfigMap = `apiVersion: v1
kind: ConfigMap
metadata:
  name: demo
  namespace: default
data:
  a: "1"
  b: two
  c: three
  d: four
  e: five
`

const desiredConfigMap = `apiVersion: v1
kind: ConfigMap
metadata:
  name: demo
  namespace: default
data:
  a: "1"
  b: 2
  c: three
  d: four
  e: five
  f: six
`

func TestParseDiff(t *testing.T) {
	huge := strings.Repeat("key: value\n", writeback.MaxDiffBytes/10)
	tests := []struct {
		name string
		diff string
		want []string
	}{
		{
			name: "an update numbers lines on both sides from the hunk header",
			diff: writeback.UnifiedDiff([]byte(liveConfigMap), []byte(desiredConfigMap), "", ""),
			want: []string{
				"note 0 0 --- live",
				"note 0 0 +++ desired",
				"hunk 0 0 @@ -5,7 +5,8 @@",
				"ctx 5 5   namespace: default",
				"ctx 6 6 data:",
				`ctx 7 7   a: "1"`,
				"del 8 0   b: two",
				"add 0 8   b: 2",
				"ctx 9 9   c: three",
				"ctx 10 10   d: four",
				"ctx 11 11   e: five",
				"add 0 12   f: six",
			},
		},
		{
			name: "a create has only added lines",
			diff: writeback.UnifiedDiff(nil, []byte("a: 1\nb: 2\n"), "", ""),
			want: []string{
				"note 0 0 --- live",
				"note 0 0 +++ desired",
				"hunk 0 0 @@ -0,0 +1,2 @@",
				"add 0 1 a: 1",
				"add 0 2 b: 2",
			},
		},
		{
			name: "a destroy has only removed lines, and a quoted header name stays as written",
			diff: writeback.UnifiedDiff([]byte("a: 1\nb: 2\n"), nil, "x\ty", ""),
			want: []string{
				`note 0 0 --- "x\ty"`,
				"note 0 0 +++ desired",
				"hunk 0 0 @@ -1,2 +0,0 @@",
				"del 1 0 a: 1",
				"del 2 0 b: 2",
			},
		},
		{
			name: "no newline at end of file is a note after its line",
			diff: writeback.UnifiedDiff([]byte("a: 1\nb: 2"), []byte("a: 1\nb: 3\n"), "", ""),
			want: []string{
				"note 0 0 --- live",
				"note 0 0 +++ desired",
				"hunk 0 0 @@ -1,2 +1,2 @@",
				"ctx 1 1 a: 1",
				"del 2 0 b: 2",
				`note 0 0 \ No newline at end of file`,
				"add 0 2 b: 3",
			},
		},
		{
			name: "a cut diff ends with its note, after a line cut short",
			diff: "--- live\n+++ desired\n@@ -1,3 +1,3 @@\n a: 1\n-b: tw\n... 3 more lines (20 bytes) of the diff left out\n",
			want: []string{
				"note 0 0 --- live",
				"note 0 0 +++ desired",
				"hunk 0 0 @@ -1,3 +1,3 @@",
				"ctx 1 1 a: 1",
				"del 2 0 b: tw",
				"note 0 0 ... 3 more lines (20 bytes) of the diff left out",
			},
		},
		{
			name: "lines that look like headers inside a hunk are content",
			diff: "@@ -1,2 +1,2 @@\n--- a\n-b\n+++ c\n+d\n",
			want: []string{
				"hunk 0 0 @@ -1,2 +1,2 @@",
				"del 1 0 -- a",
				"del 2 0 b",
				"add 0 1 ++ c",
				"add 0 2 d",
			},
		},
		{
			name: "one-line ranges and a section heading after the header",
			diff: "@@ -3 +4 @@ data:\n-a\n+b\n",
			want: []string{
				"hunk 0 0 @@ -3 +4 @@ data:",
				"del 3 0 a",
				"add 0 4 b",
			},
		},
		{
			name: "an empty line in a hunk is an empty context line",
			diff: "@@ -1,2 +1,2 @@\n\n-a\n+b\n",
			want: []string{
				"hunk 0 0 @@ -1,2 +1,2 @@",
				"ctx 1 1 ",
				"del 2 0 a",
				"add 0 2 b",
			},
		},
		{
			name: "malformed lines become notes",
			diff: "garbage\n@@ -x +1 @@\n-a\n@@ -1 +1 @@\n-a\n+b\n+c\n x\n@@ -99999999999 +1 @@\n",
			want: []string{
				"note 0 0 garbage",
				"note 0 0 @@ -x +1 @@",
				"note 0 0 -a",
				"hunk 0 0 @@ -1 +1 @@",
				"del 1 0 a",
				"add 0 1 b",
				"note 0 0 +c",
				"note 0 0  x",
				"note 0 0 @@ -99999999999 +1 @@",
			},
		},
		{
			name: "an empty diff has no lines",
			diff: "",
			want: []string{},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := show(parseDiff(tt.diff)); !slices.Equal(got, tt.want) {
				t.Errorf("parseDiff(%q) =\n%s\nwant\n%s", tt.diff, strings.Join(got, "\n"), strings.Join(tt.want, "\n"))
			}
		})
	}

	t.Run("a diff too long to keep ends with the cut note", func(t *testing.T) {
		lines := parseDiff(writeback.UnifiedDiff(nil, []byte(huge), "", ""))
		last := lines[len(lines)-1]
		if last.Kind != lineNote || !strings.HasSuffix(last.Text, "of the diff left out") {
			t.Errorf("last line = %+v, want the cut note", last)
		}
		if before := lines[len(lines)-2]; before.Kind != lineAdded || before.New != len(lines)-4 {
			t.Errorf("line before the note = %+v, want added line %d", before, len(lines)-4)
		}
	})
}

func TestSplitView(t *testing.T) {
	tests := []struct {
		name string
		diff string
		want []string // "left | right", "-" for no line
	}{
		{
			name: "a changed line sits beside its replacement",
			diff: "@@ -1,3 +1,3 @@\n a\n-b\n+B\n c\n",
			want: []string{"hunk 0 0 @@ -1,3 +1,3 @@ | same", "ctx 1 1 a | same", "del 2 0 b | add 0 2 B", "ctx 3 3 c | same"},
		},
		{
			name: "more removed than added lines leaves the extra removed ones alone",
			diff: "@@ -1,3 +1,1 @@\n-a\n-b\n-c\n+A\n",
			want: []string{"hunk 0 0 @@ -1,3 +1,1 @@ | same", "del 1 0 a | add 0 1 A", "del 2 0 b | -", "del 3 0 c | -"},
		},
		{
			name: "more added than removed lines leaves the extra added ones alone",
			diff: "@@ -1,1 +1,3 @@\n-a\n+A\n+B\n+C\n",
			want: []string{"hunk 0 0 @@ -1,1 +1,3 @@ | same", "del 1 0 a | add 0 1 A", "- | add 0 2 B", "- | add 0 3 C"},
		},
		{
			name: "added lines after context stand alone",
			diff: "@@ -1,1 +1,2 @@\n a\n+b\n",
			want: []string{"hunk 0 0 @@ -1,1 +1,2 @@ | same", "ctx 1 1 a | same", "- | add 0 2 b"},
		},
		{
			name: "added lines before removed ones are two changes",
			diff: "@@ -1,1 +1,1 @@\n+b\n-a\n",
			want: []string{"hunk 0 0 @@ -1,1 +1,1 @@ | same", "- | add 0 1 b", "del 1 0 a | -"},
		},
		{
			name: "no newline at end of file does not split a change",
			diff: "@@ -1,1 +1,1 @@\n-a\n\\ No newline at end of file\n+b\n\\ No newline at end of file\n",
			want: []string{
				"hunk 0 0 @@ -1,1 +1,1 @@ | same",
				"del 1 0 a | add 0 1 b",
				`note 0 0 \ No newline at end of file | same`,
				`note 0 0 \ No newline at end of file | same`,
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			for _, r := range splitView(parseDiff(tt.diff)) {
				got = append(got, showRow(r))
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("splitView(%q) =\n%s\nwant\n%s", tt.diff, strings.Join(got, "\n"), strings.Join(tt.want, "\n"))
			}
		})
	}
}

// showRow writes a row as "left | right", with "same" for a right side that is the left line
// and "-" for a missing line.
func showRow(r splitRow) string {
	side := func(l *diffLine) string {
		if l == nil {
			return "-"
		}
		return show([]diffLine{*l})[0]
	}
	right := side(r.Right)
	if r.Left != nil && r.Left == r.Right {
		right = "same"
	}
	return side(r.Left) + " | " + right
}

func TestHighlightYAML(t *testing.T) {
	tests := []struct {
		name string
		line string
		want []token
	}{
		{
			name: "key and string value",
			line: "kind: ConfigMap",
			want: []token{{"k", "kind"}, {"p", ":"}, {"", " "}, {"s", "ConfigMap"}},
		},
		{
			name: "nested key in a list item",
			line: "  - name: web",
			want: []token{{"", "  "}, {"p", "- "}, {"k", "name"}, {"p", ":"}, {"", " "}, {"s", "web"}},
		},
		{
			name: "key with nothing after it",
			line: "metadata:",
			want: []token{{"k", "metadata"}, {"p", ":"}},
		},
		{
			name: "list item with a plain value",
			line: "- a b",
			want: []token{{"p", "- "}, {"s", "a b"}},
		},
		{
			name: "list in a list",
			line: "- - 1",
			want: []token{{"p", "- "}, {"p", "- "}, {"n", "1"}},
		},
		{
			name: "quoted key",
			line: `  "app.kubernetes.io/name": web`,
			want: []token{{"", "  "}, {"k", `"app.kubernetes.io/name"`}, {"p", ":"}, {"", " "}, {"s", "web"}},
		},
		{
			name: "single-quoted key with a colon and a doubled quote inside",
			line: `'a: ''b''': c`,
			want: []token{{"k", `'a: ''b'''`}, {"p", ":"}, {"", " "}, {"s", "c"}},
		},
		{
			name: "comment after a value",
			line: "replicas: 3 # scaled by hand",
			want: []token{{"k", "replicas"}, {"p", ":"}, {"", " "}, {"n", "3"}, {"", " "}, {"c", "# scaled by hand"}},
		},
		{
			name: "comment on its own line",
			line: "  # owned by team a: b",
			want: []token{{"", "  "}, {"c", "# owned by team a: b"}},
		},
		{
			name: "comment after a key",
			line: "data: # keys",
			want: []token{{"k", "data"}, {"p", ":"}, {"", " "}, {"c", "# keys"}},
		},
		{
			name: "hash inside quotes is no comment",
			line: `color: "#ff0000" # red`,
			want: []token{{"k", "color"}, {"p", ":"}, {"", " "}, {"s", `"#ff0000"`}, {"", " "}, {"c", "# red"}},
		},
		{
			name: "hash inside a plain scalar is no comment",
			line: "url: http://a/#b",
			want: []token{{"k", "url"}, {"p", ":"}, {"", " "}, {"s", "http://a/#b"}},
		},
		{
			name: "escaped quote inside a double-quoted value",
			line: `msg: "say \"hi\" # no"`,
			want: []token{{"k", "msg"}, {"p", ":"}, {"", " "}, {"s", `"say \"hi\" # no"`}},
		},
		{
			name: "block indicator",
			line: "  script: |-",
			want: []token{{"", "  "}, {"k", "script"}, {"p", ":"}, {"", " "}, {"p", "|-"}},
		},
		{
			name: "folded block indicator with indentation and a comment",
			line: "text: >2+ # folded",
			want: []token{{"k", "text"}, {"p", ":"}, {"", " "}, {"p", ">2+"}, {"", " "}, {"c", "# folded"}},
		},
		{
			name: "number",
			line: "port: -8080.5e3",
			want: []token{{"k", "port"}, {"p", ":"}, {"", " "}, {"n", "-8080.5e3"}},
		},
		{
			name: "bool",
			line: "enabled: true",
			want: []token{{"k", "enabled"}, {"p", ":"}, {"", " "}, {"n", "true"}},
		},
		{
			name: "null",
			line: "value: null",
			want: []token{{"k", "value"}, {"p", ":"}, {"", " "}, {"n", "null"}},
		},
		{
			name: "tilde is null",
			line: "- ~",
			want: []token{{"p", "- "}, {"n", "~"}},
		},
		{
			name: "quoted number is a string",
			line: `a: "1"`,
			want: []token{{"k", "a"}, {"p", ":"}, {"", " "}, {"s", `"1"`}},
		},
		{
			name: "url with colons inside the value",
			line: "url: http://a:b",
			want: []token{{"k", "url"}, {"p", ":"}, {"", " "}, {"s", "http://a:b"}},
		},
		{
			name: "colon without a space is part of the key",
			line: "a:b: c",
			want: []token{{"k", "a:b"}, {"p", ":"}, {"", " "}, {"s", "c"}},
		},
		{
			name: "document separator",
			line: "---",
			want: []token{{"p", "---"}},
		},
		{
			name: "flow collection is a value",
			line: "args: [a: b, c]",
			want: []token{{"k", "args"}, {"p", ":"}, {"", " "}, {"s", "[a: b, c]"}},
		},
		{
			name: "unclosed quote runs to the end of the line",
			line: `  - "a b`,
			want: []token{{"", "  "}, {"p", "- "}, {"s", `"a b`}},
		},
		{
			name: "trailing spaces are plain",
			line: "a: b  ",
			want: []token{{"k", "a"}, {"p", ":"}, {"", " "}, {"s", "b"}, {"", "  "}},
		},
		{
			name: "empty line",
			line: "",
			want: nil,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := highlightYAML(tt.line)
			if !slices.Equal(got, tt.want) {
				t.Errorf("highlightYAML(%q) = %q, want %q", tt.line, got, tt.want)
			}
			if joined := joinTokens(got); joined != tt.line {
				t.Errorf("tokens join to %q, want %q", joined, tt.line)
			}
		})
	}
}

func FuzzHighlightYAML(f *testing.F) {
	for _, s := range []string{"", "a: b", `  - "k": 'v''' # c`, "x: |-", "--- # doc", "- - -", `"unclosed\`, "a:\tb\t#c", "\xff: \xfe"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, line string) {
		tokens := highlightYAML(line)
		if joined := joinTokens(tokens); joined != line {
			t.Fatalf("highlightYAML(%q) joins to %q", line, joined)
		}
		for _, tok := range tokens {
			if tok.Text == "" {
				t.Fatalf("highlightYAML(%q) has an empty token: %q", line, tokens)
			}
		}
	})
}

func FuzzParseDiff(f *testing.F) {
	f.Add(writeback.UnifiedDiff([]byte(liveConfigMap), []byte(desiredConfigMap), "", ""))
	f.Add(writeback.UnifiedDiff([]byte("a: 1\nb: 2"), []byte("a: 1\nb: 3\n"), "x\ny", ""))
	f.Add("@@ -1 +1 @@\n-a\n+b\n... 1 more lines (2 bytes) of the diff left out\n")
	f.Add("@@ -999999999,999999999 +0,1 @@\n\n+\n")
	f.Add("@@ -1,2 +1 @@ @@\n--- a\n\\\n")
	f.Fuzz(func(t *testing.T, diff string) {
		lines := parseDiff(diff)
		rows := splitView(lines)
		for _, l := range lines {
			switch l.Kind {
			case lineAdded, lineRemoved:
				if (l.Kind == lineAdded && l.Old != 0) || (l.Kind == lineRemoved && l.New != 0) {
					t.Fatalf("%s line numbered %d,%d in %q", l.Kind, l.Old, l.New, diff)
				}
			case lineContext, lineHunk, lineNote:
			default:
				t.Fatalf("line of kind %q in %q", l.Kind, diff)
			}
		}
		if len(rows) > len(lines) {
			t.Fatalf("%d rows from %d lines", len(rows), len(lines))
		}
	})
}
