package sanitize

import (
	"bytes"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// fastYAML writes the canonical YAML of obj directly, for the common shapes of Kubernetes objects,
// byte for byte as YAML's yaml.v3 path writes it, at a small part of its cost (yaml.v3 builds an
// event per node and allocates about 25 times the document's size). It covers block mappings and
// sequences, integers, booleans, nulls, empty collections, and strings that are plain in
// yaml.v3's analysis or fit a literal block; for anything else (a string that needs quotes, a
// fraction, a very long key, deep nesting) it reports false and YAML takes yaml.v3's path.
// TestFastYAMLIsByteIdentical holds the two paths together.
//
// The document is written into a reused buffer and returned as an exact-size copy: the mirror
// holds many of them while they wait for a commit, and a buffer grown by doubling would hold up
// to twice the bytes.
func fastYAML(obj map[string]any) ([]byte, bool) {
	buf := scratch.Get().(*bytes.Buffer)
	defer func() {
		if buf.Cap() <= maxScratch {
			buf.Reset()
			scratch.Put(buf)
		}
	}()
	w := fastWriter{buf: buf}
	keys := make([]string, 0, len(obj))
	for _, k := range leadingKeys {
		if _, ok := obj[k]; ok {
			keys = append(keys, k)
		}
	}
	rest := len(keys)
	for k := range obj {
		if !slices.Contains(leadingKeys[:], k) {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys[rest:])
	if !w.mapping(obj, keys, 0, 1) {
		return nil, false
	}
	return bytes.Clone(w.buf.Bytes()), true
}

// scratch holds the buffers fastYAML writes into; one past maxScratch is left to the collector.
var scratch = sync.Pool{New: func() any { return bytes.NewBuffer(make([]byte, 0, 4096)) }}

const maxScratch = 1 << 20

// fastMaxLevel keeps the fast path well away from flowDepth.
const fastMaxLevel = flowDepth / 2

type fastWriter struct{ buf *bytes.Buffer }

func (w fastWriter) indent(n int) {
	for range n {
		w.buf.WriteByte(' ')
	}
}

// mapping writes the pairs of m in the order of keys, the first at the current position, the
// others on new lines at column indent. level is the nesting level of the values.
func (w fastWriter) mapping(m map[string]any, keys []string, indent, level int) bool {
	for i, k := range keys {
		if !simpleKey(k) {
			return false
		}
		if i > 0 {
			w.indent(indent)
		}
		if !w.str(k) {
			return false
		}
		w.buf.WriteByte(':')
		if !w.value(m[k], indent, level) {
			return false
		}
	}
	return true
}

// value writes v after "key:" of a mapping at column indent: a scalar on the same line, a
// collection on the lines below.
func (w fastWriter) value(v any, indent, level int) bool {
	if level >= fastMaxLevel {
		return false
	}
	switch x := v.(type) {
	case map[string]any:
		if len(x) == 0 {
			w.buf.WriteString(" {}\n")
			return true
		}
		w.buf.WriteByte('\n')
		w.indent(indent + 2)
		return w.mapping(x, sortedKeys(x), indent+2, level+1)
	case []any:
		if len(x) == 0 {
			w.buf.WriteString(" []\n")
			return true
		}
		w.buf.WriteByte('\n')
		return w.sequence(x, indent, level+1) // compact: "- " at the key's column
	case string:
		if strings.Contains(x, "\n") {
			return w.literal(x, indent+2)
		}
	}
	w.buf.WriteByte(' ')
	if !w.scalar(v) {
		return false
	}
	w.buf.WriteByte('\n')
	return true
}

// sequence writes the items of s, each on its own line at column indent after "- ".
func (w fastWriter) sequence(s []any, indent, level int) bool {
	for _, item := range s {
		w.indent(indent)
		w.buf.WriteString("- ")
		switch x := item.(type) {
		case map[string]any:
			if len(x) == 0 {
				w.buf.WriteString("{}\n")
				continue
			}
			if !w.mapping(x, sortedKeys(x), indent+2, level+1) {
				return false
			}
		case []any, nil:
			return false // a sequence in a sequence, or a null item: rare, left to yaml.v3
		case string:
			if strings.Contains(x, "\n") {
				return false
			}
			if !w.scalar(x) {
				return false
			}
			w.buf.WriteByte('\n')
		default:
			if !w.scalar(x) {
				return false
			}
			w.buf.WriteByte('\n')
		}
	}
	return true
}

// scalar writes a one-line scalar, or reports false when yaml.v3 would write it otherwise.
func (w fastWriter) scalar(v any) bool {
	switch x := v.(type) {
	case string:
		return w.str(x)
	case bool:
		w.buf.WriteString(strconv.FormatBool(x))
	case nil:
		w.buf.WriteString("null")
	case int64:
		w.buf.WriteString(strconv.FormatInt(x, 10))
	case int:
		w.buf.WriteString(strconv.Itoa(x))
	case int32:
		w.buf.WriteString(strconv.FormatInt(int64(x), 10))
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return false
		}
		_, text := formatFloat(x) // YAML reads both forms back as the tag they were written with
		w.buf.WriteString(text)
	default:
		return false
	}
	return true
}

// str writes a one-line string plain, single- or double-quoted as yaml.v3 does, or reports
// false when unsure.
func (w fastWriter) str(s string) bool {
	if singleQuoted(s) {
		w.buf.WriteByte('\'')
		w.buf.WriteString(s)
		w.buf.WriteByte('\'')
		return true
	}
	quote, ok := quotedScalar(s)
	switch {
	case !ok:
		return false
	case quote:
		w.buf.WriteByte('"')
		w.buf.WriteString(s)
		w.buf.WriteByte('"')
	default:
		w.buf.WriteString(s)
	}
	return true
}

// singleQuoted says whether yaml.v3 writes s in single quotes: s is made of the characters
// quotedScalar accepts, none of which needs escaping, yet YAML cannot read it plain (a space at
// either end, ": " inside or a colon at the end, a leading dash or colon that stands alone, or
// a leading "---"). Such a string cannot read as a number, boolean or null, so it is never
// double-quoted instead.
func singleQuoted(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !singleQuotable(s[i]) {
			return false
		}
	}
	alone := func(c byte) bool { return s[0] == c && (len(s) == 1 || s[1] == ' ') }
	return s[0] == ' ' || s[len(s)-1] == ' ' || s[len(s)-1] == ':' || strings.Contains(s, ": ") ||
		alone('-') || alone(':') || strings.HasPrefix(s, "---")
}

