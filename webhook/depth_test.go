package webhook

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"
)

func TestJSONDepthCountsOnlyBracketsOutsideStrings(t *testing.T) {
	cases := []struct {
		name string
		json string
		want int
	}{
		{"scalar", `"text"`, 0},
		{"empty object", `{}`, 1},
		{"empty array", ` [ ] `, 1},
		{"siblings do not add up", `{"a":{},"b":[],"c":{"d":1}}`, 2},
		{"arrays and objects both count", `[{"a":[{"b":[]}]}]`, 5},
		{"brackets in a string", `{"a":"{[{[{["}`, 1},
		{"escaped quote does not end the string", `{"a":"\"{["}`, 1},
		{"escaped backslash before the closing quote", `{"a":"\\"}`, 1},
		{"escaped backslash then a real bracket", `["\\",[[]]]`, 3},
		{"unicode escape", `{"\u005b":["\u007b"]}`, 2},
		{"deep chain", strings.Repeat(`{"a":`, 9000) + "1" + strings.Repeat("}", 9000), 9000},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := jsonDepth([]byte(tc.json)); got != tc.want {
				t.Errorf("jsonDepth = %d; want %d", got, tc.want)
			}
		})
	}
}

// FuzzJSONDepth holds the scanner to encoding/json: on valid JSON its depth is the nesting the
// decoder's tokens show; on any bytes at all it returns without panicking.
func FuzzJSONDepth(f *testing.F) {
	for _, seed := range []string{
		`{}`, `[]`, `3`, `"{"`, `{"a":"\"{["}`, `[[[]]]`, `{"a\\":[1]}`, `"\\\\"`, `[1,{"b":[{}]},"]"]`,
		`{"k":"\u005b"}`, ` {"a" : [ true , null ] } `, `]]][[`, `"unterminated {`, `{"a":"\`, `\"{`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		got := jsonDepth(data)
		if got < 0 {
			t.Fatalf("jsonDepth(%q) = %d; a depth is never negative", data, got)
		}
		if !json.Valid(data) {
			return
		}
		if want := decoderDepth(t, data); got != want {
			t.Errorf("jsonDepth(%q) = %d; encoding/json nests %d deep", data, got, want)
		}
	})
}

// decoderDepth is the deepest nesting of valid JSON data as encoding/json's tokens show it.
func decoderDepth(t *testing.T, data []byte) int {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber() // 1e999 is valid JSON, but no float64
	depth, deepest := 0, 0
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			return deepest
		}
		if err != nil {
			t.Fatalf("token of valid JSON %q: %v", data, err)
		}
		switch tok {
		case json.Delim('{'), json.Delim('['):
			depth++
			deepest = max(deepest, depth)
		case json.Delim('}'), json.Delim(']'):
			depth--
		}
	}
}
