package writeback

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/configbutler/gitops-reverser/layout"
	"github.com/configbutler/gitops-reverser/sanitize"
)

// MaxDocumentBytes caps a file write-back reads: larger files are refused, never parsed.
const MaxDocumentBytes = 1 << 20

// MaxDocumentDepth is how deeply the collections of a file may nest: the top-level mapping is
// level 1, a mapping or sequence inside it level 2, and so on. A Deployment reaches about 12
// levels and the schema of a CRD embedding a pod template about 30; deeper files are refused.
const MaxDocumentDepth = 100

// Refusal reasons (stable strings: they appear in SyncRun status, Events and the metric label
// proposals_refused_total{reason}).
const (
	ReasonTooLarge      = "TooLarge"
	ReasonMultiDocument = "MultipleDocuments"
	ReasonUnparseable   = "Unparseable"
	ReasonAlias         = "AliasOrAnchor" // YAML anchors/aliases (and merge keys) are refused outright: no alias bomb can expand
	ReasonTooDeep       = "TooDeep"
	ReasonNotAnObject   = "NotAnObject"       // missing apiVersion/kind/metadata.name, or not a mapping
	ReasonPathMismatch  = "PathMismatch"      // path says namespace a / name x / resource r, object says otherwise
	ReasonOutsideFolder = "OutsideBaseFolder" // the path is not below the destination's base folder
	ReasonSecret        = "Secret"            // Secrets are never proposed nor applied from Git
	ReasonNotAFile      = "NotAFile"          // a symbolic link or a submodule
)

// Refused is the error for an input write-back will not act on. Reason is one of the Reason
// constants; Message says what exactly is wrong, for people (it quotes no file content beyond a
// line number or a path).
type Refused struct {
	Reason, Message string
}

// Error returns "Reason: Message".
func (r *Refused) Error() string { return r.Reason + ": " + r.Message }

// maxRefusalMessage caps a refusal's message: it goes into a status and an Event, and some
// parse errors list every problem of a file.
const maxRefusalMessage = 1024

// refusedf builds a *Refused with a formatted message on one line (a multi-line error, such as
// yaml.v3's list of unmarshal errors, is joined with spaces), cut to maxRefusalMessage bytes.
func refusedf(reason, format string, args ...any) *Refused {
	lines := strings.Split(fmt.Sprintf(format, args...), "\n")
	for i, l := range lines {
		lines[i] = strings.TrimSpace(l)
	}
	msg := strings.Join(lines, " ")
	if len(msg) > maxRefusalMessage {
		cut := maxRefusalMessage - len("...")
		for cut > 0 && !utf8.RuneStart(msg[cut]) {
			cut--
		}
		msg = msg[:cut] + "..."
	}
	return &Refused{Reason: reason, Message: msg}
}

// Document is one object read from a file.
type Document struct {
	// Object is decoded exactly like the dynamic client decodes JSON (integers int64, other
	// numbers float64, maps map[string]any, lists []any), so it compares equal to a live object.
	Object *unstructured.Unstructured
}

// ParseDocument reads one file's bytes into an object. It refuses (returns a *Refused, whose
// Reason says why):
//
//   - ReasonTooLarge: more than MaxDocumentBytes, before parsing anything;
//   - ReasonUnparseable: invalid YAML, a mapping key that is not a string, a duplicate key, or a
//     value JSON cannot hold (NaN, infinity);
//   - ReasonAlias: any anchor (&a), alias (*a) or merge key (<<). The file is parsed into a node
//     tree, where aliases stay unexpanded, and refused before anything is decoded, so a
//     "billion laughs" file costs no more than its size;
//   - ReasonTooDeep: collections nested deeper than MaxDocumentDepth;
//   - ReasonNotAnObject: an empty file, or a first document that is not a mapping with non-empty
//     string apiVersion (a valid group/version), kind and metadata.name (metadata.namespace,
//     when present, must be a string too);
//   - ReasonMultiDocument: a second document that is not empty. A leading "---" before the
//     object, and empty documents after it (a trailing "---"), are fine.
func ParseDocument(data []byte) (*Document, error) {
	if len(data) > MaxDocumentBytes {
		return nil, refusedf(ReasonTooLarge, "%d bytes, more than the %d write-back reads", len(data), MaxDocumentBytes)
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, refusedf(ReasonNotAnObject, "the file holds no YAML document")
		}
		return nil, yamlRefusal(err)
	}
	if err := checkNode(&doc, 0); err != nil {
		return nil, err
	}
	for {
		var next yaml.Node
		err := dec.Decode(&next)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, yamlRefusal(err)
		}
		if !isEmptyDocument(&next) {
			return nil, refusedf(ReasonMultiDocument, "a second YAML document starts at line %d: a file holds one object", next.Line)
		}
	}

	if len(doc.Content) != 1 || doc.Content[0].Kind != yaml.MappingNode {
		what := "empty"
		if len(doc.Content) > 0 {
			what = "a " + doc.Content[0].ShortTag()
		}
		return nil, refusedf(ReasonNotAnObject, "the document is %s, not a mapping", what)
	}
	// The same Go types the dynamic client decodes live objects into, every value exact.
	m, err := sanitize.ObjectOf(&doc)
	if err != nil {
		return nil, refusedf(ReasonUnparseable, "%v", err)
	}
	if err := checkObjectFields(m); err != nil {
		return nil, err
	}
	return &Document{Object: &unstructured.Unstructured{Object: m}}, nil
}

