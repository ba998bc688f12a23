package watch

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/configbutler/gitops-reverser/crds"
	"github.com/configbutler/gitops-reverser/sanitize"
	"github.com/configbutler/gitops-reverser/testenv"
)

var (
	deployments = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}
	services    = schema.GroupVersionResource{Version: "v1", Resource: "services"}
	configMaps  = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
)

// adopted is a test's adopted folder: the fixture as pushed, and what the remote holds now.
type adopted struct {
	e     *env
	files map[string]string // the fixture, as pushed (paths from the repository's root)
	seen  int               // commits of the branch already checked
}

// adoptFixture pushes testdata/adopted into the test's repository as a team would have it
// (NAMESPACE replaced by the test's), applies its objects as Flux's kustomize-controller would
// (server-side apply, that field manager), and points the destination at apps/ with layout
// Existing.
func adoptFixture(e *env, existing *crds.ExistingLayout) *adopted {
	e.t.Helper()
	a := &adopted{e: e, files: map[string]string{}}
	root := filepath.Join("testdata", "adopted")
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(p)
		rel, _ := filepath.Rel(root, p)
		a.files[filepath.ToSlash(rel)] = strings.ReplaceAll(string(data), "NAMESPACE", e.ns)
		return err
	})
	if err != nil {
		e.t.Fatal(err)
	}
	if _, err := gitSrv.PushCommit(e.repo, "main", testenv.Signature{Name: "Team", Email: "team@example.com"}, "the team's apps", a.files, nil); err != nil {
		e.t.Fatal(err)
	}
	a.seen = 1
	for _, doc := range []struct{ file string }{{"apps/podinfo/podinfo.yaml"}, {"apps/podinfo/frontend.yml"}} {
		nodes, err := sanitize.Documents([]byte(a.files[doc.file]))
		if err != nil {
			e.t.Fatal(err)
		}
		for _, n := range nodes {
			obj, err := sanitize.ObjectOf(n)
			if err != nil {
				e.t.Fatal(err)
			}
			if u := (&unstructured.Unstructured{Object: obj}); u.GetName() != "legacy-settings" { // absent from the cluster
				a.applyAs("kustomize-controller", u)
			}
		}
	}
	e.apply(crds.GitDestinations, &crds.GitDestination{ObjectMeta: metav1.ObjectMeta{Name: "dest", Namespace: e.ns},
		Spec: crds.GitDestinationSpec{RepoRef: crds.NamespacedReference{Name: "repo"}, Branch: "main", BaseFolder: "apps",
			Layout: crds.LayoutExisting, Existing: existing}})
	e.watchRule("apps", "deployments", "services", "configmaps")
	return a
}

func gvrOf(u *unstructured.Unstructured) schema.GroupVersionResource {
	switch u.GetKind() {
	case "Deployment":
		return deployments
	case "Service":
		return services
	}
	return configMaps
}

var force = true

// applyAs server-side applies u in the test's namespace as field manager.
func (a *adopted) applyAs(manager string, u *unstructured.Unstructured) {
	a.e.t.Helper()
	body, err := json.Marshal(u.Object)
	if err != nil {
		a.e.t.Fatal(err)
	}
	_, err = a.e.resource(gvrOf(u), a.e.ns).Patch(a.e.ctx, u.GetName(), types.ApplyPatchType, body,
		metav1.PatchOptions{FieldManager: manager, Force: &force})
	if err != nil {
		a.e.t.Fatalf("apply %s %s as %s: %v", u.GetKind(), u.GetName(), manager, err)
	}
}

// patchAs patches an object of the test's namespace as kubectl's field manager would.
func (a *adopted) patchAs(manager string, gvr schema.GroupVersionResource, name string, pt types.PatchType, patch string, subresources ...string) {
	a.e.t.Helper()
	_, err := a.e.resource(gvr, a.e.ns).Patch(a.e.ctx, name, pt, []byte(patch), metav1.PatchOptions{FieldManager: manager}, subresources...)
	if err != nil {
		a.e.t.Fatalf("patch %s %s as %s: %v", gvr.Resource, name, manager, err)
	}
}

