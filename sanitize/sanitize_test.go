package sanitize

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/runtime"
)

// edit returns a deep copy of obj changed by fn, leaving obj as the apiserver returned it.
func edit(obj map[string]any, fn func(obj, meta map[string]any)) map[string]any {
	c := runtime.DeepCopyJSON(obj)
	fn(c, c["metadata"].(map[string]any))
	return c
}

func TestObjectDoesNotMutateItsInput(t *testing.T) {
	l := mustLive(t)
	for _, f := range fixtures {
		t.Run(f.name, func(t *testing.T) {
			in := l.get(t, f.name)
			in["status"] = map[string]any{"observedGeneration": int64(1)}
			before := runtime.DeepCopyJSON(in)
			out := Object(in)
			// The result must not share containers with the input either.
			out["metadata"].(map[string]any)["labels"] = map[string]any{"changed": "yes"}
			for _, v := range out {
				if m, ok := v.(map[string]any); ok {
					m["injected"] = true
				}
			}
			if diff := cmp.Diff(before, in); diff != "" {
				t.Errorf("input changed (-before +after):\n%s", diff)
			}
		})
	}
}

func TestServerBookkeepingDoesNotChangeBytes(t *testing.T) {
	l := mustLive(t)
	base := l.get(t, "deployment")
	want := mustYAML(t, Object(base))
	cases := []struct {
		name string
		edit func(obj, meta map[string]any)
	}{
		{"newer resourceVersion", func(_, m map[string]any) { m["resourceVersion"] = "999999" }},
		{"other managedFields", func(_, m map[string]any) {
			m["managedFields"] = []any{map[string]any{"manager": "kubectl", "operation": "Update"}}
		}},
		{"status written by a controller", func(o, _ map[string]any) {
			o["status"] = map[string]any{"replicas": int64(2), "readyReplicas": int64(1)}
		}},
		{"generation bumped", func(_, m map[string]any) { m["generation"] = int64(7) }},
		{"other uid and timestamps", func(_, m map[string]any) {
			m["uid"] = "00000000-0000-0000-0000-000000000000"
			m["creationTimestamp"] = "2001-01-01T00:00:00Z"
			m["deletionTimestamp"] = "2001-01-02T00:00:00Z"
			m["deletionGracePeriodSeconds"] = int64(30)
			m["selfLink"] = "/apis/apps/v1/namespaces/team-a/deployments/web"
		}},
		{"owned by another object", func(_, m map[string]any) {
			m["ownerReferences"] = []any{map[string]any{"kind": "Thing", "name": "owner", "uid": "u"}}
		}},
		{"revision annotation changed", func(_, m map[string]any) {
			m["annotations"].(map[string]any)["deployment.kubernetes.io/revision"] = "4"
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := mustYAML(t, Object(edit(base, tc.edit)))
			if !bytes.Equal(got, want) {
				t.Errorf("bytes differ (-want +got):\n%s", cmp.Diff(string(want), string(got)))
			}
			if Hash(got) != Hash(want) {
				t.Errorf("hash %s, want %s", Hash(got), Hash(want))
			}
		})
	}
}

func TestTopLevelKeysStartWithAPIVersionKindMetadata(t *testing.T) {
	l := mustLive(t)
	for _, f := range fixtures {
		t.Run(f.name, func(t *testing.T) {
			var keys []string
			for _, line := range strings.Split(string(mustYAML(t, Object(l.get(t, f.name)))), "\n") {
				if k, _, ok := strings.Cut(line, ":"); ok && line[0] != ' ' && line[0] != '-' {
					keys = append(keys, k)
				}
			}
			if len(keys) < 4 || !slices.Equal(keys[:3], []string{"apiVersion", "kind", "metadata"}) {
				t.Fatalf("top-level keys %v do not start with apiVersion, kind, metadata", keys)
			}
			if !slices.IsSorted(keys[3:]) {
				t.Errorf("top-level keys after metadata are not sorted: %v", keys[3:])
			}
		})
	}
}

