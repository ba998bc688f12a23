package placement

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/kustomize/api/types"

	"github.com/configbutler/gitops-reverser/sanitize"
)

// overlayPatch is one patch of the overlay's kustomization: a file, or inline text.
type overlayPatch struct {
	file   string // repository path; "" when inline
	text   []byte
	target *types.Selector
}

// patches lists the overlay kustomization's patches: patches:, and the deprecated
// patchesStrategicMerge and patchesJson6902 kustomize still reads.
func (l *landing) patches() []overlayPatch {
	k := l.o.k
	var out []overlayPatch
	add := func(file, inline string, target *types.Selector) {
		p := overlayPatch{target: target}
		if file != "" {
			p.file = l.o.overlayPath(file)
			p.text, _ = l.read(p.file)
		} else {
			p.text = []byte(inline)
		}
		out = append(out, p)
	}
	for _, p := range k.Patches {
		add(p.Path, p.Patch, p.Target)
	}
	for _, p := range k.PatchesJson6902 { //nolint:staticcheck // deprecated, still read
		add(p.Path, p.Patch, p.Target)
	}
	for _, p := range k.PatchesStrategicMerge { //nolint:staticcheck // deprecated, still read
		if s := string(p); strings.Contains(s, "\n") {
			add("", s, nil)
		} else {
			add(s, "", nil)
		}
	}
	return out
}

// selects reports whether the patch's target, or else its document (kind and name), is k.
func (l *landing) selects(t *types.Selector, doc map[string]any) bool {
	if t == nil {
		if doc == nil {
			return false
		}
		key, err := keyOfObject(doc)
		return err == nil && key.Group == l.k.Group && key.Kind == l.k.Kind && (key.Name == l.k.Name || key.Name == l.name)
	}
	if t.Kind != "" && t.Kind != l.k.Kind || t.Group != "" && t.Group != l.k.Group {
		return false
	}
	if t.Name != "" && !fullMatch(t.Name, l.k.Name) && !fullMatch(t.Name, l.name) {
		return false
	}
	if t.Namespace != "" && !fullMatch(t.Namespace, l.k.Namespace) {
		return false
	}
	obj := l.o.Objects[l.k]
	return selectorHolds(t.LabelSelector, obj, "labels") && selectorHolds(t.AnnotationSelector, obj, "annotations")
}

func fullMatch(pattern, s string) bool {
	re, err := regexp.Compile("^(?:" + pattern + ")$")
	return err == nil && re.MatchString(s)
}

func selectorHolds(selector string, obj map[string]any, field string) bool {
	if selector == "" {
		return true
	}
	sel, err := labels.Parse(selector)
	if err != nil {
		return false
	}
	meta, _ := obj["metadata"].(map[string]any)
	m, _ := meta[field].(map[string]any)
	set := labels.Set{}
	for k, v := range m {
		set[k], _ = v.(string)
	}
	return sel.Matches(set)
}

// patchSetting finds the overlay patch of k that sets p: the document of a strategic-merge patch
// file, or the op of a JSON 6902 patch file, with the Path to edit there. An inline patch that
// sets p is an error: its text sits in the kustomization, and is not edited.
func (l *landing) patchSetting(p Path) (file string, doc int, at Path, found bool, err error) {
	for _, pt := range l.patches() {
		docs, rerr := sanitize.Documents(pt.text)
		if rerr != nil || len(docs) == 0 {
			continue
		}
		if len(docs[0].Content) == 1 && docs[0].Content[0].Kind == yaml.SequenceNode {
			i, ok := l.jsonOpSetting(pt, p)
			if !ok {
				continue
			}
			if pt.file == "" {
				return "", 0, nil, true, l.inline(p)
			}
			return pt.file, 0, Path{{Index: i}, {Field: "value"}}, true, nil
		}
		for i, obj := range fileObjects(pt.text) {
			if obj == nil || !l.selects(pt.target, obj) {
				continue
			}
			if _, ok := ValueAt(obj, p); ok {
				if pt.file == "" {
					return "", 0, nil, true, l.inline(p)
				}
				return pt.file, i, p, true, nil
			}
		}
	}
	return "", 0, nil, false, nil
}

func (l *landing) inline(p Path) error {
	return fmt.Errorf("%s is set by an inline patch in %s, which is not edited (move the patch to a file): %w", p, l.o.kpath, ErrNotExpressible)
}

// jsonOpSetting is the index of the op of a JSON 6902 patch of k that adds or replaces p.
func (l *landing) jsonOpSetting(pt overlayPatch, p Path) (int, bool) {
	if !l.selects(pt.target, nil) {
		return 0, false
	}
	pointer, ok := jsonPointer(l.o.Objects[l.k], p)
	if !ok {
		return 0, false
	}
	var ops []map[string]any
	if err := yaml.Unmarshal(pt.text, &ops); err != nil {
		return 0, false
	}
	for i, op := range ops {
		if (op["op"] == "replace" || op["op"] == "add") && op["path"] == pointer {
			return i, true
		}
	}
	return 0, false
}

// jsonPointer is p as a JSON pointer into obj: a named list's item by its index there.
func jsonPointer(obj map[string]any, p Path) (string, bool) {
	var b strings.Builder
	var cur any = obj
	for i, s := range p {
		switch {
		case s.Field != "":
			b.WriteString("/" + strings.ReplaceAll(strings.ReplaceAll(s.Field, "~", "~0"), "/", "~1"))
		case s.Match != "":
			list, _ := cur.([]any)
			j := itemIndex(list, s)
			if j < 0 {
				return "", false
			}
			b.WriteString("/" + strconv.Itoa(j))
		default:
			b.WriteString("/" + strconv.Itoa(s.Index))
		}
		var ok bool
		if cur, ok = ValueAt(obj, p[:i+1]); !ok && i < len(p)-1 {
			return "", false
		}
	}
	return b.String(), true
}