// nextCommit waits for the branch's next commit and returns the files it changed (nil: deleted).
func (a *adopted) nextCommit() testenv.CommitChanges {
	a.e.t.Helper()
	var got []testenv.CommitChanges
	testenv.Eventually(a.e.t, time.Minute, "the next commit", func() (bool, string) {
		h, err := gitSrv.History(a.e.repo, "main")
		if err != nil {
			return false, err.Error()
		}
		got = h
		return len(h) > a.seen, fmt.Sprintf("%d commits, %d seen", len(h), a.seen)
	})
	if len(got) != a.seen+1 {
		a.e.t.Fatalf("%d new commits, want one at a time", len(got)-a.seen)
	}
	a.seen++
	return got[0]
}

// expect checks that commit c changed exactly the files of want, to exactly their content (a
// missing string: deleted), and records them as the folder's files.
func (a *adopted) expect(c testenv.CommitChanges, want map[string]*string) {
	a.e.t.Helper()
	if got, w := slices.Sorted(maps.Keys(c.Files)), slices.Sorted(maps.Keys(want)); !slices.Equal(got, w) {
		a.e.t.Fatalf("commit changed %v, want exactly %v", got, w)
	}
	for p, content := range want {
		switch {
		case content == nil && c.Files[p] != nil:
			a.e.t.Errorf("%s: not deleted", p)
		case content != nil && string(c.Files[p]) != *content:
			a.e.t.Errorf("%s: got\n%s\nwant\n%s\ndiff (- want, + got):\n%s", p, c.Files[p], *content, lineDiff(*content, string(c.Files[p])))
		}
		if content == nil {
			delete(a.files, p)
		} else {
			a.files[p] = *content
		}
	}
}

// rendersLive renders the kustomization in dir as the remote holds it (kustomize in process)
// and checks that every value it gives each object is the live object's: the files say what the
// cluster runs (the intent; the live object holds the defaults besides). A HelmRelease, whose
// kind this cluster does not serve, is left out.
func (a *adopted) rendersLive(dir string) {
	a.e.t.Helper()
	for k, rendered := range a.render(dir) {
		if k.Kind == "HelmRelease" {
			continue
		}
		u := &unstructured.Unstructured{Object: rendered}
		live, err := a.e.resource(gvrOf(u), k.Namespace).Get(a.e.ctx, k.Name, metav1.GetOptions{})
		if err != nil {
			if k.Name == "legacy-settings" {
				continue // absent from the cluster, left in place
			}
			a.e.t.Fatalf("%s rendered but not live: %v", k, err)
		}
		if p, want, got := firstDifference(rendered, sanitize.Object(live.Object), ""); p != "" {
			a.e.t.Errorf("%s renders %s = %v, live has %v", k, p, want, got)
		}
	}
}

// firstDifference is the first path where sub holds a value whole holds otherwise.
func firstDifference(sub, whole any, at string) (string, any, any) {
	switch s := sub.(type) {
	case map[string]any:
		w, _ := whole.(map[string]any)
		for _, k := range slices.Sorted(maps.Keys(s)) {
			if p, x, y := firstDifference(s[k], w[k], at+"."+k); p != "" {
				return p, x, y
			}
		}
		return "", nil, nil
	case []any:
		w, _ := whole.([]any)
		if len(w) != len(s) {
			return at, s, whole
		}
		for i := range s {
			j, step := namedItem(s[i], w, i) // items of a named list match by name, in any order
			if p, x, y := firstDifference(s[i], w[j], at+step); p != "" {
				return p, x, y
			}
		}
		return "", nil, nil
	}
	if fmt.Sprint(sub) != fmt.Sprint(whole) {
		return at, sub, whole
	}
	return "", nil, nil
}

