package placement

import (
	"bytes"
	"fmt"
	"path"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// kustomizeGroup is the API group of kustomize's own files (Kustomization, Component), which
// configure a build and are not objects of the cluster.
const kustomizeGroup = "kustomize.config.k8s.io"

// identity is the part of a document that names its object. Its fields take any value so that
// a document whose fields are not strings decodes, and is then found not to be an object.
type identity struct {
	APIVersion any `yaml:"apiVersion"`
	Kind       any `yaml:"kind"`
	Metadata   struct {
		Name      any `yaml:"name"`
		Namespace any `yaml:"namespace"`
	} `yaml:"metadata"`
}

// readFile reads what the index keeps of the file at p: its object documents, the documents
// that meant to be objects and do not parse, and the kustomization or Helm chart it is.
func readFile(p string, data []byte) *indexedFile {
	f := &indexedFile{chart: path.Base(p) == "Chart.yaml"}
	if len(data) > MaxIndexedBytes {
		f.problems = []Problem{{Location{p, -1}, ErrTooLarge}}
		return f
	}
	var broken []Problem
	meant := false // a document of the file shows it holds Kubernetes documents
	all := spans(data)
	f.count = len(all)
	for i, s := range all {
		text := data[s.start:s.end]
		var n yaml.Node
		if err := yaml.Unmarshal(text, &n); err != nil {
			meant = meant || looksLikeObject(text)
			broken = append(broken, Problem{Location{p, i}, syntaxError(err, data[:s.start])})
			continue
		}
		d, typed := readDocument(&n)
		meant = meant || typed
		if d != nil {
			d.loc, d.dir = Location{p, i}, dirOf(p)
			f.docs = append(f.docs, d)
		}
	}
	if isKustomizationFile(p) {
		meant = true
		f.kust = readKustomization(p, data)
	}
	if meant {
		f.problems = append(f.problems, broken...)
	}
	return f
}

// readDocument returns the object document n declares, or nil; typed says whether n has a
// string apiVersion and kind, which shows its file holds Kubernetes documents.
func readDocument(n *yaml.Node) (d *indexedDoc, typed bool) {
	if n.Kind != yaml.DocumentNode || len(n.Content) == 0 || n.Content[0].Kind != yaml.MappingNode {
		return nil, false
	}
	var id identity
	if err := n.Decode(&id); err != nil {
		return nil, false
	}
	apiVersion, _ := id.APIVersion.(string)
	kind, _ := id.Kind.(string)
	name, _ := id.Metadata.Name.(string)
	namespace, _ := id.Metadata.Namespace.(string)
	typed = apiVersion != "" && kind != ""
	group := groupOf(apiVersion)
	if !typed || name == "" || group == kustomizeGroup {
		return nil, typed
	}
	return &indexedDoc{key: Key{Group: group, Kind: kind, Namespace: namespace, Name: name}, anchors: usesAnchors(n)}, true
}

// groupOf is the API group of apiVersion: "apps" for apps/v1, "" for v1.
func groupOf(apiVersion string) string {
	if i := strings.LastIndexByte(apiVersion, '/'); i >= 0 {
		return apiVersion[:i]
	}
	return ""
}

// usesAnchors reports whether n or a node below it has an anchor, is an alias or is a merge key.
func usesAnchors(n *yaml.Node) bool {
	if n.Anchor != "" || n.Kind == yaml.AliasNode || n.Tag == "!!merge" {
		return true
	}
	for _, c := range n.Content {
		if usesAnchors(c) {
			return true
		}
	}
	return false
}

// parseError is a document's YAML syntax error, with its line counted in the file.
type parseError struct {
	line int // 0 when the parser said none
	msg  string
	err  error
}

func (e *parseError) Error() string {
	if e.line == 0 {
		return "does not parse as YAML: " + e.msg
	}
	return fmt.Sprintf("does not parse as YAML: line %d: %s", e.line, e.msg)
}

func (e *parseError) Unwrap() error { return e.err }

// syntaxError turns the parser's error for a document, whose lines it counts from the
// document's first, into one that counts them in the file; before is the file up to the
// document.
func syntaxError(err error, before []byte) error {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	var line int
	if rest, ok := strings.CutPrefix(msg, "line "); ok {
		if n, tail, ok := strings.Cut(rest, ": "); ok {
			if v, convErr := strconv.Atoi(n); convErr == nil {
				line, msg = v+bytes.Count(before, []byte("\n")), tail
			}
		}
	}
	return &parseError{line: line, msg: msg, err: err}
}

// looksLikeObject reports whether a document's text has, flush left, the apiVersion: and kind:
// lines of a Kubernetes document, which is how a document that does not parse shows what it
// meant to be.
func looksLikeObject(text []byte) bool {
	var apiVersion, kind bool
	for line := range bytes.Lines(text) {
		apiVersion = apiVersion || bytes.HasPrefix(line, []byte("apiVersion:"))
		kind = kind || bytes.HasPrefix(line, []byte("kind:"))
	}
	return apiVersion && kind
}
