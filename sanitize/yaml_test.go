package sanitize

import (
	"encoding/json"
	"math"
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/yaml"
)

func TestYAMLKeepsScalarTypesReadable(t *testing.T) {
	cases := []struct {
		name  string
		value any
		want  string
	}{
		{"plain string", "hello", "v: hello\n"},
		{"string that looks like an int", "8080", "v: \"8080\"\n"},
		{"string that looks like a float", "1e3", "v: \"1e3\"\n"},
		{"string that looks like a YAML 1.2 bool", "true", "v: \"true\"\n"},
		{"string that is a YAML 1.1 bool", "on", "v: \"on\"\n"},
		{"string that looks like null", "null", "v: \"null\"\n"},
		{"empty string", "", "v: \"\"\n"},
		{"multi-line string", "a\nb\n", "v: |\n  a\n  b\n"},
		{"multi-line string without final newline", "a\nb", "v: |-\n  a\n  b\n"},
		{"multi-line string with trailing spaces", "a \nb", "v: \"a \\nb\"\n"},
		{"int64", int64(3), "v: 3\n"},
		{"int", 3, "v: 3\n"},
		{"integral float64 from encoding/json", float64(3), "v: 3\n"},
		{"large integral float64", float64(1 << 53), "v: 9007199254740992\n"},
		{"fractional float64", 0.75, "v: 0.75\n"},
		{"tiny float64", 1e-9, "v: 1e-09\n"},
		{"NaN", math.NaN(), "v: .nan\n"},
		{"json.Number int", json.Number("42"), "v: 42\n"},
		{"json.Number float", json.Number("4.5"), "v: 4.5\n"},
		{"bool", true, "v: true\n"},
		{"null", nil, "v: null\n"},
		{"empty map", map[string]any{}, "v: {}\n"},
		{"empty list", []any{}, "v: []\n"},
		{"nested keys sorted", map[string]any{"b": "2", "a": "1"}, "v:\n  a: \"1\"\n  b: \"2\"\n"},
		{"list of maps", []any{map[string]any{"b": int64(1), "a": int64(2)}}, "v:\n- a: 2\n  b: 1\n"},
		{"YAML 1.1 bool key", map[string]any{"yes": "y"}, "v:\n  \"yes\": \"y\"\n"},
		{"non-JSON value falls back to reflection", []string{"a"}, "v:\n- a\n"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := YAML(map[string]any{"v": tc.value})
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tc.want {
				t.Errorf("got:\n%s\nwant:\n%s", got, tc.want)
			}
		})
	}
}

// kubectl and sigs.k8s.io/yaml read YAML 1.1; the files we write must mean to them exactly what the
// live object meant, or a write-back would change the cluster.
func TestYAMLReadsBackAsTheSameObject(t *testing.T) {
	l := mustLive(t)
	for _, f := range fixtures {
		t.Run(f.name, func(t *testing.T) {
			obj := Object(l.get(t, f.name))
			var back map[string]any
			if err := yaml.Unmarshal(mustYAML(t, obj), &back); err != nil {
				t.Fatalf("read back: %v", err)
			}
			if diff := cmp.Diff(decodeJSON(t, obj), back); diff != "" {
				t.Errorf("read back differs (-want +got):\n%s", diff)
			}
		})
	}
}

func TestHashIsShortAndFollowsContent(t *testing.T) {
	a, b := Hash([]byte("kind: A\n")), Hash([]byte("kind: B\n"))
	if len(a) != 16 {
		t.Errorf("hash %q has %d characters, want 16", a, len(a))
	}
	if a != Hash([]byte("kind: A\n")) {
		t.Error("same bytes hash differently")
	}
	if a == b {
		t.Error("different bytes hash alike")
	}
}

func TestEmptyLabelsAndAnnotationsAreDropped(t *testing.T) {
	got := Object(map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{
			"name":        "x",
			"labels":      nil,
			"annotations": map[string]any{"kubectl.kubernetes.io/last-applied-configuration": "{}"},
		},
	})
	want := map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "x"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if Object(nil) != nil {
		t.Error("Object(nil) is not nil")
	}
}

func TestYAMLRejectsInvalidUTF8(t *testing.T) {
	if _, err := YAML(map[string]any{"v": "\xff"}); err == nil {
		t.Error("invalid UTF-8 rendered without an error")
	}
}
