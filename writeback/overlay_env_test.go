package writeback

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/configbutler/gitops-reverser/crds"
	"github.com/configbutler/gitops-reverser/placement"
	"github.com/configbutler/gitops-reverser/testenv"
)

// The overlay the overlay tests start from (testdata/overlay): podinfo's base in apps/base/podinfo,
// and production's overlay over it, which gives it its namespace, its image tag, two replicas and
// a colour (a patch).
const (
	overlayDirPath = "apps/production"
	overlayKust    = "apps/production/kustomization.yaml"
	overlayPatch   = "apps/production/podinfo-patch.yaml"
	overlayBase    = "apps/base/podinfo/deployment.yaml"
)

// overlayEnv is an adopted write-back destination on the folder apps that renders the overlay
// apps/production (spec.existing.kustomization), whose rules select Deployments in the test's
// namespace, written back as the ServiceAccount writer of that namespace; carol approves. The
// cluster holds what the overlay renders, as the team's GitOps applier left it.
type overlayEnv struct {
	*adoptedEnv
	files map[string]string // the repository as the test started it, the overlay's namespace the test's
}

// newOverlayEnv sets the overlay and its live objects up, with writer's Role holding rules and
// the rules selecting the labels labels selects (nil: every one), and starts the controller once
// its first run took the repository as its baseline.
func newOverlayEnv(t *testing.T, autoApply bool, rules []rbacv1.PolicyRule, labels func(string, map[string]string) bool) *overlayEnv {
	t.Helper()
	r := &runsEnv{wbEnv: newWBEnv(t, &crds.WriteBack{Enabled: true, AutoApply: autoApply}), clock: testenv.NewClock(time.Now())}
	e := &overlayEnv{adoptedEnv: &adoptedEnv{runsEnv: r}}
	e.patch(crds.GitDestinations, e.ns, "dest", `{"spec":{"layout":"Existing","baseFolder":"apps","existing":{"kustomization":"production"}}}`)
	e.bind("writer", "system:serviceaccount:"+e.ns+":writer", rules)
	e.bind("carol", "carol", []rbacv1.PolicyRule{{APIGroups: []string{"apps"}, Resources: []string{"deployments"},
		Verbs: []string{"get", "create", "patch", "delete"}}})
	e.files = overlayFixture(t, e.ns)
	for _, doc := range e.rendered(e.files) {
		e.createDoc(e.ns, doc)
	}
	base := r.push(true, e.files)
	e.startController(base, func(writer []Writer) []Selection {
		return []Selection{{GVR: deployments, Kind: "Deployment", Namespaced: true, Namespace: e.ns, Labels: labels, Writers: writer}}
	})
	return e
}

// overlayFixture reads testdata/overlay, production's namespace made ns.
func overlayFixture(t *testing.T, ns string) map[string]string {
	t.Helper()
	files := map[string]string{}
	root := os.DirFS("testdata/overlay")
	err := fs.WalkDir(root, ".", func(p string, de fs.DirEntry, err error) error {
		if err != nil || de.IsDir() {
			return err
		}
		data, err := fs.ReadFile(root, p)
		files[p] = string(data)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	files[overlayKust] = strings.Replace(files[overlayKust], "namespace: production\n", "namespace: "+ns+"\n", 1)
	return files
}

// rendered is what the overlay renders of files, a document per object.
func (e *overlayEnv) rendered(files map[string]string) []string {
	e.t.Helper()
	in := map[string][]byte{}
	for p, s := range files {
		in[p] = []byte(s)
	}
	objs, err := placement.Build(in, overlayDirPath)
	if err != nil {
		e.t.Fatalf("render the fixture: %v", err)
	}
	var docs []string
	for _, k := range sortedKeys(objs) {
		doc, err := placement.Render(objs[k])
		if err != nil {
			e.t.Fatal(err)
		}
		docs = append(docs, string(doc))
	}
	return docs
}

// edit is the file p of the fixture with old replaced by new, once; the test fails when the
// fixture has no old.
func (e *overlayEnv) edit(p, old, new string) string {
	e.t.Helper()
	if !strings.Contains(e.files[p], old) {
		e.t.Fatalf("%s has no %q", p, old)
	}
	return strings.Replace(e.files[p], old, new, 1)
}

// bindIn gives the ServiceAccount writer rules in namespace ns too, and waits until the
// authorizer counts them: what it may do there is the Role's to say, not the rules'.
func (e *overlayEnv) bindIn(ns string, rules []rbacv1.PolicyRule) {
	e.t.Helper()
	ctx := context.Background()
	if _, err := e.kube.RbacV1().Roles(ns).Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "writer"}, Rules: rules}, metav1.CreateOptions{}); err != nil {
		e.t.Fatal(err)
	}
	if _, err := e.kube.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "writer"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "writer"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "writer", Namespace: e.ns}}}, metav1.CreateOptions{}); err != nil {
		e.t.Fatal(err)
	}
}

// containerOf is the first container of a Deployment's object.
func containerOf(t *testing.T, obj map[string]any) map[string]any {
	t.Helper()
	containers, _, _ := unstructured.NestedSlice(obj, "spec", "template", "spec", "containers")
	if len(containers) == 0 {
		t.Fatalf("no containers in %v", obj)
	}
	return containers[0].(map[string]any)
}

// documentObject reads a proposal's desired document as an object.
func documentObject(t *testing.T, text string) map[string]any {
	t.Helper()
	doc, err := ParseDocument([]byte(text))
	if err != nil {
		t.Fatalf("the desired document does not parse: %v\n%s", err, text)
	}
	return doc.Object.Object
}

// colourOf is the PODINFO_UI_COLOR of a container; "" when it has none.
func colourOf(c map[string]any) string {
	env, _ := c["env"].([]any)
	for _, v := range env {
		if m, _ := v.(map[string]any); m["name"] == "PODINFO_UI_COLOR" {
			s, _ := m["value"].(string)
			return s
		}
	}
	return ""
}

// changedLines is the lines a unified diff removes or adds, its headers aside.
func changedLines(diff string) []string {
	var out []string
	for _, l := range strings.Split(diff, "\n") {
		if (strings.HasPrefix(l, "-") || strings.HasPrefix(l, "+")) && !strings.HasPrefix(l, "---") && !strings.HasPrefix(l, "+++") {
			out = append(out, l)
		}
	}
	return out
}

// describe names proposals for a message: change, target and phase.
func describe(all []*crds.Proposal) []string {
	out := make([]string, 0, len(all))
	for _, p := range all {
		out = append(out, fmt.Sprintf("%s %s (%s)", p.Spec.Change, targetName(p.Spec.Target), p.Status.Phase))
	}
	return out
}
