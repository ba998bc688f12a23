package placement

import (
	"fmt"
	"strings"
)

// isImagePath reports whether p is the image of a container, an init container or an ephemeral
// container: what kustomize's images: sets.
func isImagePath(p Path) bool {
	n := len(p)
	if n < 3 || p[n-1].Field != "image" || p[n-2].Match == "" {
		return false
	}
	switch p[n-3].Field {
	case "containers", "initContainers", "ephemeralContainers":
		return true
	}
	return false
}

// isReplicasPath reports whether p is spec.replicas, which kustomize's replicas: sets.
func isReplicasPath(p Path) bool {
	return len(p) == 2 && p[0].Field == "spec" && p[1].Field == "replicas"
}

// imageRef is an image reference cut as kustomize's images: entries name its parts.
type imageRef struct{ name, tag, digest string }

func parseImage(s string) imageRef {
	var r imageRef
	if at := strings.Index(s, "@"); at >= 0 {
		s, r.digest = s[:at], s[at+1:]
	}
	if colon := strings.LastIndex(s, ":"); colon > strings.LastIndex(s, "/") {
		s, r.tag = s[:colon], s[colon+1:]
	}
	r.name = s
	return r
}

// imageEntry is the overlay's images: entry for the image at p as the render has it now (the
// entry whose newName, or else name, is that image's name), and that image; -1 when none.
func (l *landing) imageEntry(p Path) (int, imageRef) {
	cur, _ := ValueAt(l.o.Objects[l.k], p)
	curImage, _ := cur.(string)
	was := parseImage(curImage)
	for i, e := range l.o.k.Images {
		if e.NewName == was.name || e.NewName == "" && e.Name == was.name {
			return i, was
		}
	}
	return -1, was
}

// image places a container's new image in the overlay's images: entry for it, or in a new entry.
func (l *landing) image(p Path, value string) error {
	i, was := l.imageEntry(p)
	now := parseImage(value)
	if i >= 0 {
		e := l.o.k.Images[i]
		return l.editKustomization(imageOps(e.Name, e.NewName, e.NewTag, e.Digest, now), "the images: entry of "+e.Name)
	}
	entry := map[string]any{"name": was.name}
	if now.name != was.name {
		entry["newName"] = now.name
	}
	if now.tag != "" {
		entry["newTag"] = now.tag
	}
	if now.digest != "" {
		entry["digest"] = now.digest
	}
	return l.addListItem("images", "name", entry, "a new images: entry")
}

// imageOps sets the images: entry name (with newName, newTag and digest as the file has them) to
// render now.
func imageOps(name, newName, newTag, digest string, now imageRef) []Op {
	at := func(field string) Path { return Path{{Field: "images"}, {Match: "name", Value: name}, {Field: field}} }
	var ops []Op
	set := func(field, had, want string) {
		switch want {
		case had:
		case "":
			ops = append(ops, Op{Path: at(field), Remove: true})
		default:
			ops = append(ops, Op{Path: at(field), Value: want})
		}
	}
	wantName := now.name
	if wantName == name && newName == "" {
		wantName = ""
	}
	set("newName", newName, wantName)
	set("newTag", newTag, now.tag)
	set("digest", digest, now.digest)
	return ops
}

// replicasEntry is the name of the overlay's replicas: entry for the object (by its rendered
// name or its document's); "" when none.
func (l *landing) replicasEntry() string {
	for _, e := range l.o.k.Replicas {
		if e.Name == l.k.Name || e.Name == l.name {
			return e.Name
		}
	}
	return ""
}

// replicas places a new replica count in the overlay's replicas: entry for the object, or in a
// new one.
func (l *landing) replicas(n int64) error {
	if name := l.replicasEntry(); name != "" {
		return l.editKustomization([]Op{{Path: Path{{Field: "replicas"}, {Match: "name", Value: name}, {Field: "count"}}, Value: n}},
			"the replicas: entry of "+name)
	}
	return l.addListItem("replicas", "name", map[string]any{"name": l.name, "count": n}, "a new replicas: entry")
}

// addListItem appends item to the list field of the overlay's kustomization (named by key),
// starting the list when the kustomization has none.
func (l *landing) addListItem(field, key string, item map[string]any, what string) error {
	data, _ := l.read(l.o.kpath)
	root := fileObjects(data)
	if len(root) == 0 || root[0] == nil {
		return fmt.Errorf("%s: the kustomization does not read as a mapping", l.o.kpath)
	}
	if _, ok := root[0][field]; !ok {
		return l.editKustomization([]Op{{Path: Path{{Field: field}}, Value: []any{item}}}, what)
	}
	return l.editKustomization([]Op{{Path: Path{{Field: field}, {Match: key, Value: item[key]}}, Value: item}}, what)
}
