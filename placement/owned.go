package placement

import "github.com/configbutler/gitops-reverser/sanitize"

// Owned is the intent of a live object that no file holds yet: live (through sanitize.Object)
// pruned to the fields people own, with apiVersion, kind, metadata.name and metadata.namespace
// always. As in Changes, metadata keeps only those and the labels and annotations people own,
// and status goes. A list item people own keeps a key field (keepKeys). When owners are not
// Known, live is returned as it is.
//
// A person's create is an Update, and the apiserver defaults the object before it counts the
// fields the create set: kubectl create's manager owns the defaults it got (a Deployment's
// strategy, a container's imagePullPolicy and terminationMessagePath, …), and they stay. Only
// an object made by server-side apply (kubectl apply --server-side) comes out as it was sent.
func Owned(live map[string]any, owners Owners) map[string]any {
	if !owners.Known() {
		return live
	}
	out := make(map[string]any, len(live))
	for k, v := range live {
		switch k {
		case "apiVersion", "kind":
			out[k] = v
		case "status":
		case "metadata":
			if m, ok := v.(map[string]any); ok {
				out[k] = owners.ownedMetadata(m, live)
			}
		default:
			if x, ok := owners.ownedAt(Path{{Field: k}}, live, v); ok {
				out[k] = x
			}
		}
	}
	return out
}

// ownedMetadata is the metadata m of live pruned as Owned says.
func (o Owners) ownedMetadata(m, live map[string]any) map[string]any {
	out := make(map[string]any, 4)
	for _, k := range []string{"name", "namespace"} {
		if v, ok := m[k]; ok {
			out[k] = v
		}
	}
	for _, k := range []string{"labels", "annotations"} {
		if v, ok := m[k].(map[string]any); ok {
			if x, ok := o.ownedAt(Path{{Field: "metadata"}, {Field: k}}, live, v); ok && len(x.(map[string]any)) > 0 {
				out[k] = x
			}
		}
	}
	return out
}

// ownedAt is v, the value at p in root, pruned to what people own, and whether they own any of it.
func (o Owners) ownedAt(p Path, root, v any) (any, bool) {
	people, all, whole := o.walk(p, root)
	if whole {
		return sanitize.DeepCopy(v), true
	}
	return prune(v, people, all)
}

// prune is v pruned to what the field sets people hold (at v's path; all are everyone's there).
func prune(v any, people, all []*fieldSet) (any, bool) {
	if len(people) == 0 {
		return nil, false
	}
	if atomic(people, all) {
		return sanitize.DeepCopy(v), true
	}
	switch v := v.(type) {
	case map[string]any:
		return pruneMap(v, people, all)
	case []any:
		return pruneList(v, people, all)
	}
	return v, true
}

// pruneMap keeps the fields people own; an empty mapping only when people own it itself.
func pruneMap(v map[string]any, people, all []*fieldSet) (any, bool) {
	out := make(map[string]any)
	for k, x := range v {
		s := Step{Field: k}
		if kept, ok := prune(x, children(people, s, nil, -1), children(all, s, nil, -1)); ok {
			out[k] = kept
		}
	}
	return out, len(out) > 0 || itself(people)
}

// pruneList keeps the items people own, each with its key fields; an empty list only when people
// own it itself.
func pruneList(v []any, people, all []*fieldSet) (any, bool) {
	out := make([]any, 0, len(v))
	for i, it := range v {
		s := Step{Index: i}
		mine := children(people, s, it, i)
		kept, ok := prune(it, mine, children(all, s, it, i))
		if !ok {
			continue
		}
		if obj, isMap := it.(map[string]any); isMap {
			keepKeys(kept, obj, people, i)
		}
		out = append(out, kept)
	}
	return out, len(out) > 0 || itself(people)
}

// keepKeys copies into kept (item pruned, at index i) the key fields of an associative member of
// nodes that item matches, when kept has none of them: the item must be found by something.
// One is enough: a port sent as containerPort 80 does not gain the protocol TCP it was keyed by.
func keepKeys(kept any, item map[string]any, nodes []*fieldSet, i int) {
	m, ok := kept.(map[string]any)
	if !ok {
		return
	}
	for _, n := range nodes {
		for _, mem := range n.members {
			if mem.kind != 'k' || !mem.matches(Step{Index: i}, item, i) || hasAny(m, mem.key) {
				continue
			}
			for k := range mem.key {
				m[k] = item[k]
			}
		}
	}
}

// hasAny reports whether m has one of the fields of key.
func hasAny(m, key map[string]any) bool {
	for k := range key {
		if _, ok := m[k]; ok {
			return true
		}
	}
	return false
}

// itself reports whether one of nodes holds its value itself ("." or a leaf).
func itself(nodes []*fieldSet) bool {
	for _, n := range nodes {
		if n.self || n.leaf {
			return true
		}
	}
	return false
}
