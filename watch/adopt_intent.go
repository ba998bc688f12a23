package watch

import (
	"context"
	"maps"
	"reflect"
	"slices"

	"github.com/configbutler/gitops-reverser/placement"
	"github.com/configbutler/gitops-reverser/sanitize"
)

// maxIntentDryRuns bounds the dry runs that strip one new object of its defaults.
const maxIntentDryRuns = 64

// intentOf is what people set in a new object, the document it gets in an adopted folder: what
// their field managers own, less the defaults. A server-side apply records only what was sent,
// but an update (kubectl create, edit) owns the defaults the apiserver filled in before it
// recorded the change; so each value is tried without: when a dry run of the object without it
// gives it back as it was, it is a default and stays out. Identity, labels and annotations are
// never tried, and a value whose removal the apiserver refuses (a required field) stays.
func (w *watcher) intentOf(ctx context.Context, clean map[string]any, owners placement.Owners) map[string]any {
	intent := placement.Owned(clean, owners)
	if w.dyn == nil || w.adopted.refused {
		return intent
	}
	runs, tried := 0, map[string]bool{}
	for changed := true; changed && runs < maxIntentDryRuns; { // a mapping emptied is tried in the next pass
		changed = false
		for _, p := range leaves(intent) {
			if runs == maxIntentDryRuns || tried[p.String()] {
				continue
			}
			tried[p.String()] = true
			without := sanitize.DeepCopy(intent).(map[string]any)
			removeAt(without, p)
			runs++
			if w.isDefault(ctx, without, p, intent) {
				intent, changed = without, true
			}
		}
	}
	return intent
}

// isDefault reports whether the apiserver gives back intent's value at p when creating without.
func (w *watcher) isDefault(ctx context.Context, without map[string]any, p placement.Path, intent map[string]any) bool {
	was, _ := placement.ValueAt(intent, p)
	got, err := w.dryRunCreate(ctx, without, namespaceOf(intent))
	if err != nil {
		return false // a required value, or one the apiserver refuses to go without
	}
	if empty(was) {
		return true // an empty mapping or list the apiserver takes as well without (strategy: {})
	}
	back, ok := placement.ValueAt(got, p)
	return ok && reflect.DeepEqual(back, was)
}

// leaves lists the paths of the fields of obj that hold a scalar or an empty mapping or list,
// leaving out its identity, labels and annotations; the items of a list of mappings are stepped
// into by index, and an item itself is never listed.
func leaves(obj map[string]any) []placement.Path {
	var out []placement.Path
	var walk func(p placement.Path, v any)
	walk = func(p placement.Path, v any) {
		switch v := v.(type) {
		case map[string]any:
			if len(v) == 0 && len(p) > 0 {
				out = append(out, slices.Clone(p))
			}
			for _, k := range slices.Sorted(maps.Keys(v)) {
				walk(append(p, placement.Step{Field: k}), v[k])
			}
		case []any:
			if len(v) == 0 {
				out = append(out, slices.Clone(p))
			}
			for i, item := range v {
				if _, isMap := item.(map[string]any); isMap { // an item itself is never tried
					walk(append(p, placement.Step{Index: i}), item)
				}
			}
		default:
			out = append(out, slices.Clone(p))
		}
	}
	for _, k := range slices.Sorted(maps.Keys(obj)) {
		if k == "apiVersion" || k == "kind" || k == "metadata" {
			continue
		}
		walk(placement.Path{{Field: k}}, obj[k])
	}
	return out
}

// removeAt removes the field at p from obj.
func removeAt(obj map[string]any, p placement.Path) {
	if parent, ok := placement.ValueAt(obj, p[:len(p)-1]); ok {
		if m, isMap := parent.(map[string]any); isMap {
			delete(m, p[len(p)-1].Field)
		}
	}
}

// empty reports whether v says nothing: an empty mapping or list.
func empty(v any) bool {
	switch v := v.(type) {
	case map[string]any:
		return len(v) == 0
	case []any:
		return len(v) == 0
	}
	return false
}

// namespaceOf is obj's metadata.namespace, "" when it has none.
func namespaceOf(obj map[string]any) string {
	meta, _ := obj["metadata"].(map[string]any)
	ns, _ := meta["namespace"].(string)
	return ns
}
