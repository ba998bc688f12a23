package placement

import (
	"errors"
	"fmt"
	"path"
	"strings"

	"github.com/configbutler/gitops-reverser/sanitize"
)

// FileEdit is one file a change writes: its new content.
type FileEdit struct {
	Path string
	Data []byte
}

// ErrNotExpressible is a change the overlay cannot say without writing a file it does not own
// (a base other kustomizations render, a file outside the destination's folder): nothing is
// written, and the error says what a person would do.
var ErrNotExpressible = errors.New("cannot be written in the overlay")

// landing is one change being placed: the files it edited so far over the overlay's.
type landing struct {
	o    *Overlay
	k    Key
	own  func(p string) bool
	name string // k's name as its document writes it (sourceName), read once
	// literal leaves images: alone: the image goes where any other field goes. imaged says an
	// image went into images:, which other objects may share.
	literal, imaged bool
	edits           map[string][]byte
	order           []string
}

// newLanding starts placing a change of k in o.
func newLanding(o *Overlay, k Key, own func(p string) bool) *landing {
	l := &landing{o: o, k: k, own: own, edits: map[string][]byte{}}
	l.name = l.sourceName()
	return l
}

func (l *landing) read(p string) ([]byte, bool) {
	if d, ok := l.edits[p]; ok {
		return d, true
	}
	d, ok := l.o.Files[p]
	return d, ok
}

func (l *landing) write(p string, data []byte) {
	if _, ok := l.edits[p]; !ok {
		l.order = append(l.order, p)
	}
	l.edits[p] = data
}

func (l *landing) result() []FileEdit {
	out := make([]FileEdit, 0, len(l.order))
	for _, p := range l.order {
		out = append(out, FileEdit{Path: p, Data: l.edits[p]})
	}
	return out
}

// Land places ops, what a person changed in the rendered object k, where a person would have
// made the change in the overlay, and returns the files it edits:
//
//   - an image of a container: the overlay's images: entry for it (newName, newTag, digest), or
//     a new entry;
//   - spec.replicas: the overlay's replicas: entry, or a new one;
//   - a field an overlay patch sets: that patch, in place;
//   - any other field of an object whose document the destination owns: that document;
//   - any other field: the overlay's strategic-merge patch of the object, or a new one,
//     registered in the kustomization's patches:.
//
// own reports whether the destination may write a file: under its folder, and rendered by no
// other kustomization of the repository. Where a change needs a file it does not own, Land
// returns ErrNotExpressible. Nothing is checked here: Check renders the result, and Place does
// both.
func (o *Overlay) Land(k Key, ops []Op, own func(p string) bool) ([]FileEdit, error) {
	l, err := o.land(k, ops, own, false)
	if err != nil {
		return nil, err
	}
	return l.result(), nil
}

// Place lands ops (Land) and checks the render (Check), and returns the edits and the render
// with them. When an images: entry would change other objects too (they share the image), the
// image goes into the object's own patch instead.
func (o *Overlay) Place(k Key, ops []Op, own func(p string) bool) ([]FileEdit, *Overlay, error) {
	l, err := o.land(k, ops, own, false)
	if err != nil {
		return nil, nil, err
	}
	after, err := o.Check(k, ops, l.result())
	if err == nil || !l.imaged {
		return l.result(), after, err
	}
	literal, lerr := o.land(k, ops, own, true)
	if lerr != nil {
		return nil, nil, err
	}
	if after, lerr = o.Check(k, ops, literal.result()); lerr != nil {
		return nil, nil, err
	}
	return literal.result(), after, nil
}

func (o *Overlay) land(k Key, ops []Op, own func(p string) bool, literal bool) (*landing, error) {
	if _, ok := o.Objects[k]; !ok {
		return nil, fmt.Errorf("%s: the overlay %s does not render it", k, showDir(o.Dir))
	}
	l := newLanding(o, k, own)
	l.literal = literal
	var rest []Op
	for _, op := range ops {
		placed, err := l.special(op)
		if err != nil {
			return nil, err
		}
		if !placed {
			rest = append(rest, op)
		}
	}
	if len(rest) > 0 {
		if err := l.fields(rest); err != nil {
			return nil, err
		}
	}
	return l, nil
}

// special places op in the overlay's images:, replicas: or in a patch that sets it already, and
// reports whether it did.
func (l *landing) special(op Op) (bool, error) {
	if p, doc, at, ok, err := l.patchSetting(op.Path); ok || err != nil {
		if err != nil {
			return false, err
		}
		op.Path = at
		return true, l.editDoc(p, doc, []Op{op}, "the patch that sets "+at.String())
	}
	// An object whose document the destination owns keeps its image and replicas there, unless
	// an images: or replicas: entry of the overlay decides them already.
	o := l.o.Origins[l.k]
	ownDoc := o.Path != "" && l.own(o.Path)
	if !l.literal && !op.Remove && isImagePath(op.Path) {
		if s, ok := op.Value.(string); ok {
			if i, _ := l.imageEntry(op.Path); !ownDoc || i >= 0 {
				l.imaged = true
				return true, l.image(op.Path, s)
			}
		}
	}
	if !op.Remove && isReplicasPath(op.Path) {
		if n, ok := op.Value.(int64); ok && (!ownDoc || l.replicasEntry() != "") {
			return true, l.replicas(n)
		}
	}
	return false, nil
}

