package placement

import (
	"slices"
	"strings"
	"testing"
)

// TestEditQuotesOnlyWhatMustBeQuoted sets a plain string to values that would read back as
// another type or text if written plain, and to strings of several lines: each line reads back
// as the string, and plain stays plain where it can.
func TestEditQuotesOnlyWhatMustBeQuoted(t *testing.T) {
	tests := []struct {
		value any
		lines []string // what replaces `  level: info`
	}{
		{"debug", []string{"  level: debug"}},
		{"true", []string{`  level: "true"`}},
		{"1.0", []string{`  level: "1.0"`}},
		{"null", []string{`  level: "null"`}},
		{"", []string{`  level: ""`}},
		{": x", []string{`  level: ': x'`}},
		{"#x", []string{`  level: '#x'`}},
		{"a #b", []string{`  level: 'a #b'`}},
		{"yes", []string{`  level: "yes"`}}, // YAML 1.1's boolean, as kubectl reads it
		{"80", []string{`  level: "80"`}},
		{int64(80), []string{"  level: 80"}},
		{true, []string{"  level: true"}},
		{1.5, []string{"  level: 1.5"}},
		{nil, []string{"  level: null"}},
		{"two\nlines", []string{"  level: |-", "    two", "    lines"}},
		{"two\nlines\n", []string{"  level: |", "    two", "    lines"}},
		{"  indented\nfirst line", []string{`  level: "  indented\nfirst line"`}},
		{"kept\n\n", []string{`  level: "kept\n\n"`}},
	}
	file := fixture(t, "app.yaml")
	for _, tt := range tests {
		out, err := Edit(file, 2, []Op{set("data.level", tt.value)})
		if err != nil {
			t.Errorf("%q: %v", tt.value, err)
			continue
		}
		var want []string
		want = append(want, "-62:  level: info")
		for i, l := range tt.lines {
			want = append(want, "+"+itoa(62+i)+":"+l)
		}
		if got := lineDiff(string(file), string(out)); !slices.Equal(got, want) {
			t.Errorf("%q: diff:\n%s\nwant:\n%s", tt.value, strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
		got := objects(t, out)[2]["data"].(map[string]any)["level"]
		if v, _ := normal(tt.value); !equal(got, v) {
			t.Errorf("%q reads back as %#v", tt.value, got)
		}
	}
}
