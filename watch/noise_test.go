package watch

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/configbutler/gitops-reverser/crds"
	"github.com/configbutler/gitops-reverser/testenv"
)

// rule applies the test's WatchRule "noise" with one rule.
func (e *env) rule(r crds.ResourceRule) {
	e.t.Helper()
	e.apply(crds.WatchRules, &crds.WatchRule{ObjectMeta: metav1.ObjectMeta{Name: "noise", Namespace: e.ns},
		Spec: crds.WatchRuleSpec{DestinationRef: crds.NamespacedReference{Name: "dest"}, Rules: []crds.ResourceRule{r}}})
}

// skipped reads the destination's status.skipped.
func (e *env) skipped() map[string]int64 {
	e.t.Helper()
	u, err := e.dyn.Resource(crds.GitDestinations).Namespace(e.ns).Get(e.ctx, "dest", metav1.GetOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	list, _, _ := unstructured.NestedSlice(u.Object, "status", "skipped")
	out := map[string]int64{}
	for _, item := range list {
		m := item.(map[string]any)
		n, _ := m["count"].(int64)
		out[fmt.Sprint(m["reason"])] = n
	}
	return out
}

func (e *env) serviceAccount(name string) {
	e.t.Helper()
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.ns}}
	if _, err := e.kube.CoreV1().ServiceAccounts(e.ns).Create(e.ctx, sa, metav1.CreateOptions{}); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) saPath(name string) string { return e.ns + "/serviceaccounts/" + name + ".yaml" }

// TestGeneratedObjectsAreLeftOutUnlessKept: kube-root-ca.crt, a namespace's default
// ServiceAccount, an object with a controller ownerReference and what the daemon makes for itself
// (labelled managed-by gitops-reverser) are not mirrored, and the
// destination's status counts them; the same kinds without those marks are. keepGenerated on
// the rule mirrors them too.
func TestGeneratedObjectsAreLeftOutUnlessKept(t *testing.T) {
	e := newEnv(t)
	e.configMap("kube-root-ca.crt", map[string]string{"ca.crt": "x"})
	e.configMap("plain", map[string]string{"k": "v"})
	e.serviceAccount("default")
	e.serviceAccount("app")
	owned := configMapIn(e.ns, "owned")
	owned.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web-5d9f", UID: types.UID("uid-1"), Controller: new(true)}}
	e.create(owned)
	referenced := configMapIn(e.ns, "referenced") // an owner, but not a controller: declared by someone
	referenced.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: "plain", UID: types.UID("uid-2")}}
	e.create(referenced)
	daemons := configMapIn(e.ns, "gitops-reverser-sops-digest") // the daemon's own keys
	daemons.Labels = map[string]string{"app.kubernetes.io/managed-by": "gitops-reverser"}
	e.create(daemons)
	e.rule(crds.ResourceRule{Resources: []string{"configmaps", "serviceaccounts"}})
	e.startManager()

	e.waitFiles(e.cmPath("plain"), e.cmPath("referenced"), e.saPath("app"))
	testenv.Eventually(t, time.Minute, "status.skipped", func() (bool, string) {
		got := e.skipped()
		return got[crds.SkipReasonKubeRootCA] == 1 && got[crds.SkipReasonDefaultServiceAccount] == 1 && got[crds.SkipReasonControllerOwned] == 1 &&
			got[crds.SkipReasonDaemonsOwn] == 1, fmt.Sprint(got)
	})

	e.rule(crds.ResourceRule{Resources: []string{"configmaps", "serviceaccounts"}, KeepGenerated: true})
	e.waitFiles(e.cmPath("plain"), e.cmPath("referenced"), e.saPath("app"), e.cmPath("kube-root-ca.crt"), e.cmPath("owned"), e.saPath("default"),
		e.cmPath("gitops-reverser-sops-digest"))
	testenv.Eventually(t, time.Minute, "status.skipped cleared", func() (bool, string) {
		got := e.skipped()
		return len(got) == 0, fmt.Sprint(got)
	})
}

