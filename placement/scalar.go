package placement

import (
	"fmt"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/configbutler/gitops-reverser/sanitize"
)

// This file writes scalars: plain when they read back as themselves, quoted when they would
// not, a multi-line string as a literal block where one carries it exactly, and a replaced
// string in the quoting style it had.

// inline is scalar v on one line, as yaml.v3 writes it (plain unless it would read back as
// another type or another text), with YAML 1.1's booleans (yes, on, n …) double-quoted as
// sanitize writes them, so that kubectl reads them as strings too, and a string of several lines
// double-quoted with escapes.
func inline(v any) (string, error) {
	switch x := v.(type) {
	case nil:
		return "null", nil
	case bool:
		return strconv.FormatBool(x), nil
	case int64:
		return strconv.FormatInt(x, 10), nil
	case float64:
		return strconv.FormatFloat(x, 'g', -1, 64), nil
	case string:
		style := yaml.Style(0)
		if strings.ContainsAny(x, "\n\r") || sanitize.IsYAML11Bool(x) {
			style = yaml.DoubleQuotedStyle
		}
		return encodeString(x, style)
	}
	return "", fmt.Errorf("a value of type %T is no scalar", v)
}

// encodeString is s written by yaml.v3 in style.
func encodeString(s string, style yaml.Style) (string, error) {
	out, err := yaml.Marshal(&yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: s, Style: style})
	if err != nil {
		return "", fmt.Errorf("encode %q: %w", s, err)
	}
	return strings.TrimSuffix(string(out), "\n"), nil
}

// replacement is how string or scalar v is written in place of scalar old: its head on old's
// line and, for a literal block (unless quoteLines), the body lines under it (indented by
// indent), without a last newline. A string keeps old's double or single quotes when it can be
// written in them; a plain one stays plain unless it must be quoted.
func replacement(old *yaml.Node, v any, indent int, quoteLines bool) (head, body string, err error) {
	s, ok := v.(string)
	switch {
	case !ok:
		head, err = inline(v)
	case old.Style&(yaml.DoubleQuotedStyle|yaml.SingleQuotedStyle) != 0:
		head, err = quotedLike(old.Style, s)
	case !quoteLines && literal(s):
		head, body = literalText(s, indent)
	default:
		head, err = inline(s)
	}
	return head, body, err
}

// quotedLike is s in the quotes of style: double quotes hold any string; single quotes one of
// a single line of characters YAML reads raw, and otherwise s is written as inline writes it.
func quotedLike(style yaml.Style, s string) (string, error) {
	switch {
	case style&yaml.DoubleQuotedStyle != 0:
		return encodeString(s, yaml.DoubleQuotedStyle)
	case style&yaml.SingleQuotedStyle != 0 && !strings.ContainsAny(s, "\n\r") && safeChars(s):
		return "'" + strings.ReplaceAll(s, "'", "''") + "'", nil
	}
	return inline(s)
}

// literal reports whether string s is written as a literal block: it has several lines, and a
// literal block carries it exactly without an indentation indicator or keep-chomping (no blank
// or space at its start, no trailing blanks on a line, at most one newline at its end, only
// characters YAML reads raw).
func literal(s string) bool {
	if !strings.Contains(s, "\n") || strings.HasSuffix(s, "\n\n") || !safeChars(s) || strings.ContainsRune(s, '\r') {
		return false
	}
	if s[0] == ' ' || s[0] == '\t' || s[0] == '\n' {
		return false
	}
	for _, line := range strings.Split(strings.TrimSuffix(s, "\n"), "\n") {
		if line != "" && (strings.HasSuffix(line, " ") || strings.HasSuffix(line, "\t") || line[0] == '\t') {
			return false
		}
	}
	return true
}

// literalText is s as a literal block: the header (| when s ends with a newline, |- when not)
// and the lines of s indented by indent (empty lines left empty), without a last newline.
func literalText(s string, indent int) (header, body string) {
	header = "|-"
	if strings.HasSuffix(s, "\n") {
		header, s = "|", strings.TrimSuffix(s, "\n")
	}
	lines := strings.Split(s, "\n")
	pad := strings.Repeat(" ", indent)
	for i, line := range lines {
		if line != "" {
			lines[i] = pad + line
		}
	}
	return header, strings.Join(lines, "\n")
}

// safeChars reports whether s holds only characters YAML reads raw: no C0 control but tab and
// newline, no DEL, no C1 control, no byte-order mark, U+FFFE, U+FFFF or Unicode line and
// paragraph separators.
func safeChars(s string) bool {
	for _, r := range s {
		switch {
		case r == '\t', r == '\n':
		case r < 0x20, r >= 0x7f && r <= 0x9f, r == 0x2028, r == 0x2029, r == 0xfeff, r == 0xfffe, r == 0xffff:
			return false
		}
	}
	return true
}

// keyText is mapping key k as written: inline, and never a block.
func keyText(k string) (string, error) {
	if k == "<<" {
		return `"<<"`, nil
	}
	return inline(k)
}
