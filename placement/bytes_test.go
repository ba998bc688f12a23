package placement

import (
	"bytes"
	"testing"
)

// TestEditLeavesOtherDocumentsByteForByte edits the second of three documents: the first and
// the third, with their separators and comments, are the same bytes.
func TestEditLeavesOtherDocumentsByteForByte(t *testing.T) {
	file := fixture(t, "app.yaml")
	out := MustEdit(t, file, 1, set("spec.ports[name=http].port", 8080), set("metadata.labels.app", "web"))
	before, after := spans(file), spans(out)
	if len(after) != 3 {
		t.Fatalf("%d documents, want 3", len(after))
	}
	if !bytes.Equal(file[:before[1].start], out[:after[1].start]) {
		t.Errorf("the first document changed:\n%s", out[:after[1].start])
	}
	if !bytes.Equal(file[before[1].end:], out[after[1].end:]) {
		t.Errorf("the third document changed:\n%s", out[after[1].end:])
	}
	if bytes.Equal(file[before[1].start:before[1].end], out[after[1].start:after[1].end]) {
		t.Error("the second document did not change")
	}
}

// TestEditKeepsCRLF edits a file written with CRLF: the result is the LF edit written with CRLF,
// every line of it.
func TestEditKeepsCRLF(t *testing.T) {
	lf := fixture(t, "app.yaml")
	crlfFile := bytes.ReplaceAll(lf, []byte("\n"), []byte("\r\n"))
	ops := []Op{
		set(web+".image", "nginx:1.26"),
		set(sidecar+".env[name=LOG].value", "debug"),
		del(web + ".ports"),
		set("metadata.labels.team", "shop"),
	}
	want := bytes.ReplaceAll(MustEdit(t, lf, 0, ops...), []byte("\n"), []byte("\r\n"))
	if got := MustEdit(t, crlfFile, 0, ops...); !bytes.Equal(got, want) {
		t.Errorf("got:\n%q\nwant:\n%q", got, want)
	}
	body := []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n")
	if got := AppendDocument(crlfFile, body); !bytes.HasSuffix(got, []byte("\r\n---\r\napiVersion: v1\r\nkind: ConfigMap\r\nmetadata:\r\n  name: x\r\n")) {
		t.Errorf("AppendDocument on a CRLF file:\n%q", got[len(got)-80:])
	}
}

