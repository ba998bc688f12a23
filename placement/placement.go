// Package placement keeps an adopted folder (DESIGN.md §11): a folder in the team's own layout,
// where objects live in files named as the team names them, several documents to a file, with
// comments and kustomizations. It indexes the folder's documents by the object each holds
// (Index), edits one document in place so that every line it does not change comes back byte
// for byte (Edit), removes and adds documents and the entries of a kustomization's resources,
// and computes what a person changed in a live object against its file (Changes). It is below
// the Git worker and knows no Git and no cluster: it is given files and objects.
package placement

import (
	"strconv"
	"strings"
)

// Key names an object: its API group (no version: a version bump never moves it), kind,
// namespace ("" for cluster-scoped objects) and name.
type Key struct {
	Group, Kind, Namespace, Name string
}

// String is how messages name the key: kind.group namespace/name.
func (k Key) String() string {
	kind := k.Kind
	if k.Group != "" {
		kind += "." + k.Group
	}
	if k.Namespace == "" {
		return kind + " " + k.Name
	}
	return kind + " " + k.Namespace + "/" + k.Name
}

// Step is one step of a Path into an object: a field of a mapping, or the item of a list whose
// field Match has the value Value (containers by name, ports by containerPort), or, for a list
// whose items have no such key, the item at Index.
type Step struct {
	Field string // a mapping's key; "" when the step is into a list
	Match string // the key field of a named list's item ("name", "containerPort", …)
	Value any    // the value Match has in the item (string, int64, …)
	Index int    // the item's index, when Field and Match are both ""
}

// Path is where a value sits in an object, from the document's root.
type Path []Step

// String writes the path as messages and tests show it: spec.template.spec.containers[name=web].image.
func (p Path) String() string {
	var b strings.Builder
	for i, s := range p {
		switch {
		case s.Field != "":
			if i > 0 {
				b.WriteByte('.')
			}
			b.WriteString(s.Field)
		case s.Match != "":
			b.WriteString("[" + s.Match + "=" + valueText(s.Value) + "]")
		default:
			b.WriteString("[" + strconv.Itoa(s.Index) + "]")
		}
	}
	return b.String()
}

func valueText(v any) string {
	switch v := v.(type) {
	case string:
		return v
	case int64:
		return strconv.FormatInt(v, 10)
	case bool:
		return strconv.FormatBool(v)
	case float64:
		return strconv.FormatFloat(v, 'g', -1, 64)
	}
	return ""
}

// Op is one change to a document: set the value at Path (creating the mappings on the way and
// appending a named list's item that is missing), or remove what is at Path when Remove is set.
// Value holds the types sanitize.ObjectOf reads (map[string]any, []any, string, int64, float64,
// bool, nil).
type Op struct {
	Path   Path
	Value  any
	Remove bool
}
