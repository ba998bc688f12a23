package placement

import (
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/configbutler/gitops-reverser/sanitize"
)

// fixture is a file of testdata, as a team keeps it.
func fixture(tb testing.TB, name string) []byte {
	tb.Helper()
	data, err := os.ReadFile("testdata/" + name)
	if err != nil {
		tb.Fatal(err)
	}
	return data
}

// P parses a path as Path.String writes it: spec.containers[name=web].image, ports[0];
// a bracketed value of digits is an int64.
func P(s string) Path {
	var out Path
	for _, part := range strings.Split(s, ".") {
		field, rest, _ := strings.Cut(part, "[")
		if field != "" {
			out = append(out, Step{Field: field})
		}
		for rest != "" {
			var inside string
			inside, rest, _ = strings.Cut(rest, "]")
			rest = strings.TrimPrefix(rest, "[")
			out = append(out, bracket(inside))
		}
	}
	return out
}

func bracket(inside string) Step {
	k, v, named := strings.Cut(inside, "=")
	if !named {
		i, _ := strconv.Atoi(k)
		return Step{Index: i}
	}
	if n, err := strconv.ParseInt(v, 10, 64); err == nil {
		return Step{Match: k, Value: n}
	}
	return Step{Match: k, Value: v}
}

// objects reads every document of file as sanitize does; it fails the test when one does not
// read.
func objects(tb testing.TB, file []byte) []map[string]any {
	tb.Helper()
	docs, err := sanitize.Documents(file)
	if err != nil {
		tb.Fatalf("the file does not parse: %v\n%s", err, file)
	}
	out := make([]map[string]any, len(docs))
	for i, doc := range docs {
		if out[i], err = sanitize.ObjectOf(doc); err != nil {
			tb.Fatalf("document %d does not read: %v\n%s", i, err, file)
		}
	}
	return out
}

// MustEdit is Edit that fails the test on an error.
func MustEdit(tb testing.TB, file []byte, doc int, ops ...Op) []byte {
	tb.Helper()
	out, err := Edit(file, doc, ops)
	if err != nil {
		tb.Fatalf("Edit: %v", err)
	}
	return out
}

func set(path string, v any) Op { return Op{Path: P(path), Value: v} }
func del(path string) Op        { return Op{Path: P(path), Remove: true} }

func itoa(i int) string { return strconv.Itoa(i) }
