package watch

import (
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// managersByConverter is newestManagers as it was written first, on client-go's GetManagedFields:
// the reference the direct reading must match.
func managersByConverter(obj *unstructured.Unstructured) []string {
	var newest metav1.Time
	var out []string
	for _, e := range obj.GetManagedFields() {
		if e.Subresource != "" || e.Time == nil {
			continue
		}
		switch {
		case e.Time.After(newest.Time):
			newest, out = *e.Time, []string{e.Manager}
		case e.Time.Equal(&newest) && !slices.Contains(out, e.Manager):
			out = append(out, e.Manager)
		}
	}
	return out
}

// TestNewestManagersReadAsClientGoDoes: the managers of the newest entries, read straight from the
// object, are those client-go's conversion of the entries gives: the newest alone, two in the same
// second, a status update and an entry without a time left out, other time zones, and none at all
// when an entry is malformed.
func TestNewestManagersReadAsClientGoDoes(t *testing.T) {
	entry := func(manager, at string, more ...any) map[string]any {
		e := map[string]any{"manager": manager, "operation": "Update", "apiVersion": "v1", "time": at}
		for i := 0; i+1 < len(more); i += 2 {
			e[more[i].(string)] = more[i+1]
		}
		return e
	}
	cases := map[string][]any{
		"none":               {},
		"one":                {entry("kubectl", "2026-11-26T10:00:00Z")},
		"newest wins":        {entry("kubectl", "2026-11-26T10:00:00Z"), entry("helm", "2026-11-26T10:00:05Z"), entry("argo", "2026-11-26T09:00:00Z")},
		"same second":        {entry("kubectl", "2026-11-26T10:00:05Z"), entry("helm", "2026-11-26T10:00:05Z"), entry("kubectl", "2026-11-26T10:00:05Z")},
		"status left out":    {entry("kubectl", "2026-11-26T10:00:00Z"), entry("kubelet", "2026-11-26T11:00:00Z", "subresource", "status")},
		"no time left out":   {entry("kubectl", "2026-11-26T10:00:00Z"), entry("late", "", "time", nil)},
		"zones":              {entry("a", "2026-11-26T12:00:00+02:00"), entry("b", "2026-11-26T10:00:00Z"), entry("c", "2026-11-26T10:30:00+01:00")},
		"empty time":         {entry("kubectl", "2026-11-26T10:00:00Z"), entry("odd", "")},
		"time not RFC 3339":  {entry("kubectl", "2026-11-26T10:00:00Z"), entry("odd", "yesterday")},
		"time a number":      {entry("kubectl", "2026-11-26T10:00:00Z"), entry("odd", "", "time", int64(5))},
		"manager a number":   {entry("kubectl", "2026-11-26T10:00:00Z"), entry("", "2026-11-26T11:00:00Z", "manager", int64(5))},
		"entry not a map":    {entry("kubectl", "2026-11-26T10:00:00Z"), "kubectl"},
		"subresource a list": {entry("kubectl", "2026-11-26T10:00:00Z", "subresource", []any{"status"})},
	}
	for name, entries := range cases {
		obj := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]any{"name": "web", "managedFields": entries}}}
		got, want := newestManagers(obj), managersByConverter(obj)
		if !slices.Equal(got, want) {
			t.Errorf("%s: got %v, want %v (client-go's)", name, got, want)
		}
	}
	for _, obj := range []map[string]any{{}, {"metadata": "x"}, {"metadata": map[string]any{"managedFields": "x"}}} {
		if got := newestManagers(&unstructured.Unstructured{Object: obj}); got != nil {
			t.Errorf("%v: got %v, want none", obj, got)
		}
	}
}
