package kube

import (
	"math"
	"reflect"
	"testing"

	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// TestApplyBodyReadsBackExactly: the apiserver reads an apply body with apimachinery's YAML
// reader; every character a Kubernetes string may hold and every int64 come back as sent.
func TestApplyBodyReadsBackExactly(t *testing.T) {
	values := map[string]any{
		"c0":       "bell\a nul-free \x01\x1f tab\t cr\r lf\n",
		"del":      "a\u007fb",
		"c1":       "a\u0080\u0090\u009fb",
		"nel":      "a\u0085b",
		"lsps":     "a\u2028b\u2029c",
		"bom":      "\ufeffa\ufeffb",
		"nonchars": "a\ufffe\uffffb",
		"emoji":    "😀 👩‍👩‍👧",
		"rtl":      "a\u200fb\u202e",
		"html":     "<a href='x'>&amp;</a>",
		"yaml11":   "on",
		"empty":    "",
		"null":     nil,
		"maxInt":   int64(math.MaxInt64),
		"minInt":   int64(math.MinInt64),
		"2^53+1":   int64(1<<53 + 1),
		"-2^53-1":  int64(-(1<<53 + 1)),
		"float":    0.1,
		"on":       true,
	}
	body, err := ApplyBody(map[string]any{"data": values})
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := utilyaml.Unmarshal(body, &got); err != nil {
		t.Fatalf("the apiserver's YAML reader refuses the body: %v\n%s", err, body)
	}
	for k, want := range values {
		if v := got["data"].(map[string]any)[k]; !reflect.DeepEqual(v, want) {
			t.Errorf("%s: sent %#v, read back %#v", k, want, v)
		}
	}
}