// The webhook sees an object before it is stored: no resourceVersion yet, but uid, timestamps and
// managedFields are set. The watch sees it stored, perhaps with status. Both must give the same bytes.
func TestAdmissionAndWatchViewsSanitizeAlike(t *testing.T) {
	l := mustLive(t)
	for _, f := range fixtures {
		watched := edit(l.get(t, f.name), func(o, _ map[string]any) {
			o["status"] = map[string]any{"observedGeneration": int64(1), "conditions": []any{}}
		})
		want := mustYAML(t, Object(watched))
		admitted := edit(l.get(t, f.name), func(o, m map[string]any) {
			delete(o, "status")
			delete(m, "resourceVersion")
			m["managedFields"] = []any{map[string]any{"manager": "kubectl-client-side-apply", "operation": "Update"}}
		})
		cases := []struct {
			name string
			obj  map[string]any
		}{
			{"edited fields", admitted},
			{"decoded by encoding/json", decodeJSON(t, admitted)},
			{"dry-run create on the apiserver", l.dryRuns[f.name]},
		}
		for _, tc := range cases {
			t.Run(f.name+"/"+tc.name, func(t *testing.T) {
				if _, hasRV := tc.obj["metadata"].(map[string]any)["resourceVersion"]; hasRV {
					t.Fatalf("admission-side object carries a resourceVersion")
				}
				got := mustYAML(t, Object(tc.obj))
				if !bytes.Equal(got, want) {
					t.Errorf("bytes differ (-watch +admission):\n%s", cmp.Diff(string(want), string(got)))
				}
			})
		}
	}
}

// decodeJSON round-trips obj through encoding/json, as a webhook that decodes the raw admission
// request into map[string]any would: every number becomes a float64.
func decodeJSON(tb testing.TB, obj map[string]any) map[string]any {
	tb.Helper()
	b, err := json.Marshal(obj)
	if err != nil {
		tb.Fatal(err)
	}
	var out map[string]any
	if err := json.Unmarshal(b, &out); err != nil {
		tb.Fatal(err)
	}
	return out
}

func TestServiceLosesAllocatedIPsButKeepsHeadless(t *testing.T) {
	l := mustLive(t)
	cases := []struct {
		fixture  string
		wantSpec map[string]any // the clusterIP fields expected after sanitizing
	}{
		{"service", map[string]any{}},
		{"service-headless", map[string]any{"clusterIP": "None", "clusterIPs": []any{"None"}}},
	}
	for _, tc := range cases {
		t.Run(tc.fixture, func(t *testing.T) {
			in := l.get(t, tc.fixture)["spec"].(map[string]any)
			if in["clusterIP"] == nil || in["clusterIPs"] == nil {
				t.Fatalf("apiserver returned no cluster IPs: %v", in)
			}
			spec := Object(l.get(t, tc.fixture))["spec"].(map[string]any)
			got := map[string]any{}
			for _, k := range []string{"clusterIP", "clusterIPs"} {
				if v, ok := spec[k]; ok {
					got[k] = v
				}
			}
			if diff := cmp.Diff(tc.wantSpec, got); diff != "" {
				t.Errorf("cluster IP fields (-want +got):\n%s", diff)
			}
		})
	}
}

// A Job as the apiserver returns it carries a selector and labels made from its uid; created
// again from its file, it would be refused. Unless the user chose the selector (manualSelector).
func TestJobLosesWhatTheApiserverMadeFromItsUID(t *testing.T) {
	job := func(manual bool) map[string]any {
		uidLabels := func(extra map[string]any) map[string]any {
			m := map[string]any{"controller-uid": "u-1", "batch.kubernetes.io/controller-uid": "u-1", "job-name": "pi"}
			for k, v := range extra {
				m[k] = v
			}
			return m
		}
		spec := map[string]any{
			"selector": map[string]any{"matchLabels": map[string]any{"batch.kubernetes.io/controller-uid": "u-1"}},
			"template": map[string]any{"metadata": map[string]any{"labels": uidLabels(map[string]any{"app": "pi"})}},
		}
		if manual {
			spec["manualSelector"] = true
		}
		return map[string]any{"apiVersion": "batch/v1", "kind": "Job",
			"metadata": map[string]any{"name": "pi", "labels": uidLabels(nil)}, "spec": spec}
	}
	got := Object(job(false))
	want := map[string]any{"apiVersion": "batch/v1", "kind": "Job",
		"metadata": map[string]any{"name": "pi", "labels": map[string]any{"job-name": "pi"}},
		"spec":     map[string]any{"template": map[string]any{"metadata": map[string]any{"labels": map[string]any{"app": "pi", "job-name": "pi"}}}}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("generated selector (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(job(true), Object(job(true))); diff != "" {
		t.Errorf("a manual selector is the user's (-want +got):\n%s", diff)
	}
}