// editDoc edits document doc of file p with ops, when the destination owns p.
func (l *landing) editDoc(p string, doc int, ops []Op, what string) error {
	if !l.own(p) {
		return fmt.Errorf("%s is %s, which the destination does not own (a base others render, or outside its folder): %w", what, p, ErrNotExpressible)
	}
	data, _ := l.read(p)
	edit := Edit
	if len(ops) > 0 && len(ops[0].Path) > 0 && ops[0].Path[0].Field == "" {
		edit = editList // a JSON 6902 patch: a list of ops
	}
	edited, err := edit(data, doc, ops)
	if err != nil {
		return fmt.Errorf("edit %s: %w", p, err)
	}
	l.write(p, edited)
	return nil
}

// editKustomization edits the overlay's own kustomization with ops.
func (l *landing) editKustomization(ops []Op, what string) error {
	return l.editDoc(l.o.kpath, 0, ops, what)
}

// fields places ops that no images:, replicas: or patch decides: in the object's own document,
// or in the overlay's patch of it.
func (l *landing) fields(ops []Op) error {
	origin := l.o.Origins[l.k]
	if origin.Generator != "" {
		return l.generated(origin, ops)
	}
	if origin.Path != "" && l.own(origin.Path) {
		doc, _, ok := l.sourceDoc(origin.Path)
		if !ok {
			return fmt.Errorf("%s: no document of %s holds it", l.k, origin.Path)
		}
		return l.editDoc(origin.Path, doc, ops, "its document")
	}
	return l.patch(ops)
}

// sourceName is k's name as its document writes it, before the overlays' namePrefix and
// nameSuffix.
func (l *landing) sourceName() string {
	if o := l.o.Origins[l.k]; o.Path != "" {
		if _, obj, ok := l.sourceDoc(o.Path); ok {
			return nameOf(obj)
		}
	}
	return l.k.Name
}

// sourceDoc is the document of file p that holds k, before the overlays renamed it: the only
// one of k's group and kind, else the one whose name is k's, else the longest name within k's
// (a prefix and suffix around it).
func (l *landing) sourceDoc(p string) (int, map[string]any, bool) {
	data, _ := l.read(p)
	best, bestObj := -1, map[string]any(nil)
	for i, obj := range fileObjects(data) {
		key, err := keyOfObject(obj)
		if obj == nil || err != nil || key.Group != l.k.Group || key.Kind != l.k.Kind || !strings.Contains(l.k.Name, key.Name) {
			continue
		}
		if key.Name == l.k.Name {
			return i, obj, true
		}
		if best < 0 || len(key.Name) > len(nameOf(bestObj)) {
			best, bestObj = i, obj
		}
	}
	return best, bestObj, best >= 0
}

// fileObjects is each document of file read as an object (nil for one that is not), numbered as
// Edit numbers them.
func fileObjects(file []byte) []map[string]any {
	n := len(spans(file))
	out := make([]map[string]any, n)
	for i := range n {
		docs, err := sanitize.Documents(Document(file, i))
		if err != nil || len(docs) != 1 {
			continue
		}
		if obj, err := sanitize.ObjectOf(docs[0]); err == nil {
			out[i] = obj
		}
	}
	return out
}

func nameOf(obj map[string]any) string {
	meta, _ := obj["metadata"].(map[string]any)
	name, _ := meta["name"].(string)
	return name
}

// kindFile is the overlay's file name for a new patch of k: podinfo-deployment-patch.yaml.
func kindFile(name, kind, what string) string {
	return name + "-" + strings.ToLower(kind) + "-" + what + ".yaml"
}

// overlayPath is the repository path of a file of the overlay's folder.
func (o *Overlay) overlayPath(name string) string {
	return strings.TrimPrefix(path.Join(o.Dir, name), "/")
}

// editList is Edit for a file whose one document is a list (a JSON 6902 patch), which Edit
// refuses: the list is edited as the value of a key, each of its lines indented under it, and
// taken out again. Every byte Edit keeps comes back as it was.
func editList(file []byte, doc int, ops []Op) ([]byte, error) {
	if doc != 0 || len(spans(file)) != 1 {
		return nil, errors.New("a list document is edited only as the one document of its file")
	}
	const key = "ops:\n"
	lines := strings.SplitAfter(string(file), "\n")
	var wrapped strings.Builder
	wrapped.WriteString(key)
	for _, line := range lines {
		if strings.TrimSpace(line) != "" {
			wrapped.WriteString("  ")
		}
		wrapped.WriteString(line)
	}
	under := make([]Op, len(ops))
	for i, op := range ops {
		under[i] = Op{Path: append(Path{{Field: "ops"}}, op.Path...), Value: op.Value, Remove: op.Remove}
	}
	edited, err := Edit([]byte(wrapped.String()), 0, under)
	if err != nil {
		return nil, err
	}
	var out strings.Builder
	for _, line := range strings.SplitAfter(strings.TrimPrefix(string(edited), key), "\n") {
		out.WriteString(strings.TrimPrefix(line, "  "))
	}
	return []byte(out.String()), nil
}