// singleQuotable says whether c is one of the characters singleQuoted accepts.
func singleQuotable(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || strings.IndexByte(" :-./=+,()~@%;", c) >= 0
}

// literal writes a multi-line string as a literal block whose lines sit at column indent, when
// yaml.v3 would: printable ASCII only, no space before a line break or at the end, and no
// leading space or break (which would need an indentation indicator).
func (w fastWriter) literal(s string, indent int) bool {
	if s[0] == ' ' || s[0] == '\n' || s[len(s)-1] == ' ' || strings.HasSuffix(s, "\n\n") || strings.Contains(s, " \n") {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c != '\n' && (c < 0x20 || c > 0x7e) {
			return false
		}
	}
	body, clip := strings.CutSuffix(s, "\n")
	if clip {
		w.buf.WriteString(" |\n")
	} else {
		w.buf.WriteString(" |-\n")
	}
	for line := range strings.SplitSeq(body, "\n") {
		if line != "" {
			w.indent(indent)
			w.buf.WriteString(line)
		}
		w.buf.WriteByte('\n')
	}
	return true
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// simpleKey says whether yaml.v3 writes k as a simple key ("k: v"): only up to 128 bytes. Its
// quoting follows the rules of values (str).
func simpleKey(k string) bool { return len(k) <= 128 }

// quotedScalar says how yaml.v3 surely writes s on one line: plain (quote false) or in double
// quotes (quote true), the latter for strings that would read back as something else (a number,
// a boolean, a null), which need no escapes in the characters accepted. ok is false when it is
// not sure (any other character, a leading or trailing space, a value that may be a date or a
// float): it is conservative, as false only costs the slow path.
func quotedScalar(s string) (quote, ok bool) {
	if s == "" {
		return true, true
	}
	if s[len(s)-1] == ' ' {
		return false, false
	}
	c := s[0]
	letter := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
	digit := c >= '0' && c <= '9'
	flag := isFlag(s) // --port, -v: a dash led by a letter is no sequence entry
	if !letter && !digit && c != '/' && !flag {
		return false, false
	}
	space, colon, digits := false, false, true
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c >= '0' && c <= '9':
			continue
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z':
		case c == ' ':
			space = true
		case c == ':':
			// "a:b" and "http://x" are plain; ": " and a final colon are not.
			if i+1 == len(s) || s[i+1] == ' ' {
				return false, false
			}
			colon = true
		case strings.IndexByte("-./=+,()~@%;", c) >= 0:
		default:
			return false, false
		}
		digits = false
	}
	switch {
	case flag && parsesAsNumber(s):
		return false, false // -inf
	case !digit:
		return readsAsNonString(s), true
	case colon:
		return false, false // 1:20 is a sexagesimal number in YAML 1.1, 2001-1-2 3:4:5 a date
	case space:
		return false, true // numbers and dates without a time hold no space
	case digits:
		return true, true // an integer, or a float when too long or led by 0 and an 8 or 9
	case dateShaped(s) || parsesAsNumber(s):
		return false, false // 2024-01-01, 1.5, 0x1F, 1e3: left to yaml.v3
	}
	return false, true // 100Mi, 500m, 25%, 10.0.0.1
}

// isFlag says whether s is a command-line flag: one or two dashes, then a letter.
func isFlag(s string) bool {
	if !strings.HasPrefix(s, "-") {
		return false
	}
	s = strings.TrimPrefix(s[1:], "-")
	return len(s) > 0 && (s[0] >= 'a' && s[0] <= 'z' || s[0] >= 'A' && s[0] <= 'Z')
}

// dateShaped says whether s starts as every date YAML reads does: four digits and a dash.
func dateShaped(s string) bool {
	return len(s) > 4 && s[4] == '-' && strings.IndexFunc(s[:4], func(r rune) bool { return r < '0' || r > '9' }) < 0
}

// parsesAsNumber says whether any of Go's number parsers accepts s, which yaml.v3's resolution
// tries (in base 0: 0x, 0o and 0b prefixes too).
func parsesAsNumber(s string) bool {
	if _, err := strconv.ParseInt(s, 0, 64); err == nil {
		return true
	}
	if _, err := strconv.ParseUint(s, 0, 64); err == nil {
		return true
	}
	_, err := strconv.ParseFloat(s, 64)
	return err == nil
}

// readsAsNonString lists the letter-led plain scalars YAML reads as booleans or nulls, and the
// YAML 1.1 booleans, which stringNode double-quotes.
func readsAsNonString(s string) bool {
	switch s {
	case "true", "True", "TRUE", "false", "False", "FALSE", "null", "Null", "NULL":
		return true
	}
	return IsYAML11Bool(s)
}
