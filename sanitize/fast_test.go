package sanitize

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/yaml"
)

// trickyStrings are scalars near the edges of what YAML writes plain: each must come out of the
// fast path exactly as yaml.v3 writes it, or not at all.
var trickyStrings = []string{
	"", " ", "a", "web", "app.kubernetes.io/name", "nginx:1.25", "a: b", "a #b", "#a", "-a", "- a", "a-", "?a",
	"true", "True", "false", "null", "Null", "~", "yes", "on", "n", "y", "NO", "1", "01", "0x1F", "1e3", "1.5", ".5",
	"1_000", "+1", "-1", "1:20", "2024-01-01", "2001-1-2 3:4:5", "0001-0 0001-0 ", "0001-0 0001-0", "1 2", "1.5 x",
	"a b", "a  b", "a b ", "/etc/hosts", "/", "a=b", "a,b", "(x)", "50%", "x@y", "a;b", "~a", "a~", "é", "a\tb",
	"line\n", "line1\nline2", "line1\nline2\n", "line1\n\nline2", "trailing\n\n", "\nleading", " leading\nx",
	"x\n y", "x \ny", "x\ny ", "[a]", "{a}", "a'b", "a\"b", "*a", "&a", "!a", "|a", ">a", "%a", "@a", "`a",
	"100Mi", "500m", "1a", "2x2", "v1.2", "10.0.0.1", "1-2", "1.2.3", "0o17", "0b101", "1e5x", "1E5", "0x1p3", "08", "09",
	"123456789012345678901234567890", "1Gi", "25%", "1.", "1e", "2024-1-2", "2024-01-01T10:00:00Z", "http://x.y/z", "a:b", "a:", "a: ", "1:x", "x:1",
	"--port", "-v", " a", "a ", " ", "a:", ":", ":a", "- ", "-- x", "--- x", "0001-0 0001-0 ", " 1", "1 ", "a : b", "-:",
	"true ", " null", "key: value: x", "---x", "--", "-", "-1", "-inf", "-Inf", "--inf", "-.5", "- x", "-a b", "-a:b",
	"abc def", "ghi", "/x y", "a/b", "k=v", "TRUE", "FALSE", "NULL",
	strings.Repeat("long words ", 30), strings.Repeat("x", 200), "Infinity", ".inf", "NaN", ".nan", "<<", "=",
}

// commonStrings are the scalars most objects are made of.
var commonStrings = []string{"0042-1 0042-1 ", "x: y", "nginx:1.27", "25%", "10.0.0.1", "web", "app", "name", "team-a", "100Mi", "500m", "v1", "/data", "a b c", "k8s.io/x",
	"line1\nline2\n", "script\n  indented\nend", "3", "true", "", "x-1", "Always", "TCP"}

// randomValue builds a value of the shapes objects have, from trickyStrings (one pick in five)
// or commonStrings, and a few numbers.
func randomValue(r *rand.Rand, depth int) any {
	pick := r.IntN(10)
	if depth > 4 {
		pick = r.IntN(6)
	}
	switch pick {
	case 0:
		return int64(r.IntN(2000) - 1000)
	case 1:
		return []float64{0, 1.5, -3, 1e21, 1e-7, 0.75, -2.5e-9, 123456.789, 1e300, math.Inf(1), math.NaN()}[r.IntN(11)]
	case 2:
		return r.IntN(2) == 0
	case 3:
		return nil
	case 4, 5:
		return randomString(r)
	case 6, 7:
		m := map[string]any{}
		for range r.IntN(4) {
			m[randomString(r)] = randomValue(r, depth+1)
		}
		return m
	default:
		s := make([]any, r.IntN(4))
		for i := range s {
			s[i] = randomValue(r, depth+1)
		}
		return s
	}
}

// TestFastYAMLIsByteIdentical: whatever the fast path writes is exactly what yaml.v3 writes, for
// the golden objects, the benchmark's ConfigMap and thousands of random objects built from edge
// cases; and the common objects do take the fast path.
func TestFastYAMLIsByteIdentical(t *testing.T) {
	same := func(name string, obj map[string]any) bool {
		t.Helper()
		want, err := yamlV3(obj)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		got, ok := fastYAML(obj)
		if ok && string(got) != string(want) {
			t.Errorf("%s: the fast path differs from yaml.v3 (-yaml.v3 +fast):\n%s", name, cmp.Diff(string(want), string(got)))
		}
		return ok
	}
	if !same("configMap1KiB", configMap1KiB()) {
		t.Error("the benchmark's ConfigMap did not take the fast path")
	}
	mirrorBench := map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "cm-00042", "namespace": "bench"},
		"data": map[string]any{"payload": strings.Repeat("0042-1 ", 128)}} // daemon's BenchmarkMirror2000
	if !same("the mirror benchmark's ConfigMap", mirrorBench) {
		t.Error("the mirror benchmark's ConfigMap did not take the fast path")
	}
	golden, err := filepath.Glob("testdata/*.yaml")
	if err != nil || len(golden) == 0 {
		t.Fatalf("golden files: %v %v", golden, err)
	}
	fast := 0
	for _, path := range golden {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		var obj map[string]any
		if err := yaml.Unmarshal(data, &obj); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if same(path, obj) {
			fast++
		}
	}
	if fast < len(golden)/2 {
		t.Errorf("only %d of %d golden objects took the fast path", fast, len(golden))
	}
	r := rand.New(rand.NewPCG(1, 2))
	taken := 0
	for i := range 20000 {
		obj := map[string]any{"apiVersion": "v1", "kind": "Thing"}
		for range 1 + r.IntN(4) {
			obj[randomString(r)] = randomValue(r, 1)
		}
		if same(fmt.Sprintf("random object %d", i), obj) {
			taken++
		}
		if t.Failed() {
			break
		}
	}
	t.Logf("the fast path wrote %d of 20000 random objects and %d of %d golden ones", taken, fast, len(golden))
}

func randomString(r *rand.Rand) string {
	if r.IntN(5) == 0 {
		return trickyStrings[r.IntN(len(trickyStrings))]
	}
	return commonStrings[r.IntN(len(commonStrings))]
}
