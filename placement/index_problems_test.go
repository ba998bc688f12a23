package placement

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestIndexDuplicatesAreReportedAndOtherKeysStillFound(t *testing.T) {
	x := loadFixture(t, "")
	x.Put("guestbook/copy/svc.yaml", mustRead(t, "guestbook/guestbook-ui-svc.yaml"))
	// A document that declares podinfo and one that inherits it resolve to one key too.
	x.Put("apps/base/podinfo/db-secret.yaml", []byte("apiVersion: v1\nkind: Secret\nmetadata:\n  name: db\n"))

	svc := key("", "Service", "", "guestbook-ui")
	_, err := x.Lookup(svc)
	var dup *DuplicateError
	if !errors.As(err, &dup) {
		t.Fatalf("Lookup(%s) = %v, want a *DuplicateError", svc, err)
	}
	wantLocs := []Location{{"guestbook/copy/svc.yaml", 0}, {"guestbook/guestbook-ui-svc.yaml", 0}}
	if diff := cmp.Diff(wantLocs, dup.Locations); diff != "" {
		t.Errorf("Locations (-want +got):\n%s", diff)
	}
	wantMsg := "Service guestbook-ui is declared by 2 documents: guestbook/copy/svc.yaml (document 1), guestbook/guestbook-ui-svc.yaml (document 1)"
	if err.Error() != wantMsg {
		t.Errorf("message %q, want %q", err, wantMsg)
	}
	if _, err := x.Lookup(key("", "Secret", "podinfo", "db")); !errors.As(err, &dup) {
		t.Errorf("declared and inherited podinfo/db: %v, want a *DuplicateError", err)
	}

	mustFind(t, x, key("apps", "Deployment", "", "guestbook-ui"), Location{"guestbook/guestbook-ui-deployment.yaml", 0})
	mustFind(t, x, key("apps", "Deployment", "sock-shop", "carts"), Location{"sock-shop/complete-demo.yaml", 1})

	var got []string
	for _, p := range x.Problems() {
		got = append(got, p.String())
	}
	want := []string{
		"apps/base/podinfo/db-secret.yaml (document 1): Secret podinfo/db is declared by 2 documents: apps/base/podinfo/db-secret.yaml (document 1), secrets/db.sops.yaml (document 1)",
		"broken/broken-deployment.yaml (document 2): does not parse as YAML: line 13: mapping values are not allowed in this context",
		"guestbook/copy/svc.yaml (document 1): " + wantMsg,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Problems (-want +got):\n%s", diff)
	}

	x.Drop("guestbook/copy/svc.yaml")
	mustFind(t, x, svc, Location{"guestbook/guestbook-ui-svc.yaml", 0})
}

