package sanitize

import (
	"bytes"
	"encoding/json"
	"fmt"
	"runtime"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// deepChain is a custom resource whose spec is a chain of depth single-key maps, {"a":{"a":...1}}:
// the shape of the 54 KB, 9,000-deep object that once rendered to 81 MB.
func deepChain(depth int) map[string]any {
	var v any = int64(1)
	for range depth {
		v = map[string]any{"a": v}
	}
	return widget(v)
}

// deepObject is a custom resource whose spec nests depth levels deep, as one with preserved unknown
// fields may: maps and lists in turn, each level carrying a scalar the quoting rules care about.
func deepObject(depth int) map[string]any {
	var v any = "leaf"
	for i := depth; i > 0; i-- {
		switch i % 4 {
		case 0:
			v = []any{v, "on", int64(i)}
		case 1:
			v = map[string]any{"a": v, "text": fmt.Sprintf("level %d\nsecond line\n", i)}
		case 2:
			v = map[string]any{"b": v, "ratio": float64(i) + 0.25, "yes": "no", "crlf": "a\r\nb"}
		case 3:
			v = map[string]any{"c": v, "8080": "8080", "empty": map[string]any{}, "list": []any{}}
		}
	}
	return widget(v)
}

func widget(spec any) map[string]any {
	return map[string]any{"apiVersion": "example.com/v1", "kind": "Widget",
		"metadata": map[string]any{"name": "deep", "namespace": "team-a"}, "spec": spec}
}

func mustJSON(tb testing.TB, obj map[string]any) []byte {
	tb.Helper()
	b, err := json.Marshal(obj)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// Block indentation grows with depth; past flowDepth the output must not.
func TestYAMLOfDeepObjectsGrowsLinearly(t *testing.T) {
	cases := []struct {
		name string
		obj  map[string]any
	}{
		{"chain 2,000 deep", deepChain(2000)},
		{"chain 6,000 deep", deepChain(6000)},
		{"chain 9,000 deep", deepChain(9000)},
		{"chain 18,000 deep", deepChain(18000)},
		{"mixed 2,000 deep", deepObject(2000)},
		{"mixed 6,000 deep", deepObject(6000)},
		{"mixed 18,000 deep", deepObject(18000)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			js, y := mustJSON(t, tc.obj), mustYAML(t, Object(tc.obj))
			t.Logf("%d bytes of YAML for %d bytes of JSON", len(y), len(js))
			if len(y) > 4*len(js) {
				t.Errorf("YAML is %d bytes for %d bytes of JSON; want at most 4×", len(y), len(js))
			}
			if len(y) >= 1<<20 {
				t.Errorf("YAML is %d bytes; want well under 1 MiB", len(y))
			}
		})
	}
}

// Object and YAML copy and build a node per value, and yaml.v3's emitter keeps every event of a
// document: all linear, so the bytes allocated per level must not grow with the depth (quadratic
// indentation made them grow ninefold from 2,000 to 18,000 levels).
func TestYAMLAllocatesLinearlyWithDepth(t *testing.T) {
	perLevel := func(depth int) float64 {
		obj := deepChain(depth)
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		mustYAML(t, Object(obj))
		runtime.ReadMemStats(&after)
		return float64(after.TotalAlloc-before.TotalAlloc) / float64(depth)
	}
	shallow, deep := perLevel(2000), perLevel(18000)
	if deep > 2*shallow {
		t.Errorf("sanitizing allocates %.0f bytes per level at 18,000 levels, %.0f at 2,000; want at most twice as many", deep, shallow)
	}
}

// kubectl and sigs.k8s.io/yaml must read the flow part back as the object it came from. encoding/json
// and yaml.v2 refuse nesting past 10,000 levels, so these stay below.
func TestYAMLOfDeepObjectsReadsBackAsTheSameObject(t *testing.T) {
	for _, depth := range []int{flowDepth - 1, flowDepth, 2000, 6000, 9000} {
		t.Run(fmt.Sprintf("%d deep", depth), func(t *testing.T) {
			obj := deepObject(depth)
			var back map[string]any
			if err := yaml.Unmarshal(mustYAML(t, obj), &back); err != nil {
				t.Fatalf("read back: %v", err)
			}
			assertSameJSON(t, decodeJSON(t, obj), back)
		})
	}
}

// assertSameJSON fails unless want and got are the same JSON value. It compares their encodings,
// which encoding/json makes canonical (sorted keys, one spelling per number): go-cmp, used for
// shallow objects elsewhere, diffs every nested list into an edit script, which costs time
// exponential in the lists' nesting and did not finish in minutes on these objects.
func assertSameJSON(tb testing.TB, want, got map[string]any) {
	tb.Helper()
	w, g := mustJSON(tb, want), mustJSON(tb, got)
	if bytes.Equal(w, g) {
		return
	}
	i := 0
	for i < len(w) && i < len(g) && w[i] == g[i] {
		i++
	}
	from := max(i-100, 0)
	tb.Errorf("read back differs at byte %d:\nwant …%.200s\n got …%.200s", i, w[from:], g[from:])
}

func TestYAMLOfDeepObjectsIsDeterministic(t *testing.T) {
	// Two equal objects built apart: Go randomises map iteration per map, not per content.
	a, b := mustYAML(t, deepObject(3000)), mustYAML(t, deepObject(3000))
	if !bytes.Equal(a, b) {
		t.Error("the same object rendered to different bytes")
	}
	if !bytes.Equal(a, mustYAML(t, deepObject(3000))) {
		t.Error("rendering again gave different bytes")
	}
}

// Up to flowDepth levels an object keeps the block layout it always had; the first collection at
// flowDepth is written in flow style.
func TestYAMLSwitchesToFlowStyleAtFlowDepth(t *testing.T) {
	cases := []struct {
		name     string
		depth    int // levels of the spec chain; spec itself is at level 1
		lastLine string
	}{
		{"deepest block level", flowDepth - 1, strings.Repeat("  ", flowDepth-1) + "a: 1"},
		{"first flow level", flowDepth, strings.Repeat("  ", flowDepth-1) + `a: {"a":1}`},
		{"deeper flow levels", flowDepth + 2, strings.Repeat("  ", flowDepth-1) + `a: {"a":{"a":{"a":1}}}`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			y := strings.TrimSuffix(string(mustYAML(t, deepChain(tc.depth))), "\n")
			if last := y[strings.LastIndexByte(y, '\n')+1:]; last != tc.lastLine {
				t.Errorf("last line = %q; want %q", last, tc.lastLine)
			}
		})
	}
}

