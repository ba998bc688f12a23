package placement

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/configbutler/gitops-reverser/sanitize"
)

// TestChangesWriteExactlyWhatPeopleChanged edits random objects as people and controllers
// would and checks, for each, that the file with Changes' ops applied is the file with the
// people's edits applied and nothing else: no default, no controller's value, whoever applied
// the file (Flux, or a person with kubectl apply, whose set holds every default too).
func TestChangesWriteExactlyWhatPeopleChanged(t *testing.T) {
	for seed := uint64(1); seed <= 2000; seed++ {
		w := newWorld(seed)
		ops := Changes(w.file, w.baseline, w.live, OwnersOf(w.managed(), DefaultPerson))
		if again := Changes(w.file, w.baseline, w.live, OwnersOf(w.managed(), DefaultPerson)); !reflect.DeepEqual(ops, again) {
			t.Fatalf("seed %d: the same input gave other ops:\n%s\nthen:\n%s", seed, opsText(ops), opsText(again))
		}
		got := applyOps(sanitize.DeepCopy(w.file).(map[string]any), ops)
		want := applyOps(sanitize.DeepCopy(w.file).(map[string]any), w.intent)
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("seed %d: the file with Changes' ops is not the file with the people's edits (-want +got):\n%s\nops:\n%s\npeople's edits:\n%s\nlog:\n%s",
				seed, cmp.Diff(want, got), opsText(ops), opsText(w.intent), w.log)
		}
	}
}

// TestUnchangedNeedsNoBaseline checks, on the random worlds, that where WithoutBaseline finds
// nothing to write, Changes with the apiserver's baseline writes nothing either: the dry run it
// saves would not have changed the answer.
func TestUnchangedNeedsNoBaseline(t *testing.T) {
	unchanged := 0
	for seed := uint64(1); seed <= 4000; seed++ {
		w := newWorld(seed)
		if seed%2 == 0 { // as the folder was applied, before anyone's edit: a seed's case
			w.live, w.sets = sanitize.DeepCopy(w.baseline).(map[string]any), map[string]map[string]any{"kustomize-controller": w.sets["kustomize-controller"]}
			if w.sets["kustomize-controller"] == nil {
				continue
			}
		}
		o := OwnersOf(w.managed(), DefaultPerson)
		if ops, ok := WithoutBaseline(w.file, w.live, o); !ok || len(ops) != 0 {
			continue
		}
		unchanged++
		if ops := Changes(w.file, w.baseline, w.live, o); len(ops) != 0 {
			t.Fatalf("seed %d: nothing without the baseline, but Changes with it writes:\n%s\nlog:\n%s", seed, opsText(ops), w.log)
		}
	}
	if unchanged < 500 {
		t.Fatalf("only %d worlds were unchanged: the test checks too little", unchanged)
	}
}

// world is one random case: a file, its baseline (the file with defaults), the live object
// after random edits, every manager's field set, and the people's edits as ops.
type world struct {
	r                    *rand.Rand
	n                    int // a counter that makes every new value and name unique
	file, baseline, live map[string]any
	sets                 map[string]map[string]any // manager → fieldsV1
	intent               []Op
	edited               []Path // the paths edits changed
	empty                []Path // those of them an edit set to an empty mapping
	log                  string
}

// fieldNames are the fields the worlds use: none is a preferred list key or a quantity field.
var fieldNames = []string{"alpha", "beta", "gamma", "delta", "kappa", "omega", "sigma", "theta"}

func newWorld(seed uint64) *world {
	w := &world{r: rand.New(rand.NewPCG(seed, 0)), sets: map[string]map[string]any{}}
	w.file = map[string]any{
		"apiVersion": "example.com/v1", "kind": "Widget",
		"metadata": map[string]any{"name": "w", "labels": map[string]any{"app": "w"}},
		"spec":     w.mapping(3),
	}
	w.baseline = sanitize.DeepCopy(w.file).(map[string]any)
	w.defaults(w.baseline["spec"].(map[string]any), 3)
	applier, applierSet := "kustomize-controller", w.file
	if w.r.IntN(2) == 0 {
		applier, applierSet = "kubectl-client-side-apply", w.baseline // an Update owns the defaults
	}
	w.sets[applier] = fieldsOf(applierSet)
	delete(w.sets[applier], "f:apiVersion")
	delete(w.sets[applier], "f:kind")
	w.live = sanitize.DeepCopy(w.baseline).(map[string]any)
	for range 1 + w.r.IntN(6) {
		w.edit()
	}
	return w
}

