package sanitize

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/configbutler/gitops-reverser/testenv"
)

// readBack writes obj as the mirror writes a file and reads the file back as restore and
// write-back read it.
func readBack(t *testing.T, obj map[string]any) map[string]any {
	t.Helper()
	file, err := YAML(obj)
	if err != nil {
		t.Fatalf("write: %v", err)
	}
	docs, err := Documents(file)
	if err != nil {
		t.Fatalf("read:\n%s\n%v", file, err)
	}
	if len(docs) != 1 {
		t.Fatalf("%d documents in:\n%s", len(docs), file)
	}
	got, err := ObjectOf(docs[0])
	if err != nil {
		t.Fatalf("read:\n%s\n%v", file, err)
	}
	// kubectl, Flux and the apiserver read it with apimachinery's YAML 1.1 reader: the same.
	var kubectl map[string]any
	if err := utilyaml.Unmarshal(file, &kubectl); err != nil || !reflect.DeepEqual(kubectl, obj) {
		t.Errorf("kubectl's reader reads the file otherwise (%v):\n%s\n%s", err, file, cmp.Diff(obj, kubectl))
	}
	return got
}

func objectWith(data map[string]any) map[string]any {
	return map[string]any{"apiVersion": "example.com/v1", "kind": "Widget", "metadata": map[string]any{"name": "w"}, "spec": data}
}

// TestEveryClassOfValueReadsBackExactly: each named character class, as a value, a key and a
// list item, and each integer edge, reads back from the file as it was written.
func TestEveryClassOfValueReadsBackExactly(t *testing.T) {
	for class, s := range testenv.EdgeStrings {
		obj := objectWith(map[string]any{"value": s, "key:" + s: "k", "list": []any{s}})
		if got := readBack(t, obj); !reflect.DeepEqual(got, obj) {
			t.Errorf("%s %q changed on the way back: %s", class, s, cmp.Diff(obj, got))
		}
	}
	for name, n := range testenv.EdgeIntegers {
		obj := objectWith(map[string]any{"n": n})
		if got := readBack(t, obj); !reflect.DeepEqual(got, obj) {
			t.Errorf("%s (%d) changed on the way back: %s", name, n, cmp.Diff(obj, got))
		}
	}
	obj := objectWith(map[string]any{"empty": "", "null": nil, "float": 0.1, "on": "on", "no": true, "y": []any{}})
	if got := readBack(t, obj); !reflect.DeepEqual(got, obj) {
		t.Errorf("empty, null, float or YAML 1.1 keys changed on the way back: %s", cmp.Diff(obj, got))
	}
}

// TestRandomObjectsReadBackExactly is the property: any object of the values a live object may
// hold reads back from its file exactly. The seed is fixed; a failure prints it, so the case can
// be replayed.
func TestRandomObjectsReadBackExactly(t *testing.T) {
	const seed = 57
	r := rand.New(rand.NewPCG(seed, seed))
	for i := range 5000 {
		spec := map[string]any{}
		for range 1 + r.IntN(5) {
			spec[testenv.RandomKey(r)] = testenv.RandomValue(r, 3)
		}
		obj := objectWith(spec)
		if got := readBack(t, obj); !reflect.DeepEqual(got, obj) {
			t.Fatalf("seed %d, object %d changed on the way back: %s", seed, i, cmp.Diff(obj, got))
		}
	}
}

// TestRefusalsNameWhereAndWhatToDo: a file that cannot be read exactly is refused naming the
// line or the field, and what to write instead.
func TestRefusalsNameWhereAndWhatToDo(t *testing.T) {
	cases := []struct{ file, want string }{
		{"kind: ConfigMap\ndata:\n  k: a\x7fb\n", `line 3, column 7: the character U+007F cannot stand unescaped in YAML: write the value in double quotes with \x7F`},
		{"kind: ConfigMap\ndata:\n  k: \"\u0090\"\n", `line 3, column 7: the character U+0090`},
		{"kind: X\nspec:\n  ratio: .nan\n", "spec.ratio (line 3): .nan is a number JSON cannot hold"},
		{"kind: X\nspec:\n  list: [1, -.inf]\n", "spec.list[1] (line 3): -.inf is a number"},
		{"kind: X\nbase: &b {a: 1}\nspec: *b\n", "spec (line 3): the alias *b is not read: write the value out"},
		{"kind: X\nspec:\n  <<: {a: 1}\n", "spec (line 3): the merge key << is not read"},
		{"kind: X\nspec:\n  ? [a]\n  : 1\n", "spec (line 3): a key that is a !!seq"},
		{"kind: X\nspec:\n  a: 1\n  b: 2\n  a: 3\n", `spec (line 3): the key "a" is given twice (lines 3 and 5): keep one`},
		{"kind: X\nspec:\n  \"a.b\":\n    x: !vault secret/db\n", `spec["a.b"].x (line 4): a value tagged !vault: write it as a string`},
	}
	for _, tc := range cases {
		err := readErr(tc.file)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: got %v, want it to say %q", tc.file, err, tc.want)
		}
	}
}

func readErr(file string) error {
	docs, err := Documents([]byte(file))
	if err != nil {
		return err
	}
	for _, d := range docs {
		if _, err := ObjectOf(d); err != nil {
			return err
		}
	}
	return fmt.Errorf("read without error")
}
