package placement

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// adoptedFixture is testdata/adopted, a team's repository shaped like the public examples teams copy:
// Flux's flux2-kustomize-helm-example (clusters/, apps/base, apps/production with a values
// patch, infrastructure/), Argo CD's guestbook, the sock-shop complete-demo.yaml, a Helm chart,
// a SOPS-encrypted Secret, a Kustomize Component, a README, a script, JSON, a half-YAML note and
// a broken manifest.
const adoptedFixture = "testdata/adopted"

// loadFixture indexes the adoptedFixture into a new index of folder, as the worker would at clone:
// every file Wants, read and Put.
func loadFixture(tb testing.TB, folder string) *Index {
	tb.Helper()
	x := NewIndex(folder)
	err := filepath.WalkDir(adoptedFixture, func(p string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return err
		}
		rel := filepath.ToSlash(strings.TrimPrefix(p, adoptedFixture+string(filepath.Separator)))
		if !x.Wants(rel) {
			return nil
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		x.Put(rel, data)
		return nil
	})
	if err != nil {
		tb.Fatal(err)
	}
	return x
}

func mustRead(tb testing.TB, rel string) []byte {
	tb.Helper()
	data, err := os.ReadFile(filepath.Join(adoptedFixture, filepath.FromSlash(rel)))
	if err != nil {
		tb.Fatal(err)
	}
	return data
}

type entry struct {
	Key Key
	Loc Location
}

func all(x *Index) []entry {
	var out []entry
	x.All(func(k Key, l Location) { out = append(out, entry{k, l}) })
	return out
}

func key(group, kind, ns, name string) Key { return Key{group, kind, ns, name} }

// fixtureObjects is every object of the adoptedFixture, as All gives them: by path and document,
// namespaces resolved (inherited ones included, even for cluster-scoped kinds).
var fixtureObjects = []entry{
	{key("apps", "Deployment", "anchors", "web"), Location{"anchors/web.yaml", 0}},
	{key("", "Namespace", "podinfo", "podinfo"), Location{"apps/base/podinfo/namespace.yaml", 0}},
	{key("helm.toolkit.fluxcd.io", "HelmRelease", "podinfo", "podinfo"), Location{"apps/base/podinfo/release.yaml", 0}},
	{key("source.toolkit.fluxcd.io", "HelmRepository", "podinfo", "podinfo"), Location{"apps/base/podinfo/repository.yaml", 0}},
	{key("", "ConfigMap", "web", "web-config"), Location{"broken/broken-deployment.yaml", 0}},
	{key("kustomize.toolkit.fluxcd.io", "Kustomization", "flux-system", "apps"), Location{"clusters/production/apps.yaml", 0}},
	{key("kustomize.toolkit.fluxcd.io", "Kustomization", "flux-system", "infra-controllers"), Location{"clusters/production/infrastructure.yaml", 0}},
	{key("kustomize.toolkit.fluxcd.io", "Kustomization", "flux-system", "infra-configs"), Location{"clusters/production/infrastructure.yaml", 1}},
	{key("monitoring.coreos.com", "ServiceMonitor", "", "podinfo"), Location{"components/monitoring/servicemonitor.yaml", 0}},
	{key("apps", "Deployment", "", "guestbook-ui"), Location{"guestbook/guestbook-ui-deployment.yaml", 0}},
	{key("", "Service", "", "guestbook-ui"), Location{"guestbook/guestbook-ui-svc.yaml", 0}},
	{key("cert-manager.io", "ClusterIssuer", "cert-manager", "letsencrypt"), Location{"infrastructure/configs/cluster-issuers.yaml", 0}},
	{key("", "Namespace", "ingress-nginx", "ingress-nginx"), Location{"infrastructure/controllers/ingress-nginx.yaml", 1}},
	{key("source.toolkit.fluxcd.io", "HelmRepository", "ingress-nginx", "ingress-nginx"), Location{"infrastructure/controllers/ingress-nginx.yaml", 2}},
	{key("helm.toolkit.fluxcd.io", "HelmRelease", "ingress-nginx", "ingress-nginx"), Location{"infrastructure/controllers/ingress-nginx.yaml", 3}},
	{key("", "Secret", "podinfo", "db"), Location{"secrets/db.sops.yaml", 0}},
	{key("", "Namespace", "", "sock-shop"), Location{"sock-shop/complete-demo.yaml", 0}},
	{key("apps", "Deployment", "sock-shop", "carts"), Location{"sock-shop/complete-demo.yaml", 1}},
	{key("", "Service", "sock-shop", "carts"), Location{"sock-shop/complete-demo.yaml", 2}},
	{key("apps", "Deployment", "sock-shop", "catalogue"), Location{"sock-shop/complete-demo.yaml", 3}},
	{key("", "Service", "sock-shop", "catalogue"), Location{"sock-shop/complete-demo.yaml", 4}},
	{key("apps", "Deployment", "sock-shop", "front-end"), Location{"sock-shop/complete-demo.yaml", 6}},
	{key("", "Service", "sock-shop", "front-end"), Location{"sock-shop/complete-demo.yaml", 7}},
	{key("apps", "Deployment", "team-b", "api"), Location{"team-b/api.yml", 0}},
}

