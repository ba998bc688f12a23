package placement

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// Check renders the overlay with edits and returns the render when it gives object k what ops
// set and changes nothing else: every other object renders as before (a generated object's new
// name, in the objects that refer to it, aside). Otherwise nothing of the change may be written,
// and the error says why.
func (o *Overlay) Check(k Key, ops []Op, edits []FileEdit) (*Overlay, error) {
	after, err := o.render(edits)
	if err != nil {
		return nil, err
	}
	now, renamed := after.counterpart(o, k)
	if err := RenderedHolds(after.Objects, o.Dir, now, ops); err != nil {
		return nil, err
	}
	if err := o.sameBut(after, k, now, renamed); err != nil {
		return nil, err
	}
	return after, nil
}

// render renders the overlay with edits.
func (o *Overlay) render(edits []FileEdit) (*Overlay, error) {
	files := maps.Clone(o.Files)
	for _, e := range edits {
		if e.Data == nil {
			delete(files, e.Path)
		} else {
			files[e.Path] = e.Data
		}
	}
	after, err := renderCarried(files, o)
	if err != nil {
		return nil, fmt.Errorf("with this change the overlay %s does not build: %w", showDir(o.Dir), err)
	}
	return after, nil
}

// renderCarried renders files, the overlay o with a change's edits, and carries each object's
// origin over from o rather than tracing it anew (reading every document again): an edit never
// moves a document to another file. Check gives a generated object's new name its origin.
func renderCarried(files map[string][]byte, o *Overlay) (*Overlay, error) {
	after, _, err := renderOnly(files, o.Dir)
	if err != nil {
		return nil, err
	}
	after.Origins = make(map[Key]Origin, len(after.Objects))
	for key := range after.Objects {
		if origin, ok := o.Origins[key]; ok {
			after.Origins[key] = origin
		}
	}
	return after, nil
}

// sameBut reports, as an error, an object of the render other than k (now in after, renamed
// when generated anew) that after renders otherwise, or does not render, or renders anew.
func (o *Overlay) sameBut(after *Overlay, k, now Key, renamed string) error {
	for key, was := range o.Objects {
		if key == k {
			continue
		}
		got, ok := after.Objects[key]
		if !ok {
			return fmt.Errorf("the change would remove %s from the overlay's render", key)
		}
		if renamed != "" {
			was = renamedIn(was, k.Name, renamed).(map[string]any)
		}
		if !equal(was, got) {
			return fmt.Errorf("the change would also change %s, which the person did not change", key)
		}
	}
	for key := range after.Objects {
		if _, ok := o.Objects[key]; !ok && key != now {
			return fmt.Errorf("the change would add %s to the overlay's render", key)
		}
	}
	return nil
}

// counterpart is k in after: itself, or, for a generated object whose name changed with its
// content (kustomize's hash suffix), the object of after generated in its place, with its name.
func (after *Overlay) counterpart(before *Overlay, k Key) (Key, string) {
	if _, ok := after.Objects[k]; ok {
		return k, ""
	}
	origin := before.Origins[k]
	if origin.Generator == "" {
		return k, ""
	}
	stem := hashStem(k.Name)
	var found []Key
	for key := range after.Objects {
		if key.Kind == k.Kind && key.Namespace == k.Namespace && hashStem(key.Name) == stem {
			if _, old := before.Objects[key]; !old {
				found = append(found, key)
			}
		}
	}
	if len(found) != 1 {
		return k, ""
	}
	after.Origins[found[0]] = origin
	return found[0], found[0].Name
}

// hashStem is a generated name without the hash kustomize appends (name-<10 characters>).
func hashStem(name string) string {
	if i := strings.LastIndex(name, "-"); i > 0 && len(name)-i-1 == 10 {
		return name[:i]
	}
	return name
}

// renamedIn is v with every string that is old replaced by now.
func renamedIn(v any, old, now string) any {
	switch v := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, x := range v {
			out[k] = renamedIn(x, old, now)
		}
		return out
	case []any:
		out := slices.Clone(v)
		for i, x := range out {
			out[i] = renamedIn(x, old, now)
		}
		return out
	case string:
		if v == old {
			return now
		}
	}
	return v
}