func TestIndexBrokenObjectFileIsAProblemAndTheRestIndexes(t *testing.T) {
	x := loadFixture(t, "")
	mustFind(t, x, key("", "ConfigMap", "web", "web-config"), Location{"broken/broken-deployment.yaml", 0})
	if _, err := x.Lookup(key("apps", "Deployment", "web", "web")); !errors.Is(err, ErrNotFound) {
		t.Errorf("the broken Deployment: %v, want ErrNotFound", err)
	}
	// A broken document without apiVersion and kind lines is still a problem in a file of objects.
	x.Put("broken/tail.yaml", []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: ok\n---\ndata: [unclosed\n"))
	// A file of only broken non-objects is not.
	x.Put("broken/notes.yaml", []byte("todo: [unclosed\n"))
	var got []Location
	for _, p := range x.Problems() {
		got = append(got, p.Location)
	}
	want := []Location{{"broken/broken-deployment.yaml", 1}, {"broken/tail.yaml", 1}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Problems (-want +got):\n%s", diff)
	}
	mustFind(t, x, key("", "ConfigMap", "", "ok"), Location{"broken/tail.yaml", 0})
	if n := len(all(x)); n != len(fixtureObjects)+1 {
		t.Errorf("%d objects, want %d", n, len(fixtureObjects)+1)
	}
}

func TestIndexBrokenKustomizationIsAProblem(t *testing.T) {
	x := NewIndex("")
	x.Put("app/kustomization.yaml", []byte("resources:\n  - a.yaml\n - b.yaml\n"))
	p := x.Problems()
	if len(p) != 1 || p[0].Location != (Location{"app/kustomization.yaml", 0}) {
		t.Errorf("Problems = %v, want the kustomization's document", p)
	}
	if got, ok := x.Nearest("app"); !ok || got != "app/kustomization.yaml" {
		t.Errorf("Nearest(app) = %q, %v; a broken kustomization is still there", got, ok)
	}
}

func TestIndexTooLargeFileIsAProblemNotRead(t *testing.T) {
	x := NewIndex("")
	big := append([]byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: big\ndata:\n  blob: "), bytes.Repeat([]byte("a"), MaxIndexedBytes)...)
	x.Put("vendor/install.yaml", big)
	p := x.Problems()
	if len(p) != 1 || !errors.Is(p[0].Err, ErrTooLarge) || p[0].Location != (Location{"vendor/install.yaml", -1}) {
		t.Fatalf("Problems = %v, want vendor/install.yaml too large", p)
	}
	if _, err := x.Lookup(key("", "ConfigMap", "", "big")); !errors.Is(err, ErrNotFound) {
		t.Errorf("a too large file was read: %v", err)
	}
	x.Put("vendor/install.yaml", big[:MaxIndexedBytes])
	mustFind(t, x, key("", "ConfigMap", "", "big"), Location{"vendor/install.yaml", 0})
	if p := x.Problems(); len(p) != 0 {
		t.Errorf("Problems = %v after the file shrank", p)
	}
}

func TestIndexMarksDocumentsWithAnchors(t *testing.T) {
	x := loadFixture(t, "")
	want := []Indexed{{Doc: 0, Key: key("apps", "Deployment", "anchors", "web"), Anchors: true}}
	if diff := cmp.Diff(want, x.At("anchors/web.yaml")); diff != "" {
		t.Errorf("At(anchors/web.yaml) (-want +got):\n%s", diff)
	}
	// Identity read through an alias and a merge key.
	x.Put("anchors/meta.yaml", []byte("x: &meta\n  name: shared\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  <<: {name: merged}\n  namespace: anchors\n"))
	mustFind(t, x, key("", "ConfigMap", "anchors", "merged"), Location{"anchors/meta.yaml", 1})
	for _, p := range []string{"sock-shop/complete-demo.yaml", "apps/base/podinfo/release.yaml"} {
		for _, d := range x.At(p) {
			if d.Anchors {
				t.Errorf("%s document %d marked with anchors", p, d.Doc)
			}
		}
	}
}

func TestIndexAtListsAFilesDocumentsInOrder(t *testing.T) {
	x := loadFixture(t, "")
	var got []string
	for _, d := range x.At("sock-shop/complete-demo.yaml") {
		got = append(got, fmt.Sprintf("%d %s", d.Doc, d.Key))
	}
	want := []string{
		"0 Namespace sock-shop", "1 Deployment.apps sock-shop/carts", "2 Service sock-shop/carts",
		"3 Deployment.apps sock-shop/catalogue", "4 Service sock-shop/catalogue",
		"6 Deployment.apps sock-shop/front-end", "7 Service sock-shop/front-end",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("At (-want +got):\n%s", diff)
	}
}

func TestIndexHelmTemplatesAreNotIndexed(t *testing.T) {
	x := NewIndex("")
	// A template put before its chart's Chart.yaml is left out as soon as the chart is known.
	x.Put("charts/podinfo/templates/service.yaml", mustRead(t, "charts/podinfo/templates/service.yaml"))
	x.Put("charts/podinfo/templates/deployment.yaml", mustRead(t, "charts/podinfo/templates/deployment.yaml"))
	x.Put("charts/podinfo/Chart.yaml", mustRead(t, "charts/podinfo/Chart.yaml"))
	x.Put("charts/podinfo/values.yaml", mustRead(t, "charts/podinfo/values.yaml"))
	// A folder called templates outside a chart holds manifests.
	x.Put("templates/svc.yaml", mustRead(t, "charts/podinfo/templates/service.yaml"))
	svc := key("", "Service", "", "podinfo")
	mustFind(t, x, svc, Location{"templates/svc.yaml", 0})
	if n, p := len(all(x)), x.Problems(); n != 1 || len(p) != 0 {
		t.Errorf("%d objects and problems %v, want the one outside the chart and none", n, p)
	}
	// Without Chart.yaml, the folder is not a chart: its files are manifests, broken or not.
	x.Drop("charts/podinfo/Chart.yaml")
	if _, err := x.Lookup(svc); !errors.As(err, new(*DuplicateError)) {
		t.Errorf("Lookup(%s) without Chart.yaml: %v, want a duplicate", svc, err)
	}
	if p := x.Problems(); len(p) != 2 || p[0].Path != "charts/podinfo/templates/deployment.yaml" || !errors.As(p[1].Err, new(*DuplicateError)) {
		t.Errorf("Problems = %v, want the template that does not parse and the duplicate", p)
	}
}

func TestIndexPatchFilesAreNotTheObjectsDocuments(t *testing.T) {
	x := loadFixture(t, "")
	release := key("helm.toolkit.fluxcd.io", "HelmRelease", "podinfo", "podinfo")
	mustFind(t, x, release, Location{"apps/base/podinfo/release.yaml", 0})
	want := []Indexed{{Doc: 0, Key: release, Patch: true}}
	if diff := cmp.Diff(want, x.At("apps/production/podinfo-values.yaml")); diff != "" {
		t.Errorf("At(podinfo-values.yaml) (-want +got):\n%s", diff)
	}
	// Once no kustomization names it as a patch, the values file is a second HelmRelease podinfo.
	x.Drop("apps/production/kustomization.yaml")
	if _, err := x.Lookup(release); !errors.As(err, new(*DuplicateError)) {
		t.Errorf("Lookup(%s) without the overlay: %v, want a duplicate", release, err)
	}
	// patchesStrategicMerge names patch files too (the older form of the same example).
	x.Put("apps/production/kustomization.yaml", []byte("resources:\n  - ../base/podinfo\npatchesStrategicMerge:\n  - podinfo-values.yaml\n"))
	mustFind(t, x, release, Location{"apps/base/podinfo/release.yaml", 0})
}

func TestIndexKustomizationOfAFolder(t *testing.T) {
	x := loadFixture(t, "")
	for dir, want := range map[string][2]string{
		"apps/base/podinfo": {"apps/base/podinfo/kustomization.yaml", "podinfo"},
		"apps/production":   {"apps/production/kustomization.yaml", ""},
		"team-b":            {"team-b/Kustomization", "team-b"},
		"apps/base":         {"", ""},
	} {
		p, ns, ok := x.Kustomization(dir)
		if p != want[0] || ns != want[1] || ok != (want[0] != "") {
			t.Errorf("Kustomization(%s) = %q, %q, %v; want %q, %q", dir, p, ns, ok, want[0], want[1])
		}
	}
	// kustomize reads kustomization.yaml before kustomization.yml and Kustomization.
	x.Put("team-b/kustomization.yml", []byte("namespace: team-b-yml\n"))
	x.Put("team-b/kustomization.yaml", []byte("namespace: team-b-yaml\n"))
	if p, ns, _ := x.Kustomization("team-b"); p != "team-b/kustomization.yaml" || ns != "team-b-yaml" {
		t.Errorf("Kustomization(team-b) = %q, %q; want kustomization.yaml's", p, ns)
	}
	mustFind(t, x, key("apps", "Deployment", "team-b-yaml", "api"), Location{"team-b/api.yml", 0})
	x.Drop("team-b/kustomization.yaml")
	if p, _, _ := x.Kustomization("team-b"); p != "team-b/kustomization.yml" {
		t.Errorf("Kustomization(team-b) = %q after kustomization.yaml went, want kustomization.yml", p)
	}
}

func TestIndexNearestKustomization(t *testing.T) {
	x := loadFixture(t, "apps")
	for dir, want := range map[string]string{
		"apps/base/podinfo/extra/deep": "apps/base/podinfo/kustomization.yaml",
		"apps/production":              "apps/production/kustomization.yaml",
		"apps/base":                    "",
		"team-b":                       "",
		"../apps/base/podinfo":         "",
	} {
		if got, ok := x.Nearest(dir); got != want || ok != (want != "") {
			t.Errorf("Nearest(%s) = %q, %v; want %q", dir, got, ok, want)
		}
	}
}

func TestIndexForNamespace(t *testing.T) {
	x := loadFixture(t, "")
	if dir, ok := x.ForNamespace("podinfo"); !ok || dir != "apps/base/podinfo" {
		t.Errorf("ForNamespace(podinfo) = %q, %v", dir, ok)
	}
	x.Put("apps/podinfo/kustomization.yaml", []byte("namespace: podinfo\n"))
	x.Put("apps/aaa/kustomization.yaml", []byte("namespace: podinfo\n"))
	if dir, _ := x.ForNamespace("podinfo"); dir != "apps/aaa" {
		t.Errorf("ForNamespace(podinfo) = %q, want the shallowest, first by path: apps/aaa", dir)
	}
	for _, ns := range []string{"nowhere", ""} {
		if dir, ok := x.ForNamespace(ns); ok {
			t.Errorf("ForNamespace(%q) = %q", ns, dir)
		}
	}
}

func TestIndexSOPSSecretIsIndexedByItsClearFields(t *testing.T) {
	x := loadFixture(t, "")
	mustFind(t, x, key("", "Secret", "podinfo", "db"), Location{"secrets/db.sops.yaml", 0})
	if strings.Contains(fmt.Sprint(x.Problems()), "sops") {
		t.Errorf("the SOPS file is a problem: %v", x.Problems())
	}
}