// namedItem is the index in list of the item named as item is, with its path step; i when item
// has no name.
func namedItem(item any, list []any, i int) (int, string) {
	m, _ := item.(map[string]any)
	name, ok := m["name"]
	if !ok {
		return i, fmt.Sprintf("[%d]", i)
	}
	for j, other := range list {
		if m, isMap := other.(map[string]any); isMap && m["name"] == name {
			return j, fmt.Sprintf("[name=%v]", name)
		}
	}
	return i, fmt.Sprintf("[name=%v]", name)
}

// edit is the fixture's file p with each old line replaced by new, every line as written
// (each old must occur exactly once).
func (a *adopted) edit(p string, pairs ...string) *string {
	a.e.t.Helper()
	s := a.files[p]
	for i := 0; i < len(pairs); i += 2 {
		if n := strings.Count(s, pairs[i]); n != 1 {
			a.e.t.Fatalf("%s: %q occurs %d times", p, pairs[i], n)
		}
		s = strings.Replace(s, pairs[i], pairs[i+1], 1)
	}
	return &s
}

// lineDiff lists the lines only one side has, in order: enough to read a failure.
func lineDiff(want, got string) string {
	w, g := strings.SplitAfter(want, "\n"), strings.SplitAfter(got, "\n")
	var b strings.Builder
	i, j := 0, 0
	for i < len(w) || j < len(g) {
		switch {
		case i < len(w) && j < len(g) && w[i] == g[j]:
			i, j = i+1, j+1
		case j < len(g) && !slices.Contains(w[i:], g[j]):
			b.WriteString("+ " + g[j])
			j++
		case i < len(w):
			b.WriteString("- " + w[i])
			i++
		default:
			b.WriteString("+ " + g[j])
			j++
		}
	}
	return b.String()
}

