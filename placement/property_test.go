package placement

import (
	"bytes"
	"fmt"
	"maps"
	"math/rand"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestEditRandomOps applies random sequences of ops to the fixtures' documents: the result
// always parses, reads back (through sanitize) as the document with the ops applied, keeps the
// other documents byte for byte, and changes no line of the document outside the nodes the ops
// reach. The seed is fixed; a failure prints it with the ops.
func TestEditRandomOps(t *testing.T) {
	const seed = 20240611
	r := rand.New(rand.NewSource(seed))
	var docs []propertyDoc
	for _, name := range []string{"app.yaml", "api.yaml", "odd.yaml"} {
		file := fixture(t, name)
		crlfFile := bytes.ReplaceAll(file, []byte("\n"), []byte("\r\n"))
		for i := range objects(t, file) {
			docs = append(docs, propertyDoc{name, file, i}, propertyDoc{name + " (CRLF)", crlfFile, i})
		}
	}
	for run := range 2000 {
		d := docs[r.Intn(len(docs))]
		g := &opGen{r: r, n: run}
		model := any(objects(t, d.file)[d.doc])
		var ops []Op
		for range 1 + r.Intn(4) {
			op := g.op(model)
			next, err := applyOp(model, op)
			if err != nil {
				t.Fatalf("seed %d run %d: the generator made an op that does not apply: %v", seed, run, err)
			}
			model, ops = next, append(ops, op)
		}
		if msg := checkEdit(t, d, ops, model); msg != "" {
			t.Fatalf("seed %d run %d, %s document %d, ops:\n%s\n%s", seed, run, d.name, d.doc, describe(ops), msg)
		}
	}
}

type propertyDoc struct {
	name string
	file []byte
	doc  int
}

// checkEdit edits d with ops and says what is wrong with the result, "" when nothing is.
func checkEdit(tb testing.TB, d propertyDoc, ops []Op, want any) string {
	out, err := Edit(d.file, d.doc, ops)
	if err != nil {
		return "Edit: " + err.Error()
	}
	got := objects(tb, out)
	if !equal(any(got[d.doc]), want) {
		return fmt.Sprintf("reads back as\n%v\nwant\n%v\nfile:\n%s", got[d.doc], want, out)
	}
	before, after := spans(d.file), spans(out)
	b, a := before[d.doc], after[d.doc]
	if !bytes.Equal(d.file[:b.start], out[:a.start]) || !bytes.Equal(d.file[b.end:], out[a.end:]) {
		return "another document changed:\n" + string(out)
	}
	edited := lineRegions(tb, d.file[b.start:b.end], ops)
	for _, line := range lineDiff(string(d.file[b.start:b.end]), string(out[a.start:a.end])) {
		if line[0] != '-' {
			continue
		}
		n, _ := strconv.Atoi(line[1:strings.IndexByte(line, ':')])
		if !edited[n] {
			return fmt.Sprintf("line %d of the document changed, which no op reaches (%v):\n%s", n, slices.Sorted(maps.Keys(edited)), out[a.start:a.end])
		}
	}
	return ""
}

// lineRegions is the set of the document's lines each op may change: those of the node its
// path leads to in the original document (with its key's line), or, when the path goes further
// than the original has, or removes, those of the node that holds it.
func lineRegions(tb testing.TB, text []byte, ops []Op) map[int]bool {
	out := map[int]bool{}
	for _, op := range ops {
		d := &document{}
		d.reset(bytes.ReplaceAll(text, []byte("\r\n"), []byte("\n")))
		root, err := d.parse()
		if err != nil {
			tb.Fatal(err)
		}
		path := op.Path
		trail, err := d.walk(root, path)
		for err != nil {
			path = path[:len(path)-1]
			trail, err = d.walk(root, path)
		}
		p := trail[len(trail)-1]
		if (len(trail) == len(op.Path)+1 && op.Remove) || !isBlock(p.node) && len(trail) > 1 && len(trail) < len(op.Path)+1 {
			p = trail[len(trail)-2]
		}
		first := p.node.Line
		switch {
		case p.key != nil:
			first = p.key.Line
		case p.parent != nil:
			first = d.lineOf(d.dash(p.node, p.parent))
		}
		last := d.lineOf(d.end(p.node, p.parentCol()))
		for l := first; l <= last; l++ {
			out[l] = true
		}
	}
	return out
}

// lineOf is the 1-based line of offset at.
func (d *document) lineOf(at int) int {
	line, _ := slices.BinarySearch(d.lines, at+1)
	return line
}

func describe(ops []Op) string {
	var b strings.Builder
	for _, op := range ops {
		if op.Remove {
			fmt.Fprintf(&b, "  remove %s\n", op.Path)
		} else {
			fmt.Fprintf(&b, "  set %s = %#v\n", op.Path, op.Value)
		}
	}
	return b.String()
}

// opGen makes random ops that apply to a model: set a scalar, remove a key or item, add a key
// or a named item, set a whole mapping or list to a changed copy, set any node to a new value.
type opGen struct {
	r *rand.Rand
	n int // the run, for new names
	k int // new names made so far
}

func (g *opGen) op(model any) Op {
	all := nodePaths(model, nil)
	for {
		at := all[g.r.Intn(len(all))]
		v, _ := ValueAt(model, at)
		switch g.r.Intn(7) {
		case 0:
			if !isCollection(v) {
				return Op{Path: at, Value: g.scalar()}
			}
		case 1:
			if len(at) > 0 {
				return Op{Path: at, Remove: true}
			}
		case 2:
			if _, ok := v.(map[string]any); ok {
				return Op{Path: with(at, Step{Field: g.name()}), Value: g.value(2)}
			}
		case 3:
			if l, ok := v.([]any); ok && len(l) > 0 {
				if key := keyField(l, l); key != "" {
					return Op{Path: with(at, Step{Match: key, Value: g.name()}), Value: map[string]any{"x-" + key: g.scalar()}}
				}
			}
		case 4:
			if m, ok := v.(map[string]any); ok && len(at) > 0 {
				return Op{Path: at, Value: g.changedMapping(m)}
			}
		case 5:
			if l, ok := v.([]any); ok && len(l) > 0 {
				return Op{Path: at, Value: g.changedList(l)}
			}
		case 6:
			if len(at) > 0 && !named(at) {
				return Op{Path: at, Value: g.value(2)}
			}
		}
	}
}

// nodePaths is the path of every node of v, named list items by their key.
func nodePaths(v any, at Path) []Path {
	out := []Path{at}
	switch x := v.(type) {
	case map[string]any:
		for _, k := range ordered(x, nil) {
			out = append(out, nodePaths(x[k], with(at, Step{Field: k}))...)
		}
	case []any:
		key := ""
		if len(x) > 0 {
			key = keyField(x, x)
		}
		for i, item := range x {
			s := Step{Index: i}
			if key != "" {
				s = Step{Match: key, Value: item.(map[string]any)[key]}
			}
			out = append(out, nodePaths(item, with(at, s))...)
		}
	}
	return out
}

// named reports whether path ends at a named item (which only a mapping with its name can
// replace).
func named(path Path) bool { return path[len(path)-1].Match != "" }

func (g *opGen) changedMapping(m map[string]any) map[string]any {
	out := make(map[string]any, len(m)+1)
	for k, v := range m {
		out[k] = v
	}
	keys := ordered(m, nil)
	if len(keys) > 1 && g.r.Intn(2) == 0 {
		delete(out, keys[g.r.Intn(len(keys))])
	}
	if len(keys) > 0 && g.r.Intn(2) == 0 {
		if k := keys[g.r.Intn(len(keys))]; !isCollection(out[k]) {
			out[k] = g.scalar()
		}
	}
	out[g.name()] = g.value(1)
	return out
}

func (g *opGen) changedList(l []any) []any {
	out := append([]any(nil), l...)
	if len(out) > 1 && g.r.Intn(2) == 0 {
		i := g.r.Intn(len(out))
		out = append(out[:i], out[i+1:]...)
	}
	item := g.scalar()
	if key := keyField(l, l); key != "" {
		item = map[string]any{key: g.name(), "value": g.scalar()}
	}
	i := g.r.Intn(len(out) + 1)
	return append(out[:i], append([]any{item}, out[i:]...)...)
}

func (g *opGen) name() string {
	g.k++
	return fmt.Sprintf("new%d-%d", g.n, g.k)
}

// value is a random scalar, mapping or list, nested at most depth levels.
func (g *opGen) value(depth int) any {
	if depth == 0 {
		return g.scalar()
	}
	switch g.r.Intn(4) {
	case 0:
		return map[string]any{"x": g.value(depth - 1), "name": g.name()}
	case 1:
		return []any{g.scalar(), g.scalar()}
	case 2:
		return []any{map[string]any{"name": g.name(), "v": g.scalar()}}
	}
	return g.scalar()
}

// scalars are values a hand-written file holds, and values that must be quoted to read back.
var scalars = []any{
	"web", "nginx:1.27", "true", "1.0", "null", "", ": x", "#x", "a #b", "yes", "80",
	"two\nlines", "ends\n", "  lead\nx", "grüße", "it's", `say "hi"`, "- item", "{a}",
	int64(0), int64(3), int64(-7), 2.5, true, false, nil,
}

func (g *opGen) scalar() any { return scalars[g.r.Intn(len(scalars))] }

func isCollection(v any) bool {
	switch v.(type) {
	case map[string]any, []any:
		return true
	}
	return false
}
