package placement

import (
	"sort"

	"go.yaml.in/yaml/v3"
)

// listEdits sets list n at path to v item by item. Named lists (items that are mappings with a
// key field, see keyField) are matched by key: items v lacks are removed, the others set, new
// ones inserted before the item that follows them in v. Lists of the same length are set index
// by index. It reports false when the list must be written again as a whole: a named list whose
// kept items change their order, an unnamed list whose length changes, or an item that does not
// read.
func listEdits(path Path, n *yaml.Node, v []any) ([]edit, bool) {
	old := make([]any, len(n.Content))
	for i, c := range n.Content {
		var err error
		if old[i], err = valueOf(c); err != nil {
			return nil, false
		}
	}
	if key := keyField(old, v); key != "" {
		return namedEdits(path, key, old, v)
	}
	if len(old) != len(v) {
		return nil, false
	}
	out := make([]edit, len(v))
	for i, item := range v {
		out[i] = edit{Op: Op{Path: with(path, Step{Index: i}), Value: item}}
	}
	return out, true
}

// namedEdits is listEdits for a list whose items are named by field key.
func namedEdits(path Path, key string, old, v []any) ([]edit, bool) {
	inOld, inNew := names(old, key), names(v, key)
	var keptOld, keptNew []any
	for _, item := range old {
		if name := item.(map[string]any)[key]; inNew[name] {
			keptOld = append(keptOld, name)
		}
	}
	for _, item := range v {
		if name := item.(map[string]any)[key]; inOld[name] {
			keptNew = append(keptNew, name)
		}
	}
	if !equal(keptOld, keptNew) {
		return nil, false
	}
	var out []edit
	for _, item := range old {
		if name := item.(map[string]any)[key]; !inNew[name] {
			out = append(out, edit{Op: Op{Path: with(path, Step{Match: key, Value: name}), Remove: true}})
		}
	}
	for i, item := range v {
		name := item.(map[string]any)[key]
		e := edit{Op: Op{Path: with(path, Step{Match: key, Value: name}), Value: item}}
		if !inOld[name] {
			e.before = nextKept(v[i+1:], key, inOld)
		}
		out = append(out, e)
	}
	return out, true
}

// nextKept is the name of the first item of items that the list already has, or nil.
func nextKept(items []any, key string, inOld map[any]bool) any {
	for _, item := range items {
		if name := item.(map[string]any)[key]; inOld[name] {
			return name
		}
	}
	return nil
}

func names(items []any, key string) map[any]bool {
	out := make(map[any]bool, len(items))
	for _, item := range items {
		out[item.(map[string]any)[key]] = true
	}
	return out
}

// keyField is the field that names the items of both lists: every item of each is a mapping
// that has it, with a scalar value that no other item of the same list has. "name" is preferred;
// then the others in sorted order. "" when there is none.
func keyField(old, v []any) string {
	first, ok := old[0].(map[string]any)
	if !ok {
		return ""
	}
	fields := make([]string, 0, len(first))
	for k := range first {
		fields = append(fields, k)
	}
	sort.Slice(fields, func(i, j int) bool {
		if (fields[i] == "name") != (fields[j] == "name") {
			return fields[i] == "name"
		}
		return fields[i] < fields[j]
	})
	for _, f := range fields {
		if names := uniqueNames(old, f); names != nil && uniqueNames(v, f) != nil {
			return f
		}
	}
	return ""
}

// uniqueNames is the values of field f of items when every item is a mapping with a scalar f,
// none the same; nil when not.
func uniqueNames(items []any, f string) map[any]bool {
	seen := make(map[any]bool, len(items))
	for _, item := range items {
		m, ok := item.(map[string]any)
		if !ok {
			return nil
		}
		name, ok := m[f]
		switch name.(type) {
		case string, int64, bool, float64:
		default:
			return nil
		}
		if !ok || seen[name] {
			return nil
		}
		seen[name] = true
	}
	return seen
}