// TestAdoptedFolderChangesOnlyWhatPeopleChanged is issue 59's walk through a team's folder: the
// folder is adopted without a commit, and each kubectl-style change gives one commit whose
// diff is exactly that change, in the team's file, with its comments and styles; no default of
// the apiserver ever reaches a file.
func TestAdoptedFolderChangesOnlyWhatPeopleChanged(t *testing.T) {
	e := newEnv(t)
	a := adoptFixture(e, nil)
	e.startManager()
	const podinfo, frontend, kustomization = "apps/podinfo/podinfo.yaml", "apps/podinfo/frontend.yml", "apps/podinfo/kustomization.yaml"

	// kubectl set image: one line, its comment kept.
	a.patchAs("kubectl-set", deployments, "podinfo", types.StrategicMergePatchType,
		`{"spec":{"template":{"spec":{"containers":[{"name":"podinfo","image":"ghcr.io/stefanprodan/podinfo:6.6.0"}]}}}}`)
	a.expect(a.nextCommit(), map[string]*string{podinfo: a.edit(podinfo,
		"        image: ghcr.io/stefanprodan/podinfo:6.5.0 # pinned by the team\n",
		"        image: ghcr.io/stefanprodan/podinfo:6.6.0 # pinned by the team\n")})
	a.rendersLive("apps/podinfo")

	// kubectl scale, through the scale subresource.
	a.patchAs("kubectl-scale", deployments, "podinfo", types.MergePatchType, `{"spec":{"replicas":3}}`, "scale")
	a.expect(a.nextCommit(), map[string]*string{podinfo: a.edit(podinfo, "  replicas: 2\n", "  replicas: 3\n")})
	a.rendersLive("apps/podinfo")

	// kubectl edit adding an env var: two lines, in the list's own style.
	a.patchAs("kubectl-edit", deployments, "podinfo", types.StrategicMergePatchType,
		`{"spec":{"template":{"spec":{"containers":[{"name":"podinfo","env":[{"name":"FEATURE_X","value":"enabled"}]}]}}}}`)
	a.expect(a.nextCommit(), map[string]*string{podinfo: a.edit(podinfo,
		"          value: \"#34577c\"\n",
		"          value: \"#34577c\"\n        - name: FEATURE_X\n          value: enabled\n")})
	a.rendersLive("apps/podinfo")

	// kubectl label: one line under the labels the file has.
	a.patchAs("kubectl-label", deployments, "podinfo", types.MergePatchType, `{"metadata":{"labels":{"tier":"backend"}}}`)
	a.expect(a.nextCommit(), map[string]*string{podinfo: a.edit(podinfo,
		"    app: podinfo # team label\n",
		"    app: podinfo # team label\n    tier: backend\n")})
	a.rendersLive("apps/podinfo")

	// kubectl scale of a Deployment whose file leaves replicas out: the apiserver records no owner
	// of the new replicas (and the admission webhook does not see subresources), so it may be an
	// HPA's: not written (checked at the end, after later commits).
	a.patchAs("kubectl-scale", deployments, "frontend", types.MergePatchType, `{"spec":{"replicas":4}}`, "scale")

	// A delete removes the document, its separator with it; the other documents stay.
	if err := e.resource(configMaps, e.ns).Delete(e.ctx, "podinfo-config", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	a.expect(a.nextCommit(), map[string]*string{podinfo: a.edit(podinfo,
		"---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: podinfo-config\ndata:\n  LOG_LEVEL: info\n", "")})

	// The document of an object absent from the cluster was left in place all along.
	if !strings.Contains(a.files[podinfo], "name: legacy-settings") {
		t.Fatal("the first sync removed a document whose object is absent")
	}
	_ = kustomization
	a.rendersLive("apps/podinfo")
	a.expectRemote()
}

// expectRemote checks that the remote holds exactly the folder's files as the test expects them.
func (a *adopted) expectRemote() {
	a.e.t.Helper()
	all, err := gitSrv.Files(a.e.repo, "main")
	if err != nil {
		a.e.t.Fatal(err)
	}
	if got, want := all, slices.Sorted(maps.Keys(a.files)); !slices.Equal(got, want) {
		a.e.t.Fatalf("remote files %v, want %v", got, want)
	}
	for p, want := range a.files {
		got, err := gitSrv.ReadFile(a.e.repo, "main", p)
		if err != nil {
			a.e.t.Fatal(err)
		}
		if string(got) != want {
			a.e.t.Errorf("%s:\n%s", p, lineDiff(want, string(got)))
		}
	}
}

// adoptedStatus reads status.adopted of the test's destination.
func (e *env) adoptedStatus() crds.AdoptedStatus {
	e.t.Helper()
	u, err := e.resource(crds.GitDestinations, e.ns).Get(e.ctx, "dest", metav1.GetOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	d, err := crds.FromUnstructured[crds.GitDestination](u)
	if err != nil {
		e.t.Fatal(err)
	}
	if d.Status.Adopted == nil {
		return crds.AdoptedStatus{}
	}
	return *d.Status.Adopted
}

// createAs creates u in the test's namespace as an update by field manager (kubectl create's way).
func (a *adopted) createAs(manager string, u *unstructured.Unstructured) {
	a.e.t.Helper()
	if _, err := a.e.resource(gvrOf(u), a.e.ns).Create(a.e.ctx, u, metav1.CreateOptions{FieldManager: manager}); err != nil {
		a.e.t.Fatalf("create %s %s: %v", u.GetKind(), u.GetName(), err)
	}
}

func object(t *testing.T, text string) *unstructured.Unstructured {
	t.Helper()
	nodes, err := sanitize.Documents([]byte(text))
	if err != nil {
		t.Fatal(err)
	}
	obj, err := sanitize.ObjectOf(nodes[0])
	if err != nil {
		t.Fatal(err)
	}
	return &unstructured.Unstructured{Object: obj}
}

// TestAdoptedFolderPlacesNewObjectsAndPrunesOnlyWhenTold: a new object goes beside the
// kustomization of its namespace, holding what its creator set and no default, and is listed in
// the kustomization; a document whose object is absent is listed, and removed only once the
// destination says prune.
func TestAdoptedFolderPlacesNewObjectsAndPrunesOnlyWhenTold(t *testing.T) {
	e := newEnv(t)
	a := adoptFixture(e, nil)
	e.startManager()
	const podinfo, kustomization = "apps/podinfo/podinfo.yaml", "apps/podinfo/kustomization.yaml"
	wantAbsent := "ConfigMap " + e.ns + "/legacy-settings (apps/podinfo/podinfo.yaml, document 5)"
	testenv.Eventually(t, time.Minute, "status.adopted lists the absent document", func() (bool, string) {
		got := e.adoptedStatus()
		return slices.Equal(got.Absent, []string{wantAbsent}), fmt.Sprintf("%+v", got)
	})

	// kubectl create deployment web --image=nginx:1.27, as it sends it.
	a.createAs("kubectl-create", object(t, `
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, labels: {app: web}}
spec:
  replicas: 1
  selector: {matchLabels: {app: web}}
  strategy: {}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
      - name: nginx
        image: nginx:1.27
        resources: {}
`))
	web := `apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: ` + e.ns + `
  labels:
    app: web
spec:
  selector:
    matchLabels:
      app: web
  template:
    metadata:
      labels:
        app: web
    spec:
      containers:
      - name: nginx
        image: nginx:1.27
`
	a.expect(a.nextCommit(), map[string]*string{
		"apps/podinfo/web-deployment.yaml": &web,
		kustomization:                      a.edit(kustomization, "- frontend.yml # the UI\n", "- frontend.yml # the UI\n- web-deployment.yaml\n"),
	})

	// Its delete removes its file, and the file's entry from the kustomization.
	if err := e.resource(deployments, e.ns).Delete(e.ctx, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	a.expect(a.nextCommit(), map[string]*string{"apps/podinfo/web-deployment.yaml": nil,
		kustomization: a.edit(kustomization, "- web-deployment.yaml\n", "")})

	// Told to prune, and where new files go: the absent object's document goes, the rest of the
	// file stays.
	e.apply(crds.GitDestinations, &crds.GitDestination{ObjectMeta: metav1.ObjectMeta{Name: "dest", Namespace: e.ns},
		Spec: crds.GitDestinationSpec{RepoRef: crds.NamespacedReference{Name: "repo"}, Branch: "main", BaseFolder: "apps",
			Layout: crds.LayoutExisting, Existing: &crds.ExistingLayout{Prune: true, NewFiles: "{namespace}/{name}-{kind}.yaml"}}})
	a.expect(a.nextCommit(), map[string]*string{podinfo: a.edit(podinfo,
		"---\n# Kept for the old dashboards; not applied any more.\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: legacy-settings\ndata:\n  mode: legacy\n", "")})
	testenv.Eventually(t, time.Minute, "status.adopted lists nothing absent", func() (bool, string) {
		got := e.adoptedStatus()
		return len(got.Absent) == 0, fmt.Sprintf("%+v", got)
	})

	// A new object goes where the template says; no kustomization sits there to list it.
	a.createAs("kubectl-create", object(t, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: flags}\ndata: {beta: \"on\"}\n"))
	flags := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: flags\n  namespace: " + e.ns + "\ndata:\n  beta: \"on\"\n"
	a.expect(a.nextCommit(), map[string]*string{"apps/" + e.ns + "/flags-configmap.yaml": &flags})
	a.expectRemote()
}

// TestAnUntidyAdoptedFolderNeverStopsTheRest: a second document claiming an object, a file that
// is half YAML, a 5 MiB file and a document with anchors are listed, their objects are not
// written, and every other object still is; a file a person renames is followed.
func TestAnUntidyAdoptedFolderNeverStopsTheRest(t *testing.T) {
	e := newEnv(t)
	a := adoptFixture(e, nil)
	untidy := map[string]string{
		"apps/podinfo/copy-of-frontend.yaml": "# someone's copy\napiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: frontend\nspec: {}\n",
		"apps/broken.yaml":                   "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: broken\ndata:\n  a: [unclosed\n",
		"apps/huge.yaml":                     "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: huge\ndata:\n  blob: " + strings.Repeat("x", 5<<20) + "\n",
		"apps/podinfo/anchored.yaml":         "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: anchored\ndata:\n  a: &shared one\n  b: *shared\n",
	}
	if _, err := gitSrv.PushCommit(e.repo, "main", testenv.Signature{Name: "Team", Email: "team@example.com"}, "untidy", untidy, nil); err != nil {
		t.Fatal(err)
	}
	maps.Copy(a.files, untidy)
	a.seen++
	a.applyAs("kustomize-controller", object(t, "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: anchored\n  namespace: "+e.ns+"\ndata:\n  a: one\n  b: one\n"))
	e.startManager()

	testenv.Eventually(t, time.Minute, "status.adopted names the problems", func() (bool, string) {
		got := e.adoptedStatus()
		want := []string{"apps/broken.yaml", "apps/huge.yaml", "copy-of-frontend.yaml (document 1), apps/podinfo/frontend.yml (document 1)"}
		for _, w := range want {
			if !slices.ContainsFunc(got.Problems, func(p string) bool { return strings.Contains(p, w) }) {
				return false, fmt.Sprintf("no problem mentions %q: %q", w, got.Problems)
			}
		}
		return true, ""
	})

	// The anchored document's object changes: not edited, and said why.
	a.patchAs("kubectl-edit", configMaps, "anchored", types.MergePatchType, `{"data":{"a":"two"}}`)
	// The claimed-twice Deployment changes: not written either.
	a.patchAs("kubectl-set", deployments, "frontend", types.StrategicMergePatchType,
		`{"spec":{"template":{"spec":{"containers":[{"name":"frontend","image":"gcr.io/heptio-images/ks-guestbook-demo:0.3"}]}}}}`)
	testenv.Eventually(t, time.Minute, "status.adopted names what was not written", func() (bool, string) {
		got := e.adoptedStatus()
		return len(got.Unwritten) == 2 && strings.Contains(got.Unwritten[0], "ConfigMap "+e.ns+"/anchored") &&
			strings.Contains(got.Unwritten[1], "Deployment.apps "+e.ns+"/frontend"), fmt.Sprintf("%q", got.Unwritten)
	})

	// Everything else goes on.
	const podinfo = "apps/podinfo/podinfo.yaml"
	a.patchAs("kubectl-set", deployments, "podinfo", types.StrategicMergePatchType,
		`{"spec":{"template":{"spec":{"containers":[{"name":"podinfo","image":"ghcr.io/stefanprodan/podinfo:6.6.0"}]}}}}`)
	a.expect(a.nextCommit(), map[string]*string{podinfo: a.edit(podinfo,
		"        image: ghcr.io/stefanprodan/podinfo:6.5.0 # pinned by the team\n",
		"        image: ghcr.io/stefanprodan/podinfo:6.6.0 # pinned by the team\n")})

	// A person renames the Service's file (moving its document into a file of its own).
	const service = "apps/podinfo/service.yaml"
	moved := strings.Index(a.files[podinfo], "---\napiVersion: v1\nkind: Service")
	rest := strings.Index(a.files[podinfo][moved+4:], "---\n") + moved + 4
	rename := map[string]string{service: a.files[podinfo][moved+4 : rest], podinfo: a.files[podinfo][:moved] + a.files[podinfo][rest:]}
	if _, err := gitSrv.PushCommit(e.repo, "main", testenv.Signature{Name: "Team", Email: "team@example.com"}, "the Service in its own file", rename, nil); err != nil {
		t.Fatal(err)
	}
	maps.Copy(a.files, rename)
	a.seen++
	a.patchAs("kubectl-label", services, "podinfo", types.MergePatchType, `{"metadata":{"labels":{"tier":"backend"}}}`)
	a.expect(a.nextCommit(), map[string]*string{service: a.edit(service, "  name: podinfo\n", "  name: podinfo\n  labels:\n    tier: backend\n")})
	a.expectRemote()
}

// TestAnEditItsKustomizationWouldUndoIsNotWritten: every commit under a kustomization is
// rendered first; a change the render would not show (the kustomization's images: decides the
// tag) is not written, and says where the field is decided, while other changes go on.
func TestAnEditItsKustomizationWouldUndoIsNotWritten(t *testing.T) {
	e := newEnv(t)
	a := adoptFixture(e, nil)
	const kustomization, podinfo = "apps/podinfo/kustomization.yaml", "apps/podinfo/podinfo.yaml"
	images := map[string]string{kustomization: a.files[kustomization] + "images:\n- name: ghcr.io/stefanprodan/podinfo\n  newTag: 6.5.0\n"}
	if _, err := gitSrv.PushCommit(e.repo, "main", testenv.Signature{Name: "Team", Email: "team@example.com"}, "pin the tag", images, nil); err != nil {
		t.Fatal(err)
	}
	maps.Copy(a.files, images)
	a.seen++
	e.startManager()

	a.patchAs("kubectl-set", deployments, "podinfo", types.StrategicMergePatchType,
		`{"spec":{"template":{"spec":{"containers":[{"name":"podinfo","image":"ghcr.io/stefanprodan/podinfo:6.6.0"}]}}}}`)
	testenv.Eventually(t, time.Minute, "status.adopted says why the image was not written", func() (bool, string) {
		got := e.adoptedStatus()
		return len(got.Unwritten) == 1 && strings.Contains(got.Unwritten[0], "Deployment.apps "+e.ns+"/podinfo") &&
				strings.Contains(got.Unwritten[0], kustomization+" renders spec.template.spec.containers[name=podinfo].image = ghcr.io/stefanprodan/podinfo:6.5.0"),
			fmt.Sprintf("%q", got.Unwritten)
	})
	a.patchAs("kubectl-edit", configMaps, "podinfo-config", types.MergePatchType, `{"data":{"LOG_LEVEL":"debug"}}`)
	a.expect(a.nextCommit(), map[string]*string{podinfo: a.edit(podinfo, "  LOG_LEVEL: info\n", "  LOG_LEVEL: debug\n")})
	a.expectRemote()
}

// TestAdoptedFolderFollowsNoLink: a symbolic link in the folder is never followed, read or
// written through: a link to a file outside the folder that holds a second document of an object
// does not make that object's document ambiguous, and the link stays as it was.
func TestAdoptedFolderFollowsNoLink(t *testing.T) {
	e := newEnv(t)
	a := adoptFixture(e, nil)
	dir := t.TempDir()
	testenv.MustGit(t, "clone", "-q", gitSrv.AuthURL(e.repo), dir)
	outside := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: podinfo-config\n  namespace: " + e.ns + "\ndata:\n  LOG_LEVEL: outside\n"
	if err := os.MkdirAll(filepath.Join(dir, "outside"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "outside", "cm.yaml"), []byte(outside), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../../outside/cm.yaml", filepath.Join(dir, "apps", "podinfo", "linked.yaml")); err != nil {
		t.Fatal(err)
	}
	// A link's blob is the path it points to, and a path may be any text, this one too.
	if err := os.Symlink(outside, filepath.Join(dir, "apps", "podinfo", "crafted.yaml")); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"add", "-A"}, {"-c", "user.name=Team", "-c", "user.email=team@example.com", "commit", "-q", "-m", "a link out"}, {"push", "-q", "origin", "HEAD:main"}} {
		testenv.MustGit(t, append([]string{"-C", dir}, args...)...)
	}
	a.files["outside/cm.yaml"], a.files["apps/podinfo/linked.yaml"], a.files["apps/podinfo/crafted.yaml"] = outside, "../../outside/cm.yaml", outside
	a.seen++
	e.startManager()

	const podinfo = "apps/podinfo/podinfo.yaml"
	a.patchAs("kubectl-edit", configMaps, "podinfo-config", types.MergePatchType, `{"data":{"LOG_LEVEL":"debug"}}`)
	a.expect(a.nextCommit(), map[string]*string{podinfo: a.edit(podinfo, "  LOG_LEVEL: info\n", "  LOG_LEVEL: debug\n")})
	if got := e.adoptedStatus(); len(got.Problems)+len(got.Unwritten) > 0 {
		t.Errorf("the link was read: %+v", got)
	}
	a.expectRemote()
}