func TestIndexFindsEveryObjectAtItsDocument(t *testing.T) {
	x := loadFixture(t, "")
	if diff := cmp.Diff(fixtureObjects, all(x)); diff != "" {
		t.Fatalf("All (-want +got):\n%s", diff)
	}
	for _, e := range fixtureObjects {
		got, err := x.Lookup(e.Key)
		if err != nil || got != e.Loc {
			t.Errorf("Lookup(%s) = %v, %v; want %v", e.Key, got, err, e.Loc)
		}
	}
}

func TestIndexLeavesFilesThatAreNotObjectsAlone(t *testing.T) {
	x := loadFixture(t, "")
	want := []string{"broken/broken-deployment.yaml (document 2): does not parse as YAML: line 13: mapping values are not allowed in this context"}
	var got []string
	for _, p := range x.Problems() {
		got = append(got, p.String())
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Problems (-want +got):\n%s", diff)
	}
	for _, p := range []string{
		"apps/base/podinfo/kustomization.yaml", "apps/production/kustomization.yaml", "components/monitoring/kustomization.yaml",
		"team-b/Kustomization", "charts/podinfo/Chart.yaml", "charts/podinfo/values.yaml", "charts/podinfo/templates/service.yaml",
		"charts/podinfo/templates/deployment.yaml", "notes/half.yaml", "README.md", "config.json", "scripts/bootstrap.sh",
	} {
		if got := x.At(p); got != nil {
			t.Errorf("At(%s) = %v, want nothing", p, got)
		}
	}
}

func TestIndexWants(t *testing.T) {
	x := NewIndex("deploy")
	for p, want := range map[string]bool{
		"deploy/app.yaml": true, "deploy/a/b/c.yml": true, "deploy/UPPER.YAML": true, "deploy/Kustomization": true,
		"deploy/README.md": false, "deploy/config.json": false, "deploy/run.sh": false, "deploy/kustomization": false,
		"other/app.yaml": false, "deployment/app.yaml": false, "app.yaml": false, "deploy": false,
		"/deploy/app.yaml": false, "deploy/../app.yaml": false, "../deploy/app.yaml": false, "deploy//app.yaml": false, "./deploy/app.yaml": false,
	} {
		if got := x.Wants(p); got != want {
			t.Errorf("Wants(%q) = %v, want %v", p, got, want)
		}
	}
	if !NewIndex("").Wants("app.yaml") || !NewIndex("/deploy/").Wants("deploy/app.yaml") {
		t.Error("the root folder, or a folder given with slashes, does not want its own files")
	}
}

