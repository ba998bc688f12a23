package daemon

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	"github.com/configbutler/gitops-reverser/testenv"
)

// overlayBase and overlayProduction are a base and its production overlay, as a team running
// Flux keeps them (apps/base/web, apps/production).
const overlayBase = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  replicas: 1
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      containers:
        - name: web
          image: nginx:1.27.0
`

func overlayProduction(ns string) string {
	return "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nnamespace: " + ns + `
resources:
  - ../base/web
images:
  - name: nginx
    newTag: 1.27.1 # production's pin
`
}

// TestOverlayChangeIsCommittedUnderThePersonsName runs the real daemon, its admission webhook
// called by the apiserver, on a destination that points at a production overlay: alice's
// kubectl set image of the Deployment is one commit under her name that changes the overlay's
// images: entry, that one line, and nothing else in the repository.
func TestOverlayChangeIsCommittedUnderThePersonsName(t *testing.T) {
	cp := planes.Lend(t)
	ns := "overlay"
	srv, kube := mirrorSetup(t, ns)
	ctx := context.Background()
	dyn := dynamic.NewForConfigOrDie(cp.AdminConfig())
	grant(t, kube, ns, "alice")
	grantRole(t, kube, cp, ns, "deployments-editor",
		rbacv1.PolicyRule{APIGroups: []string{"apps"}, Resources: []string{"deployments"}, Verbs: []string{"*"}}, "configmaps", "alice")
	writerAccount(t, kube, ns, "reader", "apps", []rbacv1.PolicyRule{{APIGroups: []string{"apps"}, Resources: []string{"deployments"}, Verbs: []string{"list", "watch"}}})
	team := map[string]string{
		"apps/base/web/kustomization.yaml":   "resources:\n  - deployment.yaml\n",
		"apps/base/web/deployment.yaml":      overlayBase,
		"apps/production/kustomization.yaml": overlayProduction(ns),
	}
	if _, err := srv.PushCommit("state", "main", testenv.Signature{Name: "Team", Email: "team@example.com"}, "the team's apps", team, nil); err != nil {
		t.Fatal(err)
	}
	applyRender(t, dyn, team, "apps/production")
	readerRule(t, dyn, ns, "deployments")
	setEncryption(t, dyn, ns, `{"spec":{"baseFolder":"apps","layout":"Existing","existing":{"kustomization":"production"}}}`)

	d := startAttributingDaemon(t, "")
	waitRegistered(t, d, kube, ns)
	alice := userClient(cp.UserConfig("alice"))
	testenv.Eventually(t, time.Minute, "alice sets the image", func() (bool, string) {
		_, err := alice.AppsV1().Deployments(ns).Patch(ctx, "web", types.StrategicMergePatchType,
			[]byte(`{"spec":{"template":{"spec":{"containers":[{"name":"web","image":"nginx:1.27.2"}]}}}}`), metav1.PatchOptions{FieldManager: "kubectl-set"})
		return err == nil, fmt.Sprint(err)
	}, d.FailFast())

	// Alice's commit changes the one line of the images: entry, and nothing else. (The probes
	// waitRegistered creates are new ConfigMaps of the namespace: they land in the overlay too,
	// each in a commit of its own.)
	const kust = "apps/production/kustomization.yaml"
	const pin, repinned = "    newTag: 1.27.1 # production's pin\n", "    newTag: 1.27.2 # production's pin\n"
	testenv.Eventually(t, time.Minute, "alice's commit of the image in production's images:", func() (bool, string) {
		history, err := srv.History("state", "main")
		if err != nil {
			return false, err.Error()
		}
		for i, c := range history {
			if c.AuthorName != "alice" {
				continue
			}
			if files := slices.Sorted(maps.Keys(c.Files)); !slices.Equal(files, []string{kust}) {
				t.Fatalf("alice's commit changed %v, want only %s", files, kust)
			}
			before := previousVersion(history[i+1:], kust)
			if want := strings.Replace(before, pin, repinned, 1); before == want || string(c.Files[kust]) != want {
				t.Fatalf("alice's commit made %s\n%s\nfrom\n%s", kust, c.Files[kust], before)
			}
			return true, ""
		}
		return false, fmt.Sprintf("%d commits, none by alice", len(history))
	}, d.FailFast())
	for _, p := range []string{"apps/base/web/deployment.yaml", "apps/base/web/kustomization.yaml"} {
		if got, _ := srv.ReadFile("state", "main", p); string(got) != team[p] {
			t.Errorf("the base %s changed:\n%s", p, got)
		}
	}
}

// previousVersion is path as the newest of older, commits newest first, that changed it left it.
func previousVersion(older []testenv.CommitChanges, path string) string {
	for _, c := range older {
		if data, ok := c.Files[path]; ok {
			return string(data)
		}
	}
	return ""
}