// managed is the worlds' managedFields.
func (w *world) managed() []any {
	var out []any
	for _, m := range sortedKeys(w.sets) {
		op := "Update"
		if m == "kustomize-controller" {
			op = "Apply"
		}
		out = append(out, map[string]any{"manager": m, "operation": op, "fieldsV1": w.sets[m]})
	}
	return out
}

func (w *world) value() any {
	w.n++
	if w.r.IntN(2) == 0 {
		return int64(w.n)
	}
	return fmt.Sprintf("v%d", w.n)
}

// mapping is a random mapping of scalars, mappings, keyed lists and lists of scalars.
func (w *world) mapping(depth int) map[string]any {
	m := map[string]any{}
	for range 1 + w.r.IntN(3) {
		k := fieldNames[w.r.IntN(len(fieldNames))]
		switch c := w.r.IntN(6); {
		case depth == 0 || c < 3:
			m[k] = w.value()
		case c == 3:
			m[k] = w.mapping(depth - 1)
		case c == 4:
			var items []any
			for range 1 + w.r.IntN(3) {
				items = append(items, w.item(depth-1))
			}
			m[k] = items
		default:
			m[k] = []any{w.value(), w.value()}
		}
	}
	return m
}

// item is a keyed list's new item.
func (w *world) item(depth int) map[string]any {
	w.n++
	item := map[string]any{"name": fmt.Sprintf("i%d", w.n)}
	if depth > 0 {
		for k, v := range w.mapping(depth - 1) {
			item[k] = v
		}
	}
	return item
}

// defaults adds fields to m and to the mappings below it, items too, as defaulting does.
func (w *world) defaults(m map[string]any, depth int) {
	for _, k := range sortedKeys(m) {
		switch v := m[k].(type) {
		case map[string]any:
			w.defaults(v, depth-1)
		case []any:
			for _, it := range v {
				if obj, ok := it.(map[string]any); ok {
					w.defaults(obj, depth-1)
				}
			}
		}
	}
	if w.r.IntN(2) == 0 {
		return
	}
	k := fieldNames[w.r.IntN(len(fieldNames))]
	if _, taken := m[k]; taken {
		return
	}
	if depth > 0 && w.r.IntN(3) == 0 {
		m[k] = map[string]any{"policy": w.value()}
	} else {
		m[k] = w.value()
	}
}

// TestWithoutBaselineAgreesWithTheBaseline checks, on the random worlds, that whenever
// WithoutBaseline answers, its ops are those Changes gives with the apiserver's baseline: the dry
// run it saves would not have changed the answer. Half the worlds are applied by Flux, half by a
// person with kubectl apply, where it must never answer.
func TestWithoutBaselineAgreesWithTheBaseline(t *testing.T) {
	answered := 0
	for seed := uint64(1); seed <= 4000; seed++ {
		w := newWorld(seed)
		owners := OwnersOf(w.managed(), DefaultPerson)
		ops, ok := WithoutBaseline(w.file, w.live, owners)
		if !ok {
			continue
		}
		if len(ops) == 0 {
			continue // nothing to write: TestUnchangedNeedsNoBaseline checks that case
		}
		answered++
		if _, flux := w.sets["kustomize-controller"]; !flux {
			t.Fatalf("seed %d: answered for an object a person applied", seed)
		}
		if want := Changes(w.file, w.baseline, w.live, owners); !reflect.DeepEqual(ops, want) {
			t.Fatalf("seed %d: without the baseline:\n%s\nwith it:\n%s\nlog:\n%s", seed, opsText(ops), opsText(want), w.log)
		}
	}
	if answered < 100 {
		t.Fatalf("answered %d times of 4000: the test shows nothing", answered)
	}
	t.Logf("answered without a baseline %d times of 4000", answered)
}