// yamlRefusal classifies a parse error of yaml.v3: its own nesting limit (10000) is TooDeep,
// anything else Unparseable.
func yamlRefusal(err error) *Refused {
	if strings.Contains(err.Error(), "exceeded max depth") {
		return refusedf(ReasonTooDeep, "nested deeper than %d levels: %v", MaxDocumentDepth, err)
	}
	return refusedf(ReasonUnparseable, "parse YAML: %v", err)
}

// checkNode refuses anchors, aliases and merge keys, keys that are not strings, and nesting
// deeper than MaxDocumentDepth, in n and below. depth is the number of collections around n.
// (A timestamp scalar needs nothing here: sanitize.ObjectOf keeps its text as written.)
func checkNode(n *yaml.Node, depth int) *Refused {
	if n.Kind == yaml.AliasNode {
		return refusedf(ReasonAlias, "alias *%s at line %d: YAML anchors and aliases are not accepted", n.Value, n.Line)
	}
	if n.Anchor != "" {
		return refusedf(ReasonAlias, "anchor &%s at line %d: YAML anchors and aliases are not accepted", n.Anchor, n.Line)
	}
	switch n.Kind {
	case yaml.MappingNode, yaml.SequenceNode:
		if depth++; depth > MaxDocumentDepth {
			return refusedf(ReasonTooDeep, "line %d is nested %d levels deep, more than %d", n.Line, depth, MaxDocumentDepth)
		}
	}
	if n.Kind == yaml.MappingNode {
		for i := 0; i+1 < len(n.Content); i += 2 {
			if err := checkKey(n.Content[i]); err != nil {
				return err
			}
		}
	}
	for _, c := range n.Content {
		if err := checkNode(c, depth); err != nil {
			return err
		}
	}
	return nil
}

// checkKey accepts a mapping key that is a plain string, as in every Kubernetes object. A plain
// "<<" is YAML's merge key, which copies another mapping in: refused with the aliases it exists
// for ("<<" quoted is an ordinary key).
func checkKey(k *yaml.Node) *Refused {
	switch {
	case k.Kind == yaml.AliasNode || k.Anchor != "":
		return nil // checkNode refuses it with its position
	case k.Kind == yaml.ScalarNode && k.ShortTag() == "!!merge":
		return refusedf(ReasonAlias, "merge key << at line %d: YAML anchors, aliases and merge keys are not accepted (quote it for a key named <<)", k.Line)
	case k.Kind != yaml.ScalarNode || k.ShortTag() != "!!str":
		return refusedf(ReasonUnparseable, "mapping key at line %d is a %s, not a string", k.Line, k.ShortTag())
	}
	return nil
}

// isEmptyDocument reports a document with nothing in it, as after a trailing "---".
func isEmptyDocument(d *yaml.Node) bool {
	if len(d.Content) == 0 {
		return true
	}
	c := d.Content[0]
	return len(d.Content) == 1 && c.Kind == yaml.ScalarNode && c.ShortTag() == "!!null" && c.Value == "" && c.Anchor == ""
}

// checkObjectFields requires what every Kubernetes object has: apiVersion (a valid
// group/version), kind and metadata.name as non-empty strings, and a string metadata.namespace
// if there is one.
func checkObjectFields(m map[string]any) *Refused {
	for _, k := range []string{"apiVersion", "kind"} {
		if s, ok := m[k].(string); !ok || s == "" {
			return refusedf(ReasonNotAnObject, "%s must be a non-empty string", k)
		}
	}
	if _, err := schema.ParseGroupVersion(m["apiVersion"].(string)); err != nil {
		return refusedf(ReasonNotAnObject, "apiVersion: %v", err)
	}
	meta, ok := m["metadata"].(map[string]any)
	if !ok {
		return refusedf(ReasonNotAnObject, "metadata must be a mapping")
	}
	if s, ok := meta["name"].(string); !ok || s == "" {
		return refusedf(ReasonNotAnObject, "metadata.name must be a non-empty string")
	}
	if ns, ok := meta["namespace"]; ok && ns != nil {
		if _, ok := ns.(string); !ok {
			return refusedf(ReasonNotAnObject, "metadata.namespace must be a string")
		}
	}
	return nil
}

