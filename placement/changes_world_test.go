package placement

import (
	"encoding/json"
	"slices"

	"github.com/configbutler/gitops-reverser/sanitize"
)

// site is a place in a world's live object an edit can change.
type site struct {
	path  Path
	kind  string // "scalar", "mapping", "keyed" (a list of named items), "item", "scalars" (a list)
	value any
}

// sites lists the places of the live object's spec and labels.
func (w *world) sites() []site {
	var out []site
	labels := Path{{Field: "metadata"}, {Field: "labels"}}
	out = append(out, site{labels, "mapping", w.live["metadata"].(map[string]any)["labels"]})
	return walkSites(Path{{Field: "spec"}}, w.live["spec"].(map[string]any), out)
}

func walkSites(p Path, m map[string]any, out []site) []site {
	return walkFields(p, m, append(out, site{p, "mapping", m}))
}

// walkFields lists the sites of m's fields and below.
func walkFields(p Path, m map[string]any, out []site) []site {
	for _, k := range sortedKeys(m) {
		at := p.field(k)
		switch v := m[k].(type) {
		case map[string]any:
			out = walkSites(at, v, out)
		case []any:
			if len(v) == 0 {
				continue
			}
			if _, named := v[0].(map[string]any); !named {
				out = append(out, site{at, "scalars", v})
				continue
			}
			out = append(out, site{at, "keyed", v})
			for _, it := range v {
				item := it.(map[string]any)
				ip := at.item("name", item["name"])
				out = walkFields(ip, item, append(out, site{ip, "item", item}))
			}
		default:
			if k != "name" { // an item's key is not edited: that is another item
				out = append(out, site{at, "scalar", v})
			}
		}
	}
	return out
}

// edit makes one random edit, by a person (kubectl-edit) or a controller
// (kube-controller-manager), at a site no earlier edit is at, above or below.
func (w *world) edit() {
	sites := w.sites()
	for range 20 {
		s := sites[w.r.IntN(len(sites))]
		manager := "kubectl-edit"
		if w.r.IntN(5) < 2 {
			manager = "kube-controller-manager"
		}
		if op, ok := w.change(s, manager); ok && !w.overlaps(op.Path) {
			w.edited = append(w.edited, op.Path)
			if m, ok := op.Value.(map[string]any); ok && len(m) == 0 {
				w.empty = append(w.empty, op.Path)
			}
			w.live = applyOps(w.live, []Op{op})
			w.own(manager, op)
			if manager == "kubectl-edit" {
				w.intent = append(w.intent, op)
			}
			w.log += manager + ": " + opsText([]Op{op})
			return
		}
	}
}

// change is the op of a random edit at s; removals are people's only.
func (w *world) change(s site, manager string) (Op, bool) {
	remove := manager == "kubectl-edit" && w.r.IntN(3) == 0
	removable := s.kind == "scalar" || s.kind == "item" || s.kind == "mapping" && len(s.path) > 2
	switch {
	case remove && removable:
		return Op{Path: s.path, Remove: true}, true
	case s.kind == "scalar":
		return Op{Path: s.path, Value: w.value()}, true
	case s.kind == "scalars":
		return Op{Path: s.path, Value: []any{w.value()}}, true
	case s.kind == "keyed":
		item := w.item(1)
		return Op{Path: s.path.item("name", item["name"]), Value: item}, true
	}
	return w.addField(s)
}

// addField adds a field to the mapping or item at s: a scalar, an empty mapping or a mapping.
func (w *world) addField(s site) (Op, bool) {
	k := fieldNames[w.r.IntN(len(fieldNames))]
	if _, taken := s.value.(map[string]any)[k]; taken {
		return Op{}, false
	}
	v := w.value()
	switch w.r.IntN(4) {
	case 0:
		v = map[string]any{}
	case 1:
		v = map[string]any{"policy": w.value()}
	}
	return Op{Path: s.path.field(k), Value: v}, true
}

// overlaps reports whether an earlier edit is at p, above or below it. Below an empty mapping
// an edit added is the exception, the case of a mapping set empty then filled by another.
func (w *world) overlaps(p Path) bool {
	for _, e := range w.edited {
		n := min(len(e), len(p))
		if e[:n].String() != p[:n].String() {
			continue
		}
		if len(p) > len(e) && slices.ContainsFunc(w.empty, func(x Path) bool { return x.String() == e.String() }) {
			continue
		}
		return true
	}
	return false
}

