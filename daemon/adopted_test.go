package daemon

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	"github.com/configbutler/gitops-reverser/crds"
	"github.com/configbutler/gitops-reverser/sops"
	"github.com/configbutler/gitops-reverser/testenv"
)

// TestAdoptedFolderWithAttributionAndSecrets runs the real daemon, its admission webhook called
// by the apiserver, on a team's folder (layout Existing): a person's kubectl edit of the replicas
// of a Deployment whose file leaves them out is written under that person's name, in the team's
// file, as one added line; and the team's SOPS file of a Secret is rewritten whole, encrypted for
// the destination's recipients, never with a value in plain text anywhere in the history.
func TestAdoptedFolderWithAttributionAndSecrets(t *testing.T) {
	cp := planes.Lend(t)
	ns := "adopted"
	srv, kube := mirrorSetup(t, ns)
	ctx := context.Background()
	dyn := dynamic.NewForConfigOrDie(cp.AdminConfig())
	grant(t, kube, ns, "alice")
	grantEdit(t, kube, ns, "secrets", "alice")
	grantRole(t, kube, cp, ns, "deployments-editor",
		rbacv1.PolicyRule{APIGroups: []string{"apps"}, Resources: []string{"deployments", "deployments/scale"}, Verbs: []string{"*"}}, "configmaps", "alice")
	writerAccount(t, kube, ns, "reader", "apps", []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"list", "watch"}},
		{APIGroups: []string{"apps"}, Resources: []string{"deployments"}, Verbs: []string{"list", "watch"}}})
	key, pusher := newAgeIdentity(t), newAgeIdentity(t)

	// The team's folder, with their SOPS file of the Secret, encrypted for the destination's key
	// and for a key of someone who may push to the repository but not read the Secret: the file
	// naming a recipient must not make the daemon encrypt for it.
	secret := "apiVersion: v1\nkind: Secret\nmetadata:\n  name: db\ntype: Opaque\ndata:\n  password: " + base64.StdEncoding.EncodeToString([]byte("first-horse-battery")) + "\n"
	sealed, err := sops.Encrypt([]byte(secret), []string{key.Recipient().String(), pusher.Recipient().String()}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	frontend := "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: frontend # the UI\nspec:\n  selector:\n    matchLabels:\n      app: frontend\n  template:\n    metadata:\n      labels:\n        app: frontend\n    spec:\n      containers:\n      - name: frontend\n        image: nginx:1.27\n"
	team := map[string]string{
		"apps/kustomization.yaml": "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nnamespace: " + ns + "\nresources:\n- frontend.yaml\n- db-secret.yaml\n",
		"apps/frontend.yaml":      frontend,
		"apps/db-secret.yaml":     string(sealed),
	}
	if _, err := srv.PushCommit("state", "main", testenv.Signature{Name: "Team", Email: "team@example.com"}, "the team's apps", team, nil); err != nil {
		t.Fatal(err)
	}
	deployment := &unstructured.Unstructured{}
	deployment.SetUnstructuredContent(map[string]any{"apiVersion": "apps/v1", "kind": "Deployment",
		"metadata": map[string]any{"name": "frontend", "namespace": ns},
		"spec": map[string]any{"selector": map[string]any{"matchLabels": map[string]any{"app": "frontend"}},
			"template": map[string]any{"metadata": map[string]any{"labels": map[string]any{"app": "frontend"}},
				"spec": map[string]any{"containers": []any{map[string]any{"name": "frontend", "image": "nginx:1.27"}}}}}})
	body, _ := deployment.MarshalJSON()
	deploymentsOf := dyn.Resource(schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}).Namespace(ns)
	if _, err := deploymentsOf.Patch(ctx, "frontend", types.ApplyPatchType, body, metav1.PatchOptions{FieldManager: "kustomize-controller"}); err != nil {
		t.Fatal(err)
	}
	if _, err := kube.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: ns},
		Data: map[string][]byte{"password": []byte("first-horse-battery")}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	readerRule(t, dyn, ns, "deployments", "secrets")
	setEncryption(t, dyn, ns, `{"spec":{"baseFolder":"apps","layout":"Existing","encryption":{"provider":"sops","age":{"recipients":["`+key.Recipient().String()+`"]}}}}`)

	d := startAttributingDaemon(t, "")
	waitRegistered(t, d, kube, ns)

	// alice sets the replicas with kubectl edit.
	alice := userClient(cp.UserConfig("alice"))
	testenv.Eventually(t, time.Minute, "alice edits frontend", func() (bool, string) {
		_, err := alice.AppsV1().Deployments(ns).Patch(ctx, "frontend", types.MergePatchType, []byte(`{"spec":{"replicas":3}}`),
			metav1.PatchOptions{FieldManager: "kubectl-edit"})
		return err == nil, fmt.Sprint(err)
	}, d.FailFast())
	want := frontend + "  replicas: 3\n"
	testenv.Eventually(t, time.Minute, "the scale in the team's file, by alice", func() (bool, string) {
		got, err := srv.ReadFile("state", "main", "apps/frontend.yaml")
		if err != nil || string(got) != want {
			return false, fmt.Sprintf("%s (%v)", got, err)
		}
		authors := commitsTouching(t, srv, "apps/frontend.yaml")
		return slices.Equal(authors, []string{"alice", "Team"}), fmt.Sprint(authors)
	}, d.FailFast())

	// alice rotates the password: the team's SOPS file is rewritten whole, for the recipients.
	patch := fmt.Appendf(nil, `{"data":{"password":%q}}`, base64.StdEncoding.EncodeToString([]byte("rotated-staple-secret")))
	if _, err := alice.CoreV1().Secrets(ns).Patch(ctx, "db", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, time.Minute, "the rotated Secret in the team's file", func() (bool, string) {
		got, err := decryptedData(t, srv, "apps/db-secret.yaml", key)
		return err == nil && string(got["password"]) == "rotated-staple-secret", fmt.Sprint(got, err)
	}, d.FailFast())
	doc, err := srv.ReadFile("state", "main", "apps/db-secret.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if r, err := sops.Recipients(doc); err != nil || !slices.Equal(r, []string{key.Recipient().String()}) {
		t.Errorf("recipients %v (%v), want the destination's", r, err)
	}
	if got, err := decryptedData(t, srv, "apps/db-secret.yaml", pusher); err == nil {
		t.Errorf("the recipient the file named reads the rotated Secret: %v", got)
	}
	history, err := srv.History("state", "main")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range history {
		for path, blob := range c.Files {
			for _, v := range []string{"first-horse-battery", "rotated-staple-secret"} {
				if bytes.Contains(blob, []byte(v)) || bytes.Contains(blob, []byte(base64.StdEncoding.EncodeToString([]byte(v)))) {
					t.Errorf("commit %s: %s holds a Secret value", c.SHA, path)
				}
			}
		}
	}
	if _, err := kube.CoreV1().Secrets(ns).Get(ctx, "db", metav1.GetOptions{}); apierrors.IsNotFound(err) {
		t.Fatal("the Secret is gone")
	}
	if strings.Contains(d.Output(), "rotated-staple") {
		t.Error("the daemon's log holds a Secret value")
	}
}

