package placement

import (
	"slices"

	"github.com/configbutler/gitops-reverser/sanitize"
)

// Changes computes what a person changed in a live object, as the ops that write it into the
// object's document: only the intent, never the apiserver's expansion nor a controller's doing.
//
//   - file is the document's object as the team wrote it (sanitize.ObjectOf);
//   - baseline is file as the apiserver defaults it (a server-side dry-run create of file),
//     through sanitize.Object;
//   - live is the live object through sanitize.Object;
//   - owners is OwnersOf the live object's managedFields.
//
// Diffing baseline against live leaves out every default: the two carry the same ones. What
// differs is kept or dropped by these rules:
//
//   - A mapping's key in live and not in baseline is an addition: Set to live's value pruned to
//     what people own (Owners; a new list item keeps its key field too). A key in baseline and
//     not in live is a Remove, only where file declares it: a default that vanished means
//     nothing to the file. A key in both is compared deeper, or Set to live's value when the
//     values are scalars, lists without keys, or of different types and differ (same's rules:
//     quantities and numbers by value, a null as absent).
//   - A list whose items are all mappings with a key field (listKey) is matched by key: matched
//     items are compared deeper, a new item is an addition (Step{Match, Value}), a vanished one
//     a Remove. Another list is compared whole and Set whole.
//   - A Set of a path file does not declare is kept only when a person owns the path (Owners.
//     Person): a controller's addition (a Flux label, a webhook's sidecar) is dropped. When the
//     object has no managed fields (Owners not Known), no addition is kept: who made it cannot
//     be told.
//   - A Set of a path file declares is kept when a person owns it, or when the object has no
//     managed fields at all (not written since the apiserver tracked them, or stripped: who changed
//     what the file declares cannot be told, and keeping the file in step with it is the lesser
//     wrong): not when only controllers own it. An HPA's rescale of the replicas the file
//     declares is not written.
//   - A Set whose value file already holds there is dropped.
//   - Nothing under status, apiVersion or kind (the live object may be read at another version
//     than the file's); in metadata only labels and annotations: name and namespace never change,
//     and generateName, ownerReferences, finalizers and the rest are the cluster's business.
//
// Ops come in the object's order, the same for the same input: a mapping's keys by name, a
// list's items as live orders them (new items are appended in that order), then the items it
// lost, in baseline's order. Values are copies, never shared with live.
func Changes(file, baseline, live map[string]any, owners Owners) []Op {
	d := &differ{file: file, live: live, owners: owners}
	for _, k := range keys(baseline, live) {
		switch k {
		case "apiVersion", "kind", "status":
		case "metadata":
			b, _ := baseline[k].(map[string]any)
			l, _ := live[k].(map[string]any)
			for _, f := range []string{"labels", "annotations"} {
				bm, _ := b[f].(map[string]any)
				lm, _ := l[f].(map[string]any)
				d.maps(Path{{Field: k}, {Field: f}}, bm, lm)
			}
		default:
			d.diff(Path{{Field: k}}, baseline[k], live[k])
		}
	}
	return d.ops
}

// differ walks baseline and live together and collects the ops.
type differ struct {
	file, live map[string]any
	owners     Owners
	ops        []Op
}

// diff compares the values baseline and live have at p.
func (d *differ) diff(p Path, b, l any) {
	switch {
	case b == nil && l == nil:
		return
	case b == nil:
		d.add(p, l)
		return
	case l == nil:
		d.remove(p)
		return
	}
	if bm, ok := b.(map[string]any); ok {
		if lm, ok := l.(map[string]any); ok {
			d.maps(p, bm, lm)
			return
		}
	}
	if bl, ok := b.([]any); ok {
		if ll, ok := l.([]any); ok {
			d.lists(p, bl, ll)
			return
		}
	}
	if !same(p, b, l) {
		d.set(p, l)
	}
}

// maps compares two mappings key by key (either may be nil).
func (d *differ) maps(p Path, b, l map[string]any) {
	for _, k := range keys(b, l) {
		d.diff(p.field(k), b[k], l[k])
	}
}

// lists compares two lists: by key when listKey finds one, else whole.
func (d *differ) lists(p Path, b, l []any) {
	declared, _ := d.fileAt(p)
	inFile, _ := declared.([]any)
	key := listKey(b, l, inFile)
	if key == "" {
		if !same(p, b, l) {
			d.set(p, l)
		}
		return
	}
	before := make(map[any]map[string]any, len(b))
	for _, it := range b {
		obj := it.(map[string]any)
		before[canonical(obj[key])] = obj
	}
	after := make(map[any]bool, len(l))
	for _, it := range l {
		obj := it.(map[string]any)
		v := canonical(obj[key])
		after[v] = true
		if bo, ok := before[v]; ok {
			d.maps(p.item(key, v), bo, obj)
			continue
		}
		d.addItem(p.item(key, v), obj)
	}
	for _, it := range b {
		if v := canonical(it.(map[string]any)[key]); !after[v] {
			d.remove(p.item(key, v))
		}
	}
}

// set writes live's value l at p, where baseline had another.
func (d *differ) set(p Path, l any) {
	if d.fileHolds(p, l) {
		return
	}
	if _, declared := d.fileAt(p); d.owners.Known() && d.owners.personIn(p, d.live) || !d.owners.Known() && declared {
		d.ops = append(d.ops, Op{Path: p, Value: sanitize.DeepCopy(l)})
	}
}

