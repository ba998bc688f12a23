package crds_test

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	"github.com/configbutler/gitops-reverser/crds"
)

// TestReferenceDocumentsEveryField keeps docs/crds.md in step with the schemas: every spec field
// of every kind has a row in the kind's section, and so does every status field beyond the
// conditions and observedGeneration that every kind shares (the intro describes those).
func TestReferenceDocumentsEveryField(t *testing.T) {
	doc, err := os.ReadFile("../docs/crds.md")
	if err != nil {
		t.Fatal(err)
	}
	defs, err := crds.CRDs()
	if err != nil {
		t.Fatal(err)
	}
	for _, crd := range defs {
		kind := crd.Spec.Names.Kind
		_, section, found := strings.Cut(string(doc), "\n## "+kind+"\n")
		if !found {
			t.Errorf("docs/crds.md has no section for %s", kind)
			continue
		}
		section, _, _ = strings.Cut(section, "\n## ") // up to the next section
		root := crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties
		paths := fieldPaths(root["spec"], "spec.")
		for _, path := range fieldPaths(root["status"], "status.") {
			if !strings.HasPrefix(path, "status.conditions") && path != "status.observedGeneration" {
				paths = append(paths, path)
			}
		}
		for _, path := range paths {
			if !strings.Contains(section, "| `"+path+"` |") {
				t.Errorf("docs/crds.md lacks a row for %s %s in the section %s", kind, path, kind)
			}
		}
	}
}

func fieldPaths(s apiextensionsv1.JSONSchemaProps, prefix string) []string {
	var out []string
	for name, p := range s.Properties {
		path := prefix + name
		out = append(out, path)
		out = append(out, fieldPaths(p, path+".")...)
		if p.Items != nil && p.Items.Schema != nil {
			out = append(out, fieldPaths(*p.Items.Schema, path+"[].")...)
		}
	}
	return out
}

// TestDocumentedExamplesAreValid has the apiserver validate (dry run) every configbutler.ai object
// of the YAML examples in README.md and every page of docs/, so the examples cannot rot. README.md
// and docs/crds.md must have at least one.
func TestDocumentedExamplesAreValid(t *testing.T) {
	cp := mustControlPlane(t)
	ctx := context.Background()
	if err := crds.Install(ctx, cp.AdminConfig(), slog.New(slog.DiscardHandler)); err != nil {
		t.Fatal(err)
	}
	kube := kubernetes.NewForConfigOrDie(cp.AdminConfig())
	for _, ns := range []string{"gitops-reverser-system", "team-a", "capi-clusters"} {
		_, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	dyn := dynamic.NewForConfigOrDie(cp.AdminConfig())
	pages, err := filepath.Glob("../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	mustHave := map[string]bool{"../README.md": true, "../docs/crds.md": true}
	for _, file := range append([]string{"../README.md"}, pages...) {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, block := range yamlBlocks(string(b)) {
			for _, doc := range strings.Split(block, "\n---\n") {
				var parsed any
				if err := yaml.Unmarshal([]byte(doc), &parsed); err != nil {
					t.Fatalf("%s: example does not parse: %v\n%s", file, err, doc)
				}
				object, ok := parsed.(map[string]any)
				if !ok {
					continue // a list or a scalar, not an object
				}
				u := &unstructured.Unstructured{Object: object}
				if u.GetAPIVersion() != crds.GroupVersion.String() {
					continue
				}
				n++
				gvr := crds.GroupVersion.WithResource(strings.ToLower(u.GetKind()) + "s")
				var res dynamic.ResourceInterface = dyn.Resource(gvr)
				if ns := u.GetNamespace(); ns != "" {
					res = dyn.Resource(gvr).Namespace(ns)
				}
				if _, err := res.Create(ctx, u, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}, FieldValidation: "Strict"}); err != nil {
					t.Errorf("%s: %s %s is refused: %v", file, u.GetKind(), u.GetName(), err)
				}
			}
		}
		if n == 0 && mustHave[file] {
			t.Errorf("%s: no configbutler.ai example found", file)
		}
	}
}

// yamlBlocks returns the contents of the ```yaml fenced blocks of a Markdown text.
func yamlBlocks(md string) []string {
	var out []string
	for _, part := range strings.Split(md, "```yaml\n")[1:] {
		block, _, _ := strings.Cut(part, "```")
		out = append(out, block)
	}
	return out
}