// TestAdoptedFolderDeliversByPullRequest: on a real Gitea whose main refuses every push, a
// person's change arrives in one pull request from the daemon's head branch, as that one line of
// the team's multi-document file, committed under the name of the person who made it.
func TestAdoptedFolderDeliversByPullRequest(t *testing.T) {
	planes.Lend(t)
	w := newGiteaWorld(t, "adopted-pr")
	grant(t, w.kube, w.ns, "alice")
	const file = "apps/settings.yaml"
	team := "# the team's settings\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\ndata:\n  mode: \"fast\" # tuned\n  size: small\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: other\ndata:\n  k: v\n"
	w.landOnMain(map[string]string{file: team, "apps/kustomization.yaml": "namespace: " + w.ns + "\nresources:\n- settings.yaml\n"})
	for _, name := range []string{"settings", "other"} {
		body := `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"` + name + `","namespace":"` + w.ns + `"},"data":{"mode":"fast","size":"small"}}`
		if name == "other" {
			body = `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"other","namespace":"` + w.ns + `"},"data":{"k":"v"}}`
		}
		if _, err := w.kube.CoreV1().ConfigMaps(w.ns).Patch(context.Background(), name, types.ApplyPatchType, []byte(body),
			metav1.PatchOptions{FieldManager: "kustomize-controller"}); err != nil {
			t.Fatal(err)
		}
	}
	setEncryption(t, w.dyn, w.ns, `{"spec":{"baseFolder":"apps","layout":"Existing"}}`)
	d := startDaemon(t, t.TempDir(), "--git-batch-quiet-ms", "200", "--pull-request-poll", "1s")
	waitRegistered(t, d, w.kube, w.ns)

	alice := userClient(planes.Of(t).UserConfig("alice"))
	if _, err := alice.CoreV1().ConfigMaps(w.ns).Patch(context.Background(), "settings", types.MergePatchType,
		[]byte(`{"data":{"mode":"safe"}}`), metav1.PatchOptions{FieldManager: "kubectl-edit"}); err != nil {
		t.Fatal(err)
	}
	want := strings.Replace(team, "  mode: \"fast\" # tuned\n", "  mode: \"safe\" # tuned\n", 1)
	testenv.Eventually(t, 2*time.Minute, "the edit in one request, by alice", func() (bool, string) {
		open := w.open()
		_, commits, ok := w.branch(w.head)
		if len(open) != 1 || !ok {
			return false, fmt.Sprintf("%d open", len(open))
		}
		got := w.run("show", "refs/remotes/origin/"+w.head+":"+file)
		return got+"\n" == want && strings.HasPrefix(commits[0], "alice: "), fmt.Sprintf("%s\ncommits %v", got, commits)
	}, d.FailFast())
	if mainFiles, _, _ := w.branch("main"); slices.Contains(mainFiles, "apps/settings-configmap.yaml") {
		t.Errorf("main holds a second copy: %v", mainFiles)
	}
}

// readerRule creates the WatchRule apps of namespace ns, for the destination dest and the
// ServiceAccount reader, selecting resources.
func readerRule(t testing.TB, dyn dynamic.Interface, ns string, resources ...string) {
	t.Helper()
	rule, err := crds.ToUnstructured(&crds.WatchRule{ObjectMeta: metav1.ObjectMeta{Name: "apps", Namespace: ns},
		Spec: crds.WatchRuleSpec{DestinationRef: crds.NamespacedReference{Name: "dest"}, ServiceAccountName: "reader",
			Rules: []crds.ResourceRule{{Resources: resources}}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dyn.Resource(crds.WatchRules).Namespace(ns).Create(context.Background(), rule, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}