// add writes live's value l at p, where baseline had none: the part of it people own.
func (d *differ) add(p Path, l any) {
	if v, ok := d.addition(p, l); ok {
		d.ops = append(d.ops, Op{Path: p, Value: v})
	}
}

// addItem adds a new item of a keyed list, keeping its key field whoever owns it, so that it can
// be found by it.
func (d *differ) addItem(p Path, item map[string]any) {
	v, ok := d.addition(p, item)
	if !ok {
		return
	}
	if m, isMap := v.(map[string]any); isMap {
		key := p[len(p)-1].Match
		m[key] = item[key]
	}
	d.ops = append(d.ops, Op{Path: p, Value: v})
}

// addition is what of l, new at p, goes into the file, and whether anything does.
func (d *differ) addition(p Path, l any) (any, bool) {
	if !d.owners.Known() {
		if _, declared := d.fileAt(p); declared && !d.fileHolds(p, l) {
			return sanitize.DeepCopy(l), true
		}
		return nil, false
	}
	v, ok := d.owners.ownedAt(p, d.live, l)
	if !ok || d.fileHolds(p, v) {
		return nil, false
	}
	return v, true
}

// remove removes p from the file, where baseline had a value and live has none: only if the file
// declares p.
func (d *differ) remove(p Path) {
	if _, declared := d.fileAt(p); declared {
		d.ops = append(d.ops, Op{Path: p, Remove: true})
	}
}

// fileHolds reports whether the file already has v at p.
func (d *differ) fileHolds(p Path, v any) bool {
	f, ok := d.fileAt(p)
	return ok && same(p, f, v)
}

// fileAt is the file's value at p, and whether the file declares p (a key present with a null
// value is declared).
func (d *differ) fileAt(p Path) (any, bool) {
	var at any = d.file
	for _, s := range p {
		if s.Field != "" {
			m, _ := at.(map[string]any)
			v, ok := m[s.Field]
			if !ok {
				return nil, false
			}
			at = v
			continue
		}
		item, index := resolve(at, s)
		if index < 0 {
			return nil, false
		}
		at = item
	}
	return at, true
}

// preferredKeys are the key fields listKey tries first, in order: the keys Kubernetes' own
// associative lists use (containers, env, volumes by name; ports by containerPort or port;
// volumeMounts by mountPath; volumeDevices by devicePath; hostAliases by ip).
var preferredKeys = []string{"name", "containerPort", "port", "mountPath", "devicePath", "ip"}

// listKey is the field that keys the items of lists, "" when there is none: every item of every
// list (baseline's, live's and the file's, which may be nil) is a mapping with this field, its
// values strings or numbers and unique in each list. preferredKeys come first, then the
// fields of the first item in the order of their names. The file must have the field too: a
// defaulted field (a port's protocol) cannot find the file's item.
func listKey(lists ...[]any) string {
	var first map[string]any
	for _, l := range lists {
		if len(l) > 0 {
			first, _ = l[0].(map[string]any)
			break
		}
	}
	if first == nil {
		return ""
	}
	for _, k := range preferredKeys {
		if keyOf(k, lists) {
			return k
		}
	}
	for _, k := range keys(first, nil) {
		if keyOf(k, lists) {
			return k
		}
	}
	return ""
}

// keyOf reports whether field k keys every list of lists.
func keyOf(k string, lists [][]any) bool {
	for _, l := range lists {
		seen := make(map[any]bool, len(l))
		for _, it := range l {
			obj, ok := it.(map[string]any)
			if !ok {
				return false
			}
			v := canonical(obj[k])
			switch v.(type) {
			case string, int64, float64:
			default:
				return false
			}
			if seen[v] {
				return false
			}
			seen[v] = true
		}
	}
	return true
}

// keys are the keys of a and b, sorted, once each.
func keys(a, b map[string]any) []string {
	out := make([]string, 0, len(a)+len(b))
	for k := range a {
		out = append(out, k)
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

// WithoutBaseline is what a person changed in live against file, when that is known without the
// apiserver's defaulting of the file (a server-side dry run), and ok. It is, when Changes with
// the file as its own baseline finds:
//   - nothing: Changes then writes nothing whatever the baseline. The apiserver's baseline is
//     file with defaults: where it differs from live, the file differs from live too (and that
//     difference was dropped for whoever owns it, or the file holds live's value already), or it
//     is at a default the file does not declare, which only ever drops a change. The one change
//     this misses is the removal of a key the file declares as null, which a default fills and
//     live lacks: the file keeps its null.
//   - only new values of scalars the file declares, in an object a GitOps applier that is not a
//     person server-side applied: the values the file declares reached the object as written,
//     and a webhook's or a default's values are the applier's or nobody's.
//
// Anything else (an addition, a removal, a list or mapping set whole) needs the baseline.
func WithoutBaseline(file, live map[string]any, owners Owners) (ops []Op, ok bool) {
	ops = Changes(file, file, live, owners)
	if len(ops) == 0 {
		return nil, true
	}
	if !owners.Known() || !owners.appliedFromGit {
		return nil, false
	}
	for _, op := range ops {
		declared, inFile := ValueAt(file, op.Path)
		if op.Remove || !inFile || !scalar(declared) || !scalar(op.Value) {
			return nil, false
		}
	}
	return ops, true
}

// scalar reports whether v is neither a mapping nor a list.
func scalar(v any) bool {
	switch v.(type) {
	case map[string]any, []any:
		return false
	}
	return true
}
