package testenv

import (
	"math"
	"math/rand/v2"
	"strings"
)

// EdgeStrings are strings a Kubernetes object may hold that YAML readers and writers get wrong
// most often, one a class: C0 controls, DEL, C1 controls, NEL, the line and paragraph
// separators, the byte-order mark, noncharacters, emoji, right-to-left marks, YAML 1.1 booleans,
// text that reads as a number, a date or null, quotes and indicators, and multi-line text with
// each of those inside.
var EdgeStrings = map[string]string{
	"c0":         "bell\a esc\x1b[0m nul-free \x01\x02\x1f tab\t cr\r",
	"del":        "a\u007fb",
	"c1":         "a\u0080\u0090\u009fb",
	"nel":        "a\u0085b",
	"lsps":       "a\u2028b\u2029c",
	"bom":        "\ufeffa\ufeffb",
	"nonchar":    "a\ufffdb",
	"emoji":      "😀 👩‍👩‍👧 🇳🇱",
	"rtl":        "a\u200fb\u202eשלום",
	"yaml11":     "on",
	"yaml11no":   "no",
	"yaml11y":    "y",
	"number":     "0755",
	"float":      "1e3",
	"date":       "2024-01-02",
	"null":       "null",
	"tilde":      "~",
	"indicators": "- ? : , [ ] { } # & * ! | > ' \" % @ `",
	"spaces":     "  both ends  ",
	"multiline":  "line one\n  indented\n\ttab\n",
	"multictl":   "one\ntwo\u0085three\u2028four\u007f\n",
	"tabbreak":   "\t\n\u2029",
	"crlf":       "a\r\nb\r\n",
	"blanklines": "\n\nx\n\n",
	"empty":      "",
}

// EdgeIntegers are the integers around the edges of float64's exact range and of int64.
var EdgeIntegers = map[string]int64{
	"2^53":      1 << 53,
	"2^53+1":    1<<53 + 1,
	"2^53-1":    1<<53 - 1,
	"-2^53-1":   -(1<<53 + 1),
	"-2^53+1":   -(1<<53 - 1),
	"maxInt64":  math.MaxInt64,
	"-maxInt64": -math.MaxInt64,
	"minInt64":  math.MinInt64,
	"zero":      0,
}

// edgeRunes are what RandomString draws from: the characters of EdgeStrings and plain text.
var edgeRunes = []rune("ab z09 .:-#'\"\\\n\n\t\r\a\x1b\x01\u007f\u0080\u0085\u0090\u009f\u00a0\u00e9\u2028\u2029\ufeff\u200f\u202e😀{}[]|>&*!%@`?,")

// RandomString draws a string of up to maxLen characters from the classes of EdgeStrings.
func RandomString(r *rand.Rand, maxLen int) string {
	var b strings.Builder
	for range r.IntN(maxLen + 1) {
		b.WriteRune(edgeRunes[r.IntN(len(edgeRunes))])
	}
	return b.String()
}

// RandomValue draws a JSON value as the dynamic client decodes one (string, int64, float64,
// bool, nil, map[string]any, []any), nesting at most depth levels: strings of RandomString,
// integers of EdgeIntegers and any int64, floats as written, empty strings, nulls, empty and
// YAML-1.1-boolean keys.
func RandomValue(r *rand.Rand, depth int) any {
	kinds := 8
	if depth <= 0 {
		kinds = 6
	}
	switch r.IntN(kinds) {
	case 0:
		return RandomString(r, 40)
	case 1:
		if r.IntN(2) == 0 {
			return int64(r.Uint64())
		}
		keys := []string{"2^53", "2^53+1", "2^53-1", "-2^53-1", "-2^53+1", "maxInt64", "-maxInt64", "minInt64", "zero"}
		return EdgeIntegers[keys[r.IntN(len(keys))]]
	case 2:
		floats := []float64{0.1, -2.5, 1e-7, 1.7976931348623157e308, 5e-324, 123456.789, 1e21}
		return floats[r.IntN(len(floats))]
	case 3:
		return r.IntN(2) == 0
	case 4:
		return nil
	case 5:
		return ""
	case 6:
		m := map[string]any{}
		for range r.IntN(4) {
			m[RandomKey(r)] = RandomValue(r, depth-1)
		}
		return m
	default:
		s := make([]any, r.IntN(4))
		for i := range s {
			s[i] = RandomValue(r, depth-1)
		}
		return s
	}
}

// RandomKey draws a map key: a YAML 1.1 boolean, one that reads as a number or null, or any
// string of RandomString.
func RandomKey(r *rand.Rand) string {
	special := []string{"on", "no", "y", "Yes", "OFF", "1", "0x1F", "null", "~", "-", "<<", "a.b", "[0]"}
	if r.IntN(3) == 0 {
		return special[r.IntN(len(special))]
	}
	return RandomString(r, 12)
}
