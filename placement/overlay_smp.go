package placement

import "fmt"

// patch places ops in the overlay's strategic-merge patch of k: the patch file that patches k
// alone (no target, or one naming k, and one document of k), else a new file beside the
// kustomization, registered in its patches:. A removed field is written as null, a removed
// item of a named list as the item with $patch: delete: the strategic merge removes them.
func (l *landing) patch(ops []Op) error {
	smp := make([]Op, len(ops))
	for i, op := range ops {
		smp[i] = mergePatchOp(op)
	}
	if file, doc, ok := l.ownPatchFile(); ok {
		return l.editDoc(file, doc, smp, "the patch of "+l.k.String())
	}
	obj := l.patchHead()
	var err error
	for _, op := range smp {
		if obj, err = applyPatchOp(obj, op); err != nil {
			return fmt.Errorf("a new patch of %s: %w", l.k, err)
		}
	}
	return l.newPatchFile("patch", obj)
}

// patchHead is the start of a new strategic-merge patch of k: its apiVersion, kind and name.
func (l *landing) patchHead() map[string]any {
	return map[string]any{"apiVersion": l.apiVersion(), "kind": l.k.Kind, "metadata": map[string]any{"name": l.name}}
}

// newPatchFile writes obj, a strategic-merge patch of k, to a new file of the overlay's folder
// named for k and what ({name}-{kind}-{what}.yaml), and registers it in the kustomization's
// patches:.
func (l *landing) newPatchFile(what string, obj map[string]any) error {
	name := kindFile(l.name, l.k.Kind, what)
	file := l.o.overlayPath(name)
	if !l.own(l.o.kpath) {
		return fmt.Errorf("a new patch of %s, %s, needs the overlay's kustomization %s, which the destination does not own: %w", l.k, file, l.o.kpath, ErrNotExpressible)
	}
	if _, taken := l.read(file); taken {
		return fmt.Errorf("a new patch of %s: %s exists already and is not its patch: %w", l.k, file, ErrNotExpressible)
	}
	text, err := Render(obj)
	if err != nil {
		return err
	}
	l.write(file, text)
	return l.addListItem("patches", "path", map[string]any{"path": name}, "the patches: entry of "+name)
}

// applyPatchOp applies op to a new patch's object.
func applyPatchOp(obj map[string]any, op Op) (map[string]any, error) {
	out, err := applyOp(obj, op)
	if err != nil {
		return nil, err
	}
	m, _ := out.(map[string]any)
	return m, nil
}

// mergePatchOp is op as a strategic-merge patch says it: a removal as null, or as the named
// item with $patch: delete.
func mergePatchOp(op Op) Op {
	if !op.Remove {
		return op
	}
	last := op.Path[len(op.Path)-1]
	if last.Match != "" {
		return Op{Path: op.Path, Value: map[string]any{last.Match: last.Value, "$patch": "delete"}}
	}
	return Op{Path: op.Path, Value: nil}
}

// ownPatchFile is the overlay's patch file of k alone: a patches: entry by path whose target,
// if any, names k, and whose one document is a strategic-merge patch of k.
func (l *landing) ownPatchFile() (string, int, bool) {
	for _, pt := range l.patches() {
		if pt.file == "" || !l.own(pt.file) {
			continue
		}
		if pt.target != nil && pt.target.Name == "" {
			continue // a patch of many objects: a field of one goes elsewhere
		}
		objs := fileObjects(pt.text)
		if len(objs) == 1 && objs[0] != nil && l.selects(pt.target, objs[0]) {
			if _, isSMP := objs[0]["kind"]; isSMP {
				return pt.file, 0, true
			}
		}
	}
	return "", 0, false
}

// apiVersion is k's apiVersion as the render has it.
func (l *landing) apiVersion() string {
	v, _ := l.o.Objects[l.k]["apiVersion"].(string)
	return v
}
