package placement

import (
	"fmt"
	"path"
	"slices"
	"strings"

	"sigs.k8s.io/kustomize/api/types"
)

// generated places ops, changes of a generated ConfigMap's or Secret's data, in its generator:
// a literal (key=value) edited, added or removed, or a file source (key=path, or a path whose
// base name is the key) written anew. A Secret's generator is never written (its values would
// reach Git in plain text).
func (l *landing) generated(o Origin, ops []Op) error {
	if o.Generator != "ConfigMapGenerator" {
		return fmt.Errorf("%s is made by a %s in %s, which is never written (its values are secret): %w", l.k, o.Generator, o.ConfiguredIn, ErrNotExpressible)
	}
	data, _ := l.read(o.ConfiguredIn)
	var k types.Kustomization
	if err := k.Unmarshal(data); err != nil {
		return fmt.Errorf("%s: %w", o.ConfiguredIn, err)
	}
	i := generatorOf(k.ConfigMapGenerator, l.k.Name)
	if i < 0 {
		return fmt.Errorf("%s: no configMapGenerator of %s: %w", o.ConfiguredIn, l.k.Name, ErrNotExpressible)
	}
	g := k.ConfigMapGenerator[i]
	if !l.own(o.ConfiguredIn) {
		return l.mergeGenerator(o, g.Name, ops)
	}
	literals := slices.Clone(g.LiteralSources)
	for _, op := range ops {
		if len(op.Path) != 2 || op.Path[0].Field != "data" {
			return fmt.Errorf("%s of a generated ConfigMap: only its data is written: %w", op.Path, ErrNotExpressible)
		}
		key := op.Path[1].Field
		value, _ := op.Value.(string)
		if file, ok := fileSource(g.FileSources, key); ok {
			p := path.Join(path.Dir(o.ConfiguredIn), file)
			if op.Remove || !l.own(p) {
				return fmt.Errorf("data.%s comes from the file %s, which is not removed or not the destination's: %w", key, p, ErrNotExpressible)
			}
			l.write(p, []byte(value))
			continue
		}
		literals = setLiteral(literals, key, value, op.Remove)
	}
	if slices.Equal(literals, g.LiteralSources) {
		return nil
	}
	list := make([]any, len(literals))
	for j, s := range literals {
		list[j] = s
	}
	at := Path{{Field: "configMapGenerator"}, {Match: "name", Value: g.Name}, {Field: "literals"}}
	return l.editDoc(o.ConfiguredIn, 0, []Op{{Path: at, Value: list}}, "the configMapGenerator "+g.Name)
}

// generatorOf is the index of the generator whose ConfigMap is named name (after a prefix, a
// suffix and the hash kustomize appends): the longest generator name within it.
func generatorOf(gens []types.ConfigMapArgs, name string) int {
	best := -1
	for i, g := range gens {
		if strings.Contains(name, g.Name) && (best < 0 || len(g.Name) > len(gens[best].Name)) {
			best = i
		}
	}
	return best
}

// fileSource is the file a generator reads key from: key=path, or a path whose base is key.
func fileSource(sources []string, key string) (string, bool) {
	for _, s := range sources {
		if k, p, ok := strings.Cut(s, "="); ok {
			if k == key {
				return p, true
			}
		} else if path.Base(s) == key {
			return s, true
		}
	}
	return "", false
}

// setLiteral sets key to value in literals (key=value items), appends it when missing, or removes it.
func setLiteral(literals []string, key, value string, remove bool) []string {
	for i, s := range literals {
		if k, _, _ := strings.Cut(s, "="); k == key {
			if remove {
				return slices.Delete(literals, i, i+1)
			}
			literals[i] = key + "=" + value
			return literals
		}
	}
	if remove {
		return literals
	}
	return append(literals, key+"="+value)
}

// mergeGenerator places changed data of a ConfigMap a base generates as a person would in the
// overlay: its configMapGenerator of the same name with behavior: merge, its literals set or
// added. A removed key cannot be merged away: not expressible.
func (l *landing) mergeGenerator(o Origin, name string, ops []Op) error {
	var literals []string
	at := -1
	for i, g := range l.o.k.ConfigMapGenerator {
		if g.Name == name && g.Behavior == "merge" {
			literals, at = slices.Clone(g.LiteralSources), i
		}
	}
	for _, op := range ops {
		if op.Remove || len(op.Path) != 2 || op.Path[0].Field != "data" {
			return fmt.Errorf("%s of %s, generated in %s: an overlay's merge can only set data: %w", op.Path, l.k, o.ConfiguredIn, ErrNotExpressible)
		}
		value, _ := op.Value.(string)
		literals = setLiteral(literals, op.Path[1].Field, value, false)
	}
	list := make([]any, len(literals))
	for j, s := range literals {
		list[j] = s
	}
	if at < 0 {
		return l.addListItem("configMapGenerator", "name", map[string]any{"name": name, "behavior": "merge", "literals": list},
			"a configMapGenerator of "+name+" with behavior: merge")
	}
	return l.editKustomization([]Op{{Path: Path{{Field: "configMapGenerator"}, {Match: "name", Value: name}, {Field: "literals"}}, Value: list}},
		"the configMapGenerator of "+name)
}
