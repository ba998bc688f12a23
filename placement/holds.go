package placement

import (
	"fmt"
	"path"

	"github.com/configbutler/gitops-reverser/sanitize"
)

// RenderedHolds checks that objects, the render of the kustomization in dir (Build), give object
// k what ops set: nil when they do, or when they do not hold k at all (its file is not one of
// the kustomization's resources: the edit cannot change what it builds). An error says what the
// render gives instead, which is where the kustomization decides the field (images:, replicas:,
// a patch).
func RenderedHolds(objects map[Key]map[string]any, dir string, k Key, ops []Op) error {
	obj, ok := objects[k]
	if !ok {
		if obj, ok = renderedByName(objects, k); !ok {
			return nil
		}
	}
	where := path.Join(dir, "kustomization.yaml")
	for _, op := range ops {
		got, found := ValueAt(obj, op.Path)
		switch {
		case op.Remove && found:
			return fmt.Errorf("the kustomization of %s still renders %s = %v: something there sets it", dir, op.Path, got)
		case !op.Remove && !found:
			return fmt.Errorf("the kustomization of %s renders no %s (something there removes it), want %v", dir, op.Path, op.Value)
		case !op.Remove && !same(op.Path, got, op.Value):
			return fmt.Errorf("%s renders %s = %v, not %v: it decides that field (an images:, replicas: or patch there), so the file's value would not take effect", where, op.Path, got, op.Value)
		}
	}
	return nil
}

// renderedByName finds the one rendered object with k's group, kind and name, whatever its
// namespace (a kustomization's namespace: gives the file's object the live one).
func renderedByName(objects map[Key]map[string]any, k Key) (map[string]any, bool) {
	var found map[string]any
	for rk, obj := range objects {
		if rk.Group == k.Group && rk.Kind == k.Kind && rk.Name == k.Name {
			if found != nil {
				return nil, false
			}
			found = obj
		}
	}
	return found, found != nil
}

// passThroughFields are the fields of a kustomization that leave its resources' values as their
// files write them: which files, and the namespace (set on objects that have none).
var passThroughFields = map[string]bool{"apiVersion": true, "kind": true, "metadata": true, "resources": true, "namespace": true}

// PassesThrough reports whether the kustomization renders the values ops set as its resources'
// files write them, without a render: it holds nothing but resources and a namespace (the
// common base of a Flux or Argo CD folder), and no op sets a namespace. Anything else (images:,
// replicas:, patches, labels, name prefixes, generators, components) may decide a value, and the
// kustomization is rendered to know.
func PassesThrough(kustomization []byte, ops []Op) bool {
	docs, err := sanitize.Documents(kustomization)
	if err != nil || len(docs) != 1 {
		return false
	}
	k, err := sanitize.ObjectOf(docs[0])
	if err != nil {
		return false
	}
	for field := range k {
		if !passThroughFields[field] {
			return false
		}
	}
	for _, op := range ops {
		for _, s := range op.Path {
			if s.Field == "namespace" {
				return false
			}
		}
	}
	return true
}
