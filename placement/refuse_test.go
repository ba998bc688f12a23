package placement

import (
	"strings"
	"testing"
)

// TestEditRefuses gives Edit what it must not edit: it returns a clear error, naming the
// document, line and path, and no file.
func TestEditRefuses(t *testing.T) {
	anchors := "base: &base\n  image: nginx\nweb:\n  <<: *base\n  name: web\nother: *base\nfree:\n  a: 1\n"
	tests := []struct {
		name, file string
		doc        int
		ops        []Op
		want       string
	}{
		{"AnchoredNode", anchors, 0, []Op{set("base.image", "x")}, "document 0, line 1, base: the anchor &base is not edited"},
		{"MergeKey", anchors, 0, []Op{set("web.name", "x")}, "document 0, line 4, web: the merge key << is not edited"},
		{"Alias", anchors, 0, []Op{set("other.image", "x")}, "document 0, line 6, other: the alias *base is not edited"},
		{"AliasReplaced", anchors, 0, []Op{set("other", "x")}, "document 0, line 6, other: the alias *base is not edited"},
		{"AnchorRemoved", anchors, 0, []Op{del("base")}, "the anchor &base is not edited"},
		{"PathIntoAScalar", "a:\n  b: text\n", 0, []Op{set("a.b.c", 1)}, "document 0, line 2, a.b.c: the path steps into the scalar \"text\""},
		{"FieldOfAList", "a:\n- x\n", 0, []Op{set("a.b", 1)}, "document 0, line 2, a.b: the field \"b\" of a list"},
		{"ItemOfAMapping", "a:\n  b: 1\n", 0, []Op{set("a[0]", 1)}, "document 0, line 2, a[0]: an item of a mapping"},
		{"IndexPastTheEnd", "a:\n- x\n", 0, []Op{set("a[3]", 1)}, "the list has 1 items"},
		{"TwoItemsWithOneName", "a:\n- name: x\n- name: x\n", 0, []Op{set("a[name=x].v", 1)}, "two items have name x (lines 2 and 3)"},
		{"DocOutOfRange", "a: 1\n---\nb: 2\n", 2, []Op{set("a", 2)}, "document 2: the file has 2 documents"},
		{"NegativeDoc", "a: 1\n", -1, []Op{set("a", 2)}, "document -1: the file has 1 documents"},
		{"HalfYAML", "a: 1\n---\nkind: x\nspec: [unclosed\n  b: {\n", 1, []Op{set("kind", "y")}, "document 1 does not parse: line 3: did not find expected ',' or ']'"},
		{"NotYAML", "a: 1\n---\nkind: x\nthis is: not: yaml\n", 1, []Op{set("kind", "y")}, "document 1 does not parse: line 4: mapping values are not allowed in this context"},
		{"ListDocument", "- a\n- b\n", 0, []Op{set("[0]", "c")}, "document 0, line 1: the document is a !!seq, not a mapping"},
		{"EmptyDocument", "a: 1\n---\n# nothing\n", 1, []Op{set("a", 2)}, "document 1 (after line 2) is empty"},
		{"RemovingTheDocument", "a: 1\n", 0, []Op{{Remove: true}}, "use RemoveDocument"},
		{"UnknownValueType", "a: 1\n", 0, []Op{set("a", struct{}{})}, "a value of type struct {}"},
		{"NotANumberJSONHolds", "a: 1\n", 0, []Op{set("a", 0.0/zero())}, "a number JSON cannot hold"},
		{"NamedItemThatIsNoMapping", "a:\n- name: x\n", 0, []Op{set("a[name=y]", "z")}, "a named item must be a mapping"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := Edit([]byte(tt.file), tt.doc, tt.ops)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %v, want one with %q", err, tt.want)
			}
			if out != nil {
				t.Errorf("a file came back:\n%s", out)
			}
		})
	}
}

func zero() float64 { return 0 }

// TestEditAroundAnchors edits a part of a document that has anchors elsewhere: allowed, and
// the aliases read as before.
func TestEditAroundAnchors(t *testing.T) {
	file := []byte("base: &base\n  image: nginx\nother: *base\nfree:\n  a: 1 # one\n")
	got := string(MustEdit(t, []byte(file), 0, set("free.a", 2), set("free.b", "x")))
	if want := "base: &base\n  image: nginx\nother: *base\nfree:\n  a: 2 # one\n  b: x\n"; got != want {
		t.Errorf("got:\n%s\nwant:\n%s", got, want)
	}
}
