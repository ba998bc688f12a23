package placement

import "testing"

func TestSameComparesValuesAsTheApiserverMeansThem(t *testing.T) {
	limits := pathOf("spec.containers[name=webModel].resources.limits.memory")
	for _, c := range []struct {
		name string
		at   Path
		a, b any
		want bool
	}{
		{"a quantity's forms", pathOf("spec.containers[name=webModel].resources.requests.cpu"), "0.5", "500m", true},
		{"binary and plain", limits, "1Gi", "1073741824", true},
		{"a number and its quantity", pathOf("spec.overhead.cpu"), int64(1), "1", true},
		{"a sizeLimit", pathOf("spec.volumes[name=tmp].emptyDir.sizeLimit"), "1Gi", "1024Mi", true},
		{"a LimitRange's max", pathOf("spec.limits[type=Container].max.cpu"), "2", "2000m", true},
		{"other quantities", limits, "1Gi", "1G", false},
		{"not a quantity field", pathOf("spec.size"), "1Gi", "1073741824", false},
		{"not a quantity", limits, "lots", "lots", true},
		{"int and float", pathOf("spec.ratio"), int64(2), 2.0, true},
		{"int and a fraction", pathOf("spec.ratio"), int64(2), 2.5, false},
		{"int-or-string", pathOf("spec.ports[name=http].targetPort"), "80", int64(80), false},
		{"string and bool", pathOf("spec.paused"), "true", true, false},
		{"a null key is absent", pathOf("spec"), map[string]any{"a": int64(1), "b": nil}, map[string]any{"a": 1.0}, true},
		{"a null key is absent, both ways", pathOf("spec"), map[string]any{"a": int64(1)}, map[string]any{"a": 1.0, "b": nil}, true},
		{"quantities deep in a mapping", pathOf("spec.resources"),
			map[string]any{"limits": map[string]any{"cpu": "0.5"}}, map[string]any{"limits": map[string]any{"cpu": "500m"}}, true},
		{"list order", pathOf("spec.args"), []any{"a", "b"}, []any{"b", "a"}, false},
		{"list length", pathOf("spec.args"), []any{"a"}, []any{"a", "a"}, false},
		{"a mapping and a scalar", pathOf("spec.x"), map[string]any{}, "x", false},
	} {
		if got := same(c.at, c.a, c.b); got != c.want {
			t.Errorf("%s: same(%v, %v) at %s = %t, want %t", c.name, c.a, c.b, c.at, got, c.want)
		}
	}
}

func TestListKeyIsAFieldEveryItemHasOnce(t *testing.T) {
	item := func(kv ...any) any {
		m := map[string]any{}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i].(string)] = kv[i+1]
		}
		return m
	}
	for _, c := range []struct {
		name  string
		lists [][]any
		want  string
	}{
		{"named", [][]any{{item("name", "a", "value", "1")}, {item("name", "a"), item("name", "b")}}, "name"},
		{"a port without a name", [][]any{{item("name", "http", "containerPort", int64(80)), item("containerPort", int64(9090))}}, "containerPort"},
		{"a Service's ports", [][]any{{item("port", int64(80), "targetPort", int64(8080))}}, "port"},
		{"volumeMounts", [][]any{{item("mountPath", "/a", "readOnly", true)}}, "mountPath"},
		{"the first field by name", [][]any{{item("effect", "NoSchedule", "key", "a"), item("effect", "NoExecute", "key", "b")}}, "effect"},
		{"unique in each list", [][]any{{item("effect", "NoSchedule", "key", "a"), item("effect", "NoSchedule", "key", "b")}}, "key"},
		// protocol was defaulted: the file's item lacks it, so it cannot be the key.
		{"the file's items too", [][]any{{item("protocol", "TCP", "x", "1")}, {item("x", "1")}}, "x"},
		{"duplicates", [][]any{{item("name", "a"), item("name", "a")}}, ""},
		{"not all mappings", [][]any{{item("name", "a"), "b"}}, ""},
		{"a key that is no scalar", [][]any{{item("name", map[string]any{})}}, ""},
		{"scalars", [][]any{{"a", "b"}}, ""},
		{"empty", [][]any{{}, nil}, ""},
	} {
		if got := listKey(c.lists...); got != c.want {
			t.Errorf("%s: listKey = %q, want %q", c.name, got, c.want)
		}
	}
}