// TestChangesOfExcludedFieldManagersAreNotCommitted: an update made through a field manager the
// rule excludes makes no commit (the file keeps the content before it) and is counted; the next
// update through another manager is committed, with the cluster's whole state.
func TestChangesOfExcludedFieldManagersAreNotCommitted(t *testing.T) {
	e := newEnv(t)
	e.configMap("app", map[string]string{"color": "blue"})
	e.configMap("marker", map[string]string{"count": "0"})
	e.rule(crds.ResourceRule{Resources: []string{"configmaps"}, ExcludeFieldManagers: []string{"kustomize-controller", "helm*"}})
	e.startManager()
	e.waitFiles(e.cmPath("app"), e.cmPath("marker"))
	before := len(e.log())

	update := func(name, manager, key, value string) {
		t.Helper()
		patch := fmt.Sprintf(`{"data":{%q:%q}}`, key, value)
		if _, err := e.kube.CoreV1().ConfigMaps(e.ns).Patch(e.ctx, name, types.MergePatchType, []byte(patch),
			metav1.PatchOptions{FieldManager: manager}); err != nil {
			t.Fatal(err)
		}
	}
	// managedFields are stamped to the second: an update in the same second as the create counts
	// as made by both managers, so the test waits for the apiserver's next second.
	cm, err := e.kube.CoreV1().ConfigMaps(e.ns).Get(e.ctx, "app", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	created := cm.CreationTimestamp.Time
	testenv.Eventually(t, 5*time.Second, "a second after the create", func() (bool, string) {
		return time.Now().Truncate(time.Second).After(created), created.String()
	})
	update("app", "kustomize-controller", "color", "green")
	update("app", "helm-controller", "size", "large")
	// One watcher sees the ConfigMaps in order: once the marker's change is in Git, the two
	// changes before it were handled.
	update("marker", "kubectl-edit", "count", "1")
	testenv.Eventually(t, time.Minute, "the marker committed", func() (bool, string) {
		got := e.remoteContent(e.cmPath("marker"))
		return strings.Contains(got, "count: \"1\""), got
	})
	if got := e.remoteContent(e.cmPath("app")); !strings.Contains(got, "color: blue") || strings.Contains(got, "large") {
		t.Fatalf("the excluded managers' changes were committed:\n%s", got)
	}
	if got := len(e.log()) - before; got != 1 {
		t.Errorf("%d commits after the excluded changes and the marker, want 1 (the marker's)", got)
	}
	if got := e.reg.Mirror.ChangesSkipped.WithLabelValues(crds.SkipReasonExcludedFieldManager); testutil.ToFloat64(got) != 2 {
		t.Errorf("changes_skipped_total{ExcludedFieldManager} = %v, want 2", testutil.ToFloat64(got))
	}
	testenv.Eventually(t, time.Minute, "status.skipped", func() (bool, string) {
		got := e.skipped()
		return got[crds.SkipReasonExcludedFieldManager] == 2, fmt.Sprint(got)
	})

	update("app", "kubectl-edit", "owner", "alice")
	testenv.Eventually(t, time.Minute, "a change by another manager committed, with the cluster's whole state", func() (bool, string) {
		got := e.remoteContent(e.cmPath("app"))
		return strings.Contains(got, "owner: alice") && strings.Contains(got, "color: green") && strings.Contains(got, "size: large"), got
	})
}

// TestBootstrapRBACIsLeftOutOfAClusterScopeRule: a ClusterWatchRule over cluster-scoped RBAC
// mirrors a team's ClusterRole but none of the apiserver's own, which it marks autoupdate.
func TestBootstrapRBACIsLeftOutOfAClusterScopeRule(t *testing.T) {
	e := newEnv(t)
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: e.ns + "-reader"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get"}}}}
	if _, err := e.kube.RbacV1().ClusterRoles().Create(e.ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.kube.RbacV1().ClusterRoles().Delete(e.ctx, role.Name, metav1.DeleteOptions{}) })
	e.apply(crds.ClusterWatchRules, &crds.ClusterWatchRule{ObjectMeta: metav1.ObjectMeta{Name: e.ns + "-rbac"},
		Spec: crds.ClusterWatchRuleSpec{DestinationRef: crds.NamespacedReference{Name: "dest", Namespace: e.ns},
			Rules: []crds.ClusterResourceRule{{Scope: crds.ScopeCluster,
				ResourceRule: crds.ResourceRule{APIGroups: []string{"rbac.authorization.k8s.io"}, Resources: []string{"clusterroles"}}}}}})
	e.startManager()
	mine := "_cluster/clusterroles.rbac.authorization.k8s.io/" + role.Name + ".yaml"
	testenv.Eventually(t, time.Minute, "the team's ClusterRole mirrored", func() (bool, string) {
		files := e.files()
		return slices.Contains(files, mine), fmt.Sprint(files)
	})
	boot, err := e.kube.RbacV1().ClusterRoles().List(e.ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	files := e.files()
	var autoUpdated int
	for _, r := range boot.Items {
		if r.Annotations[annotationAutoUpdate] != "true" {
			continue
		}
		autoUpdated++
		if slices.Contains(files, "_cluster/clusterroles.rbac.authorization.k8s.io/"+r.Name+".yaml") {
			t.Errorf("the bootstrap ClusterRole %s is mirrored", r.Name)
		}
	}
	if autoUpdated == 0 {
		t.Fatal("the apiserver made no autoupdate ClusterRole: the test proves nothing")
	}
	testenv.Eventually(t, time.Minute, "status.skipped", func() (bool, string) {
		got := e.skipped()
		return got[crds.SkipReasonAutoUpdatedRBAC] == int64(autoUpdated), fmt.Sprintf("%v, want %d AutoUpdatedRBAC", got, autoUpdated)
	})
}