func TestIndexPutOutsideTheFolderIsIgnored(t *testing.T) {
	x := loadFixture(t, "apps")
	svc := mustRead(t, "guestbook/guestbook-ui-svc.yaml")
	for _, p := range []string{"guestbook/svc.yaml", "/apps/svc.yaml", "apps/../svc.yaml", "../apps/svc.yaml", "apps/svc.json", "appsvc/svc.yaml"} {
		x.Put(p, svc)
	}
	var want []entry
	for _, e := range fixtureObjects {
		if strings.HasPrefix(e.Loc.Path, "apps/") {
			want = append(want, e)
		}
	}
	if diff := cmp.Diff(want, all(x)); diff != "" {
		t.Errorf("All of folder apps (-want +got):\n%s", diff)
	}
	if len(x.Problems()) != 0 {
		t.Errorf("Problems = %v, want none", x.Problems())
	}
}

func TestIndexNamespaceInheritedAndResolvedAnew(t *testing.T) {
	x := loadFixture(t, "")
	repo := key("source.toolkit.fluxcd.io", "HelmRepository", "podinfo", "podinfo")
	release := key("helm.toolkit.fluxcd.io", "HelmRelease", "podinfo", "podinfo")
	at := x.At("apps/base/podinfo/repository.yaml")
	if diff := cmp.Diff([]Indexed{{Doc: 0, Key: repo, Inherited: true}}, at); diff != "" {
		t.Errorf("At(repository.yaml) (-want +got):\n%s", diff)
	}

	// The kustomization moves its folder to namespace apps: the document that declares none moves
	// with it, the one that declares podinfo stays.
	kust := strings.Replace(string(mustRead(t, "apps/base/podinfo/kustomization.yaml")), "namespace: podinfo", "namespace: apps", 1)
	x.Put("apps/base/podinfo/kustomization.yaml", []byte(kust))
	moved := repo
	moved.Namespace = "apps"
	mustFind(t, x, moved, Location{"apps/base/podinfo/repository.yaml", 0})
	mustFind(t, x, release, Location{"apps/base/podinfo/release.yaml", 0})
	if _, err := x.Lookup(repo); !errors.Is(err, ErrNotFound) {
		t.Errorf("Lookup(%s) after the namespace changed: %v, want ErrNotFound", repo, err)
	}

	// Without the kustomization, the document has no namespace at all: as the only HelmRepository
	// podinfo, it is what any namespace's lookup finds.
	x.Drop("apps/base/podinfo/kustomization.yaml")
	mustFind(t, x, repo, Location{"apps/base/podinfo/repository.yaml", 0})
	mustFind(t, x, moved, Location{"apps/base/podinfo/repository.yaml", 0})
	mustFind(t, x, key("apps", "Deployment", "team-b", "api"), Location{"team-b/api.yml", 0})
}

func TestIndexClusterScopedLookupIgnoresInheritance(t *testing.T) {
	x := loadFixture(t, "")
	mustFind(t, x, key("cert-manager.io", "ClusterIssuer", "", "letsencrypt"), Location{"infrastructure/configs/cluster-issuers.yaml", 0})
	mustFind(t, x, key("", "Namespace", "", "ingress-nginx"), Location{"infrastructure/controllers/ingress-nginx.yaml", 1})
	mustFind(t, x, key("", "Namespace", "", "sock-shop"), Location{"sock-shop/complete-demo.yaml", 0})
	if _, err := x.Lookup(key("helm.toolkit.fluxcd.io", "HelmRelease", "", "podinfo")); !errors.Is(err, ErrNotFound) {
		t.Errorf("a document that declares a namespace was found as cluster-scoped: %v", err)
	}
}

func TestIndexNamespacelessDocumentIsTheLastResort(t *testing.T) {
	x := loadFixture(t, "")
	deploy := Location{"guestbook/guestbook-ui-deployment.yaml", 0}
	mustFind(t, x, key("apps", "Deployment", "dev", "guestbook-ui"), deploy)
	mustFind(t, x, key("", "Service", "prod", "guestbook-ui"), Location{"guestbook/guestbook-ui-svc.yaml", 0})

	// Once another document of that name says its namespace, the namespace-less one is no longer
	// the only candidate, and a namespace it does not name finds nothing.
	prod := strings.Replace(string(mustRead(t, "guestbook/guestbook-ui-deployment.yaml")), "  name: guestbook-ui\n", "  name: guestbook-ui\n  namespace: prod\n", 1)
	x.Put("envs/prod/guestbook.yaml", []byte(prod))
	mustFind(t, x, key("apps", "Deployment", "prod", "guestbook-ui"), Location{"envs/prod/guestbook.yaml", 0})
	if _, err := x.Lookup(key("apps", "Deployment", "dev", "guestbook-ui")); !errors.Is(err, ErrNotFound) {
		t.Errorf("Lookup in dev with a prod document beside the namespace-less one: %v, want ErrNotFound", err)
	}
	mustFind(t, x, key("apps", "Deployment", "", "guestbook-ui"), deploy)
}

