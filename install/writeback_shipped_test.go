package install

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/configbutler/gitops-reverser/crds"
	"github.com/configbutler/gitops-reverser/testenv"
)

// TestShippedWriteBackActsOnlyAsTheRulesServiceAccount runs the daemon as its own ServiceAccount
// (a real token, not impersonation, so that its own requests may impersonate) with exactly
// deploy/rbac.yaml and deploy/write-back-rbac.yaml, which grants it impersonate on serviceaccounts
// and no write right on ConfigMaps. team-a gives its ServiceAccount deployer a Role that may
// write ConfigMaps, and the annotation that lets the WatchRule team-a act as it. An edit pushed to
// Git is auto-applied, and every write the daemon made to team-a's ConfigMaps went out as deployer;
// the apiserver refused none of its requests.
func TestShippedWriteBackActsOnlyAsTheRulesServiceAccount(t *testing.T) {
	ctx := context.Background()
	admin := adminKubeconfig(t)
	kube := kubernetes.NewForConfigOrDie(cp.AdminConfig())
	srv := prepareInstall(t, kube, admin)
	kubectl(t, admin, nil, "apply", "-f", deployPath("write-back-rbac.yaml"))
	t.Cleanup(func() {
		kubectl(t, admin, nil, "delete", "--ignore-not-found", "-f", deployPath("write-back-rbac.yaml"))
	})
	waitAuthorized(t, authorizationv1.ResourceAttributes{Verb: "impersonate", Resource: "serviceaccounts", Namespace: workloadNamespace, Name: "deployer"})

	deployer := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "deployer", Namespace: workloadNamespace,
		Annotations: map[string]string{crds.AnnotationWatchRules: "team-a"}}}
	if _, err := kube.CoreV1().ServiceAccounts(workloadNamespace).Create(ctx, deployer, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = kube.CoreV1().ServiceAccounts(workloadNamespace).Delete(context.Background(), "deployer", metav1.DeleteOptions{})
	})
	if _, err := kube.RbacV1().RoleBindings(workloadNamespace).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "deployer"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "workload-editor"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "deployer", Namespace: workloadNamespace}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = kube.RbacV1().RoleBindings(workloadNamespace).Delete(context.Background(), "deployer", metav1.DeleteOptions{})
	})
	token, err := kube.CoreV1().ServiceAccounts(systemNamespace).CreateToken(ctx, "gitops-reverser",
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ref[int64](3600)}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}

	rec := startAPIRecorder(t)
	d := startShippedDaemonWith(t, rec, rec.tokenKubeconfig(t, token.Status.Token))
	d.WaitForStatus(t, "http://"+d.healthAddr+"/readyz", http.StatusOK)
	alice := kubernetes.NewForConfigOrDie(cp.UserConfig("alice"))
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "app-settings", Namespace: workloadNamespace}, Data: map[string]string{"mode": "blue"}}
	if _, err := alice.CoreV1().ConfigMaps(workloadNamespace).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The README's configuration, with write-back on: the destination auto-applies, and team-a's
	// rule names the ServiceAccount deployer.
	kubectl(t, admin, strings.NewReader(fmt.Sprintf(mirrorConfig, srv.RepoURL("state"))), "apply", "-f", "-")
	kubectl(t, admin, nil, "patch", "gitdestination", "prod", "-n", systemNamespace, "--type", "merge", "-p", `{"spec":{"writeBack":{"enabled":true,"autoApply":true}}}`)
	kubectl(t, admin, nil, "patch", "watchrule", "team-a", "-n", workloadNamespace, "--type", "merge", "-p", `{"spec":{"serviceAccountName":"deployer"}}`)
	file := "clusters/prod/" + workloadNamespace + "/configmaps/app-settings.yaml"
	dyn := dynamic.NewForConfigOrDie(cp.AdminConfig())
	syncs := 0
	syncNow := func() {
		t.Helper()
		syncs++
		if _, err := dyn.Resource(crds.GitDestinations).Namespace(systemNamespace).Patch(ctx, "prod", types.MergePatchType,
			[]byte(fmt.Sprintf(`{"metadata":{"annotations":{%q:"%d"}}}`, crds.AnnotationSyncNow, syncs)), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	testenv.Eventually(t, converge, "the ConfigMap mirrored and a write-back baseline", func() (bool, string) {
		syncNow() // a run before the mirror's first push finds no branch, and waits for its interval
		got, err := srv.ReadFile("state", "main", file)
		dest, derr := dyn.Resource(crds.GitDestinations).Namespace(systemNamespace).Get(ctx, "prod", metav1.GetOptions{})
		if err != nil || derr != nil {
			return false, fmt.Sprint(err, derr)
		}
		rev, _, _ := unstructured.NestedString(dest.Object, "status", "writeBack", "lastRevision")
		return strings.Contains(string(got), "mode: blue") && rev != "", "lastRevision " + rev
	}, d.FailFast())

	content, err := srv.ReadFile("state", "main", file)
	if err != nil {
		t.Fatal(err)
	}
	edited := strings.Replace(string(content), "mode: blue", "mode: green", 1)
	if _, err := srv.PushCommit("state", "main", testenv.Signature{Name: "Alice", Email: "alice@example.com"}, "green", map[string]string{file: edited}, nil); err != nil {
		t.Fatal(err)
	}
	syncNow()
	testenv.Eventually(t, converge, "the edit applied", func() (bool, string) {
		got, err := kube.CoreV1().ConfigMaps(workloadNamespace).Get(ctx, "app-settings", metav1.GetOptions{})
		return err == nil && got.Data["mode"] == "green", fmt.Sprint(got.Data, err)
	}, d.FailFast())

	writes := 0
	for _, r := range rec.recorded() {
		if r.resource != "configmaps" || r.namespace != workloadNamespace || r.verb == "get" || r.verb == "list" || r.verb == "watch" {
			continue
		}
		writes++
		if r.as != "system:serviceaccount:"+workloadNamespace+":deployer" {
			t.Errorf("the daemon made %s (%d) as %q, not as team-a's ServiceAccount deployer", r, r.status, r.as)
		}
	}
	if writes == 0 {
		t.Error("no write to team-a's ConfigMaps went through the daemon's connection")
	}
	for _, r := range rec.refused() {
		t.Errorf("the apiserver refused %s (as %q): %d", r, r.as, r.status)
	}
}