// PathTarget maps the path of a file in Git to the object it stands for, without reading the
// file: for a deleted file, whose object is to be deleted. It refuses with ReasonOutsideFolder a
// path not below baseFolder, with ReasonPathMismatch a path below it that layout.Path cannot
// have made (a README, a hand-named file), and with ReasonSecret the file of a core Secret.
//
// When the result is Shortened, the fields a shortened component stands for are empty: read
// the object from the file's last version and verify it with CheckPath.
func PathTarget(baseFolder, path string) (layout.ObjectPath, error) {
	target, err := layout.ParsePath(baseFolder, path)
	if err != nil {
		if errors.Is(err, layout.ErrOutsideBaseFolder) {
			return layout.ObjectPath{}, refusedf(ReasonOutsideFolder, "%v", err)
		}
		return layout.ObjectPath{}, refusedf(ReasonPathMismatch, "%v", err)
	}
	if target.Group == "" && target.Resource == "secrets" {
		return layout.ObjectPath{}, refusedf(ReasonSecret, "%q is the file of a Secret: Secrets are never written back from Git", path)
	}
	return target, nil
}

// CheckPath verifies that obj belongs at path under baseFolder, resource being the resource of
// obj's kind (the caller maps kind to resource through discovery). It refuses with the reasons
// of PathTarget; with ReasonSecret a core Secret (kind Secret or resource secrets in the core
// group); with ReasonNotAnObject an object without a valid apiVersion; and with
// ReasonPathMismatch unless layout.Path of the object's group, resource, namespace and name is
// exactly path. That comparison is the real check: it also verifies a shortened path, whose
// hash only the full names can reproduce.
//
// The result is the path's object: its namespace, group, resource and name (the object's,
// which the path has been verified to name, also where the path is shortened) and Shortened.
func CheckPath(baseFolder, path string, obj *unstructured.Unstructured, resource string) (layout.ObjectPath, error) {
	target, err := PathTarget(baseFolder, path)
	if err != nil {
		return layout.ObjectPath{}, err
	}
	if obj == nil {
		return layout.ObjectPath{}, refusedf(ReasonNotAnObject, "no object")
	}
	gv, err := schema.ParseGroupVersion(obj.GetAPIVersion())
	if err != nil {
		return layout.ObjectPath{}, refusedf(ReasonNotAnObject, "apiVersion: %v", err)
	}
	if gv.Group == "" && (obj.GetKind() == "Secret" || resource == "secrets") {
		return layout.ObjectPath{}, refusedf(ReasonSecret, "%q holds a Secret: Secrets are never written back from Git", path)
	}
	got := layout.ObjectPath{
		Namespace: obj.GetNamespace(),
		Group:     gv.Group,
		Resource:  resource,
		Name:      obj.GetName(),
		Shortened: target.Shortened,
	}
	if want := layout.Path(baseFolder, got.Group, got.Resource, got.Namespace, got.Name); want != path {
		return layout.ObjectPath{}, refusedf(ReasonPathMismatch, "%s%s belongs at %q, not at %q",
			pathDifference(target, got), describeObject(got), want, path)
	}
	return got, nil
}

// pathDifference names the first field in which the parsed path and the object differ, as
// "namespace: path says "a", object says "b"; ", or "" when the path is shortened (its fields
// are partly unknown) or they do not differ field by field.
func pathDifference(path, obj layout.ObjectPath) string {
	if path.Shortened {
		return ""
	}
	for _, f := range []struct{ field, path, obj string }{
		{"namespace", path.Namespace, obj.Namespace},
		{"group", path.Group, obj.Group},
		{"resource", path.Resource, obj.Resource},
		{"name", path.Name, obj.Name},
	} {
		if f.path != f.obj {
			return fmt.Sprintf("%s: path says %q, object says %q; ", f.field, f.path, f.obj)
		}
	}
	return ""
}

// describeObject names an object for a message: "the object (group "apps", resource
// "deployments", namespace "a", name "x")".
func describeObject(o layout.ObjectPath) string {
	return fmt.Sprintf("the object (group %q, resource %q, namespace %q, name %q)", o.Group, o.Resource, o.Namespace, o.Name)
}