func TestIndexRenameIsFoundAtItsNewPlace(t *testing.T) {
	x := loadFixture(t, "")
	data := mustRead(t, "sock-shop/complete-demo.yaml")
	x.Drop("sock-shop/complete-demo.yaml")
	x.Put("sock-shop/manifests/all.yaml", data)
	mustFind(t, x, key("apps", "Deployment", "sock-shop", "front-end"), Location{"sock-shop/manifests/all.yaml", 6})
	if got := x.At("sock-shop/complete-demo.yaml"); got != nil {
		t.Errorf("the old path still has documents: %v", got)
	}
	if n := len(all(x)); n != len(fixtureObjects) {
		t.Errorf("%d objects after the rename, want %d", n, len(fixtureObjects))
	}
}

func mustFind(tb testing.TB, x *Index, k Key, want Location) {
	tb.Helper()
	got, err := x.Lookup(k)
	if err != nil || got != want {
		tb.Errorf("Lookup(%s) = %v, %v; want %v", k, got, err, want)
	}
}

// TestEditedIndexesAsPutDoes edits every object document of the fixture in place and checks
// that Edited, which reads that document alone, leaves the index as Put leaves it; and so when
// Edited must read the whole file: the document renamed, a document more, a kustomization.
func TestEditedIndexesAsPutDoes(t *testing.T) {
	same := func(t *testing.T, p string, data []byte, doc int) {
		t.Helper()
		edited, put := loadFixture(t, ""), loadFixture(t, "")
		edited.Edited(p, data, doc)
		put.Put(p, data)
		if diff := cmp.Diff(all(put), all(edited)); diff != "" {
			t.Errorf("%s, document %d: All (-Put +Edited):\n%s", p, doc, diff)
		}
		if diff := cmp.Diff(put.At(p), edited.At(p)); diff != "" {
			t.Errorf("%s, document %d: At (-Put +Edited):\n%s", p, doc, diff)
		}
		if diff := cmp.Diff(put.Problems(), edited.Problems(), cmp.Comparer(func(a, b error) bool { return a.Error() == b.Error() })); diff != "" {
			t.Errorf("%s, document %d: Problems (-Put +Edited):\n%s", p, doc, diff)
		}
	}
	x := loadFixture(t, "")
	edits := 0
	for _, e := range all(x) {
		if anchoredAt(x.At(e.Loc.Path), e.Loc.Doc) {
			continue
		}
		data := mustRead(t, e.Loc.Path)
		out, err := Edit(data, e.Loc.Doc, []Op{set("metadata.labels.edited", "yes")})
		if err != nil {
			continue // a document Edit refuses is never Edited
		}
		edits++
		same(t, e.Loc.Path, out, e.Loc.Doc)
	}
	if edits < 10 {
		t.Fatalf("only %d documents edited: the test checks too little", edits)
	}
	const p = "apps/base/podinfo/release.yaml"
	data := mustRead(t, p)
	same(t, p, []byte(strings.Replace(string(data), "name: podinfo\n", "name: renamed\n", 1)), 0)
	same(t, p, append(append([]byte{}, data...), "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: more\n"...), 0)
	const k = "apps/production/kustomization.yaml"
	same(t, k, append(mustRead(t, k), "# edited\n"...), 0)
}

// anchoredAt reports whether document doc of the indexed file uses anchors.
func anchoredAt(docs []Indexed, doc int) bool {
	for _, d := range docs {
		if d.Doc == doc && d.Anchors {
			return true
		}
	}
	return false
}