// TestEditKeepsMixedLineEnds edits a file that ends some lines with CRLF and others with LF:
// each line keeps its end.
func TestEditKeepsMixedLineEnds(t *testing.T) {
	file := []byte("a: 1\r\nb: |\r\n  x\r\nc: 3 # c\r\nd: 4\n")
	got := string(MustEdit(t, file, 0, set("a", 2), set("b", "w"), set("c", "z")))
	if want := "a: 2\r\nb: w\r\nc: z # c\r\nd: 4\n"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

// TestEditWithoutALastNewline adds a key to a file whose last line has no newline.
func TestEditWithoutALastNewline(t *testing.T) {
	file := []byte("a: 1\n---\nb: 2")
	got := string(MustEdit(t, file, 1, set("c", "x"), set("b", 3)))
	if want := "a: 1\n---\nb: 3\nc: x\n"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

// TestEditFullFiles checks whole results where the shape of the file is the point.
func TestEditFullFiles(t *testing.T) {
	tests := []struct {
		name, file string
		ops        []Op
		want       string
	}{{
		name: "NullReplacedByAMapping",
		file: "metadata:\n  name: x\n  labels:\n  annotations: ~ # none yet\nspec: {}\n",
		ops:  []Op{set("metadata.labels.app", "x"), set("metadata.annotations.note", "hi")},
		want: "metadata:\n  name: x\n  labels:\n    app: x\n  annotations: # none yet\n    note: hi\nspec: {}\n",
	}, {
		name: "EmptyFlowMappingBecomesBlock",
		file: "metadata:\n  name: x\nspec: {}\n",
		ops:  []Op{set("spec.replicas", 2)},
		want: "metadata:\n  name: x\nspec:\n  replicas: 2\n",
	}, {
		name: "EmptyListGetsItemsInTheDocumentsStyle",
		file: "spec:\n  volumes:\n    - name: a\n  containers: []\n",
		ops:  []Op{set("spec.containers[name=web].image", "nginx")},
		want: "spec:\n  volumes:\n    - name: a\n  containers:\n    - name: web\n      image: nginx\n",
	}, {
		name: "ItemInsertedBeforeTheItemThatFollowsIt",
		file: "ports:\n# http\n- name: http\n  port: 80\n# metrics\n- name: metrics\n  port: 9090\n",
		ops: []Op{set("ports", []any{
			map[string]any{"name": "http", "port": 80},
			map[string]any{"name": "https", "port": 443},
			map[string]any{"name": "metrics", "port": 9090},
		})},
		want: "ports:\n# http\n- name: http\n  port: 80\n- name: https\n  port: 443\n# metrics\n- name: metrics\n  port: 9090\n",
	}, {
		name: "NamedListReorderedIsWrittenAgain",
		file: "ports:\n- name: a\n  port: 1\n- name: b\n  port: 2\n",
		ops: []Op{set("ports", []any{
			map[string]any{"name": "b", "port": 2},
			map[string]any{"name": "a", "port": 1},
		})},
		want: "ports:\n- name: b\n  port: 2\n- name: a\n  port: 1\n",
	}, {
		name: "ItemsMatchedByTheirContainerPort",
		file: "ports:\n- containerPort: 80 # web\n  protocol: TCP\n- containerPort: 53\n  protocol: UDP\n",
		ops: []Op{set("ports", []any{
			map[string]any{"containerPort": 80, "protocol": "TCP"},
			map[string]any{"containerPort": 53, "protocol": "TCP"},
		})},
		want: "ports:\n- containerPort: 80 # web\n  protocol: TCP\n- containerPort: 53\n  protocol: TCP\n",
	}, {
		name: "IndexStepSetsAnItem",
		file: "args:\n- a # first\n- b\n",
		ops:  []Op{set("args[1]", "c"), set("args[2]", "d")},
		want: "args:\n- a # first\n- c\n- d\n",
	}, {
		name: "QuotedKeyAndTaggedValue",
		file: "metadata:\n  labels:\n    \"app.kubernetes.io/name\": !!str 80\n",
		ops:  []Op{{Path: Path{{Field: "metadata"}, {Field: "labels"}, {Field: "app.kubernetes.io/name"}}, Value: "web"}},
		want: "metadata:\n  labels:\n    \"app.kubernetes.io/name\": web\n",
	}, {
		name: "MappingReplacedByAScalarKeepsTheKeyComment",
		file: "a: # note\n  b: 1\n  c: 2\nd: 3\n",
		ops:  []Op{set("a", "flat")},
		want: "a: flat # note\nd: 3\n",
	}, {
		name: "ScalarReplacedByAMapping",
		file: "a: flat # note\nd: 3\n",
		ops:  []Op{set("a", map[string]any{"b": 1, "c": []any{"x"}})},
		want: "a: # note\n  b: 1\n  c:\n  - x\nd: 3\n",
	}, {
		name: "MultiLinePlainAndQuotedScalars",
		file: "a: one\n  two # c\nb: \"x\n  y\" # d\nc: 3\n",
		ops:  []Op{set("a", "three"), set("b", "z")},
		want: "a: three # c\nb: \"z\" # d\nc: 3\n",
	}, {
		name: "NewSubtreeInTheFilesListStyle",
		file: "spec:\n  volumes:\n    - name: a\n",
		ops: []Op{set("spec.template", map[string]any{"spec": map[string]any{
			"containers": []any{map[string]any{"image": "nginx", "name": "web", "args": []any{"-v"}}},
		}})},
		want: "spec:\n  volumes:\n    - name: a\n  template:\n    spec:\n      containers:\n        - name: web\n          args:\n            - -v\n          image: nginx\n",
	}, {
		name: "FirstKeyOfAnItemRemovedWithABlockValue",
		file: "l:\n- env:\n  - name: a\n  name: x\n- name: y\n",
		ops:  []Op{del("l[name=x].env")},
		want: "l:\n- name: x\n- name: y\n",
	}, {
		name: "RemovedItemKeepsTheCommentOfTheNext",
		file: "l:\n- a\n# about b\n- b\n",
		ops:  []Op{del("l[0]")},
		want: "l:\n# about b\n- b\n",
	}, {
		name: "KeyAddedAfterABlockThatKeepsItsLastLines",
		file: "a: |+\n  text\n\nb: 1\n",
		ops:  []Op{del("b"), set("c", 2)},
		want: "a: |+\n  text\n\nc: 2\n",
	}, {
		name: "UnchangedAnchorInAMappingSetAsAWhole",
		file: "spec:\n  base: &b {x: 1}\n  use: *b\n  n: 1\n",
		ops:  []Op{set("spec", map[string]any{"base": map[string]any{"x": 1}, "use": map[string]any{"x": 1}, "n": 2})},
		want: "spec:\n  base: &b {x: 1}\n  use: *b\n  n: 2\n",
	}, {
		name: "DocumentMarkersAsKeysAndText",
		file: "a: 1\n",
		ops:  []Op{set("---", "..."), set("b", "---\n...\n")},
		want: "a: 1\n'---': '...'\nb: |\n  ---\n  ...\n",
	}, {
		name: "ItemBelowACommentedDash",
		file: "l:\n- # the first\n  name: a\n- name: b\n",
		ops:  []Op{del("l[name=a]"), set("l[name=c].v", 1)},
		want: "l:\n- name: b\n- name: c\n  v: 1\n",
	}, {
		name: "ListInAList",
		file: "l:\n- - a\n  - b\n- - c\n",
		ops:  []Op{del("l[0][0]"), set("l[1][0]", "d")},
		want: "l:\n- - b\n- - d\n",
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := string(MustEdit(t, []byte(tt.file), 0, tt.ops...))
			if got != tt.want {
				t.Errorf("got:\n%s\nwant:\n%s", got, tt.want)
			}
		})
	}
}