// In flow context (JSON, one line) a scalar keeps the meaning it has in block context, and a line
// break never starts an indented continuation line (which would cost bytes per level of depth).
func TestYAMLQuotesScalarsInFlowStyle(t *testing.T) {
	cases := []struct {
		name  string
		key   string
		value any
		want  string
	}{
		{"plain string", "v", "hello", `{"v":"hello"}`},
		{"multi-line string", "v", "a\nb\n", `{"v":"a\nb\n"}`},
		{"carriage returns only", "v", "a\rb", `{"v":"a\rb"}`},
		{"unicode line separator", "v", "a\u2028b", `{"v":"a\u2028b"}`},
		{"string that looks like an int", "v", "8080", `{"v":"8080"}`},
		{"YAML 1.1 bool", "v", "on", `{"v":"on"}`},
		{"YAML 1.1 bool key", "yes", int64(1), `{"yes":1}`},
		{"flow indicators", "v", "a, [b]", `{"v":"a, [b]"}`},
		{"empty string", "v", "", `{"v":""}`},
		{"key with a line break", "a\nb", "v", `{"a\nb":"v"}`},
		{"integral float", "v", float64(3), `{"v":3}`},
		{"null", "v", nil, `{"v":null}`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var v any = map[string]any{tc.key: tc.value}
			for range flowDepth - 1 {
				v = map[string]any{"a": v}
			}
			y := strings.TrimSuffix(string(mustYAML(t, map[string]any{"spec": v})), "\n")
			want := strings.Repeat("  ", flowDepth-1) + "a: " + tc.want
			if last := y[strings.LastIndexByte(y, '\n')+1:]; last != want {
				t.Errorf("last line = %q; want %q", last, want)
			}
		})
	}
}