// own records op as an Update by manager: every manager loses what op changed or removed, and
// manager owns what op set.
func (w *world) own(manager string, op Op) {
	keys := fieldKeys(op.Path)
	for _, set := range w.sets {
		dropField(set, keys)
	}
	if op.Remove {
		return
	}
	if w.sets[manager] == nil {
		w.sets[manager] = map[string]any{}
	}
	node := w.sets[manager]
	for _, k := range keys[:len(keys)-1] {
		below, _ := node[k].(map[string]any)
		switch {
		case below == nil:
			below = map[string]any{}
			node[k] = below
		case len(below) == 0: // a leaf the manager owns, and now what is below it too
			below["."] = map[string]any{}
		}
		node = below
	}
	node[keys[len(keys)-1]] = fieldsOfValue(op.Value, op.Path[len(op.Path)-1].Match != "")
}

// fieldKeys writes p as the keys of a field set: f:field, k:{"name":"…"}.
func fieldKeys(p Path) []string {
	var out []string
	for _, s := range p {
		if s.Field != "" {
			out = append(out, "f:"+s.Field)
			continue
		}
		key, _ := json.Marshal(map[string]any{s.Match: s.Value})
		out = append(out, "k:"+string(key))
	}
	return out
}

// dropField removes the node at keys from set, and the nodes it leaves empty.
func dropField(set map[string]any, keys []string) {
	if len(keys) == 1 {
		delete(set, keys[0])
		return
	}
	below, ok := set[keys[0]].(map[string]any)
	if !ok || len(below) == 0 {
		return
	}
	dropField(below, keys[1:])
	if len(below) == 0 {
		delete(set, keys[0])
	}
}

// fieldsOf is the field set of every field of obj, as an Apply of obj owns them.
func fieldsOf(obj map[string]any) map[string]any {
	out := map[string]any{}
	for k, v := range obj {
		out["f:"+k] = fieldsOfValue(v, false)
	}
	return out
}

// fieldsOfValue is the field set of v; item says v is a keyed list's item, which is in the set
// itself (".").
func fieldsOfValue(v any, item bool) map[string]any {
	switch v := v.(type) {
	case map[string]any:
		if len(v) == 0 {
			return map[string]any{}
		}
		out := fieldsOf(v)
		if item {
			out["."] = map[string]any{}
		}
		return out
	case []any:
		if len(v) == 0 {
			break
		}
		if _, named := v[0].(map[string]any); named {
			out := map[string]any{}
			for _, it := range v {
				key, _ := json.Marshal(map[string]any{"name": it.(map[string]any)["name"]})
				out["k:"+string(key)] = fieldsOfValue(it, true)
			}
			return out
		}
	}
	return map[string]any{}
}

// applyOps applies ops to obj as the document editor would, and returns it.
func applyOps(obj map[string]any, ops []Op) map[string]any {
	for _, op := range ops {
		obj = applyOpModel(obj, op.Path, op).(map[string]any)
	}
	return obj
}

// applyOpModel applies op at p (what is left of op.Path) below cur, and returns what is there after.
// A set makes the mappings and named items on its way; a remove of what is not there does nothing.
func applyOpModel(cur any, p Path, op Op) any {
	switch {
	case len(p) == 0:
		return sanitize.DeepCopy(op.Value)
	case p[0].Field != "":
		return applyField(cur, p, op)
	}
	list, _ := cur.([]any)
	_, i := resolve(list, p[0])
	switch {
	case i >= 0 && len(p) == 1 && op.Remove:
		return slices.Delete(list, i, i+1)
	case i >= 0:
		list[i] = applyOpModel(list[i], p[1:], op)
		return list
	case op.Remove:
		return cur
	}
	return append(list, applyOpModel(map[string]any{p[0].Match: p[0].Value}, p[1:], op))
}

// applyField is applyOpModel at a mapping's field.
func applyField(cur any, p Path, op Op) any {
	m, _ := cur.(map[string]any)
	_, ok := m[p[0].Field]
	switch {
	case op.Remove && !ok:
		return cur
	case op.Remove && len(p) == 1:
		delete(m, p[0].Field)
		return m
	case m == nil:
		m = map[string]any{}
	}
	m[p[0].Field] = applyOpModel(m[p[0].Field], p[1:], op)
	return m
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
