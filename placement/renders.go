package placement

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
)

// ErrNotRendered is Renders' error when the render holds no object of want's identity.
var ErrNotRendered = errors.New("not in the render")

// Renders checks that the kustomization in dir of files (as Build takes them) renders want:
// nil when the rendered object with want's identity (group, kind, namespace, name) equals want,
// else an error naming the first difference (its path and both values), or saying that the
// object is missing from the render (ErrNotRendered), or why the build failed. The Git worker
// calls it before it commits an edit of a document under a kustomization: an object that does
// not render to the live object's intent is not written.
//
// want is the whole object as it should come out of the build (after the namespace, prefixes,
// labels, patches and images the kustomizations apply). Equality is semantic, by same's rules,
// the rules Changes compares by: both sides hold sanitize.ObjectOf's Go types, maps are Go maps
// so the order of their keys never counts, numbers compare by value (1 is 1.0), quantities by
// value where the field holds quantities ("500m" is "0.5"), and a null is as if absent. The
// order of a list's items counts, as it does for the apiserver.
func Renders(files map[string][]byte, dir string, want map[string]any) error {
	k, err := keyOfObject(want)
	if err != nil {
		return fmt.Errorf("check the render of %s: want: %w", showDir(cleanDir(dir)), err)
	}
	objs, err := Build(files, dir)
	if err != nil {
		return err
	}
	got, ok := objs[k]
	if !ok {
		return fmt.Errorf("the kustomization in %s renders no %s: %w", showDir(cleanDir(dir)), k, ErrNotRendered)
	}
	if d, ok := difference(nil, want, got); ok {
		return fmt.Errorf("the kustomization in %s renders %s with %s = %s, want %s",
			showDir(cleanDir(dir)), k, showPath(d.path), showValue(d.got), showValue(d.want))
	}
	return nil
}

// diffAt is where two objects differ and what each holds there (nil for nothing).
type diffAt struct {
	path      Path
	want, got any
}

// difference finds the first place, in the order of sorted keys and list items, where want and
// got differ by same's rules.
func difference(p Path, want, got any) (diffAt, bool) {
	switch w := want.(type) {
	case map[string]any:
		if g, ok := got.(map[string]any); ok {
			return mapDifference(p, w, g)
		}
	case []any:
		if g, ok := got.([]any); ok && len(g) == len(w) {
			return listDifference(p, w, g)
		}
	}
	if same(p, want, got) {
		return diffAt{}, false
	}
	return diffAt{p, want, got}, true
}

func mapDifference(p Path, want, got map[string]any) (diffAt, bool) {
	ks := keys(want, got)
	slices.Sort(ks)
	for _, k := range ks {
		if d, ok := difference(p.field(k), want[k], got[k]); ok {
			return d, true
		}
	}
	return diffAt{}, false
}

// listDifference compares lists of one length item by item; an item of a keyed list (containers
// by name) is named by its key in the path when both lists hold the same key there.
func listDifference(p Path, want, got []any) (diffAt, bool) {
	key := listKey(want, got)
	for i := range want {
		step := p.index(i)
		if key != "" {
			w := canonical(want[i].(map[string]any)[key])
			if w == canonical(got[i].(map[string]any)[key]) {
				step = p.item(key, w)
			}
		}
		if d, ok := difference(step, want[i], got[i]); ok {
			return d, true
		}
	}
	return diffAt{}, false
}

// showPath names a path for messages: "the object" for its root.
func showPath(p Path) string {
	if len(p) == 0 {
		return "the object"
	}
	return p.String()
}

// maxShown is how much of a value a message shows.
const maxShown = 200

// showValue writes v as JSON (maps with sorted keys), "nothing" for nil, cut at maxShown.
func showValue(v any) string {
	if v == nil {
		return "nothing"
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	if len(b) > maxShown {
		return string(b[:maxShown]) + "…"
	}
	return string(b)
}
