package daemon

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/configbutler/gitops-reverser/crds"
	"github.com/configbutler/gitops-reverser/layout"
	"github.com/configbutler/gitops-reverser/testenv"
	"github.com/configbutler/gitops-reverser/writeback"
)

// heist is mallory's namespace team-m and her files: she holds one Role there (read ConfigMaps,
// Deployments and RoleBindings; every verb on the configbutler.ai kinds) and points an
// auto-applying destination of her own at a repository she pushes to.
type heist struct {
	*wbWorld
	admin *kubernetes.Clientset
}

const heistNS = "team-m"

// newHeist sets team-m up as the attack found it: a ConfigMap settings, a Deployment app, a
// ServiceAccount powerful that is admin of the namespace (and never agreed to act for a rule), a
// ServiceAccount reader that may only read and agreed to act for mallory's rule, and mallory's
// repository, destination (writeBack enabled, autoApply) and WatchRule loot, naming no
// ServiceAccount; then the daemon, with its defaults.
func newHeist(t *testing.T) *heist {
	cp := planes.Of(t)
	ctx := context.Background()
	admin := kubernetes.NewForConfigOrDie(cp.AdminConfig())
	srv := testenv.MustGitServer(t, "mallory", "pw", "state")
	if err := crds.Install(ctx, cp.AdminConfig(), discardLogger()); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: heistNS}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	read := []string{"get", "list", "watch"}
	bindRole(t, admin, heistNS, "mallory", []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: read},
		{APIGroups: []string{"apps"}, Resources: []string{"deployments"}, Verbs: read},
		{APIGroups: []string{rbacv1.GroupName}, Resources: []string{"rolebindings"}, Verbs: read},
		{APIGroups: []string{crds.Group}, Resources: []string{"*"}, Verbs: []string{"*"}},
	}, "mallory")
	writerAccount(t, admin, heistNS, "reader", "loot", []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: read},
		{APIGroups: []string{"apps"}, Resources: []string{"deployments"}, Verbs: read},
		{APIGroups: []string{rbacv1.GroupName}, Resources: []string{"rolebindings"}, Verbs: read},
	})
	if _, err := admin.CoreV1().ServiceAccounts(heistNS).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "powerful"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.RbacV1().RoleBindings(heistNS).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "powerful-admin"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "admin"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "powerful", Namespace: heistNS}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The repository's credentials: her platform team gave her this Secret (she may not create one).
	if _, err := admin.CoreV1().Secrets(heistNS).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "git"},
		StringData: map[string]string{"username": "mallory", "password": "pw"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for name, mode := range map[string]string{"settings": "safe", "seed": "seed"} { // seed: what waitBaseline waits for
		if _, err := admin.CoreV1().ConfigMaps(heistNS).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name},
			Data: map[string]string{"mode": mode}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := admin.AppsV1().Deployments(heistNS).Create(ctx, heistDeployment("app", "registry.example/app:1", ""), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	mallory := dynamic.NewForConfigOrDie(cp.ImpersonatingConfig("mallory", testenv.Users["mallory"]...))
	testenv.Eventually(t, time.Minute, "mallory's Role in force", func() (bool, string) {
		_, err := mallory.Resource(crds.WatchRules).Namespace(heistNS).List(ctx, metav1.ListOptions{Limit: 1})
		return err == nil, fmt.Sprint(err)
	})
	h := &heist{admin: admin, wbWorld: &wbWorld{t: t, root: t, ns: heistNS, srv: srv, kube: admin,
		dyn: dynamic.NewForConfigOrDie(cp.AdminConfig()), sync: new(int)}}
	h.as(mallory, crds.GitRepoConfigs, &crds.GitRepoConfig{ObjectMeta: metav1.ObjectMeta{Name: "repo"},
		Spec: crds.GitRepoConfigSpec{RepoURL: srv.RepoURL("state"), AllowedBranches: []string{"main"}, SecretRef: &crds.LocalReference{Name: "git"}}})
	h.as(mallory, crds.GitDestinations, &crds.GitDestination{ObjectMeta: metav1.ObjectMeta{Name: "dest"},
		Spec: crds.GitDestinationSpec{RepoRef: crds.NamespacedReference{Name: "repo"}, Branch: "main", BaseFolder: "live",
			WriteBack: &crds.WriteBack{Enabled: true, AutoApply: true}}})
	h.as(mallory, crds.WatchRules, &crds.WatchRule{ObjectMeta: metav1.ObjectMeta{Name: "loot"},
		Spec: crds.WatchRuleSpec{DestinationRef: crds.NamespacedReference{Name: "dest"}, Rules: []crds.ResourceRule{
			{Resources: []string{"configmaps"}},
			{APIGroups: []string{"apps"}, Resources: []string{"deployments"}},
			{APIGroups: []string{rbacv1.GroupName}, Resources: []string{"rolebindings"}},
		}}})
	t.Cleanup(func() {
		_ = h.dyn.Resource(crds.Proposals).Namespace(heistNS).DeleteCollection(context.Background(), metav1.DeleteOptions{}, metav1.ListOptions{})
	})
	h.d = startDaemon(t, t.TempDir(), "--git-batch-quiet-ms", "200")
	h.waitBaseline(true)
	return h
}

// as creates one of our objects as the user behind client.
func (h *heist) as(client dynamic.Interface, gvr schema.GroupVersionResource, obj any) {
	h.t.Helper()
	u, err := crds.ToUnstructured(obj)
	if err != nil {
		h.t.Fatal(err)
	}
	if _, err := client.Resource(gvr).Namespace(h.ns).Create(context.Background(), u, metav1.CreateOptions{}); err != nil {
		h.t.Fatalf("create %s: %v", gvr.Resource, err)
	}
}

func heistDeployment(name, image, serviceAccount string) *appsv1.Deployment {
	labels := map[string]string{"app": name}
	return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: heistNS},
		Spec: appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{ServiceAccountName: serviceAccount, Containers: []corev1.Container{{Name: "main", Image: image}}}}}}
}

// path is where the mirror keeps an object of resource (group-qualified) in team-m.
func (h *heist) path(resource, name string) string {
	group := ""
	if g, r, ok := strings.Cut(resource, "."); ok {
		resource, group = g, r
	}
	return layout.Path("live", group, resource, heistNS, name)
}

// loot is what mallory pushes, file by file: an edit of settings, a new ConfigMap, a new
// Deployment whose Pods run as powerful, an image change of app, and a RoleBinding of herself to
// cluster-admin.
func (h *heist) loot() map[string]string {
	h.t.Helper()
	for _, f := range []string{h.path("configmaps", "settings"), h.path("deployments.apps", "app")} {
		testenv.Eventually(h.t, time.Minute, f+" mirrored", remoteHas(h.srv, f), h.d.FailFast())
	}
	return map[string]string{
		h.path("configmaps", "settings"): h.replace(h.remote(h.path("configmaps", "settings")), "mode: safe", "mode: owned"),
		h.path("configmaps", "planted"):  "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: planted\n  namespace: " + heistNS + "\ndata:\n  k: v\n",
		h.path("deployments.apps", "sneaky"): "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: sneaky\n  namespace: " + heistNS + "\nspec:\n" +
			"  selector:\n    matchLabels:\n      app: sneaky\n  template:\n    metadata:\n      labels:\n        app: sneaky\n" +
			"    spec:\n      serviceAccountName: powerful\n      containers:\n      - name: main\n        image: registry.example/evil:1\n",
		h.path("deployments.apps", "app"): h.replace(h.remote(h.path("deployments.apps", "app")), "registry.example/app:1", "registry.example/evil:1"),
		h.path("rolebindings.rbac.authorization.k8s.io", "mallory-admin"): "apiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\n" +
			"metadata:\n  name: mallory-admin\n  namespace: " + heistNS + "\nroleRef:\n  apiGroup: rbac.authorization.k8s.io\n  kind: ClusterRole\n" +
			"  name: cluster-admin\nsubjects:\n- apiGroup: rbac.authorization.k8s.io\n  kind: User\n  name: mallory\n",
	}
}

// untouched fails the test when anything mallory pushed reached the cluster: settings still says
// mode.
func (h *heist) untouched(mode string) {
	h.t.Helper()
	ctx := context.Background()
	if cm, err := h.admin.CoreV1().ConfigMaps(heistNS).Get(ctx, "settings", metav1.GetOptions{}); err != nil || cm.Data["mode"] != mode {
		h.t.Errorf("settings: %v (%v), want mode %s", cm.Data, err, mode)
	}
	if _, err := h.admin.CoreV1().ConfigMaps(heistNS).Get(ctx, "planted", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		h.t.Errorf("ConfigMap planted exists (%v)", err)
	}
	if _, err := h.admin.AppsV1().Deployments(heistNS).Get(ctx, "sneaky", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		h.t.Errorf("Deployment sneaky exists (%v)", err)
	}
	if d, err := h.admin.AppsV1().Deployments(heistNS).Get(ctx, "app", metav1.GetOptions{}); err != nil || d.Spec.Template.Spec.Containers[0].Image != "registry.example/app:1" {
		h.t.Errorf("Deployment app: %v", err)
		if err == nil {
			h.t.Errorf("Deployment app runs %s", d.Spec.Template.Spec.Containers[0].Image)
		}
	}
	if _, err := h.admin.RbacV1().RoleBindings(heistNS).Get(ctx, "mallory-admin", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		h.t.Errorf("RoleBinding mallory-admin exists (%v)", err)
	}
	review := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{User: "mallory", Groups: testenv.Users["mallory"],
		ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: heistNS, Verb: "create", Resource: "secrets"}}}
	if got, err := h.admin.AuthorizationV1().SubjectAccessReviews().Create(ctx, review, metav1.CreateOptions{}); err != nil || got.Status.Allowed {
		h.t.Errorf("may mallory create secrets in %s: %+v (%v)", heistNS, got.Status, err)
	}
}

// waitAll waits until every file of files has a proposal whose Applied condition has reason.
func (h *heist) waitAll(files map[string]string, reason string) map[string]*crds.Proposal {
	h.t.Helper()
	out := map[string]*crds.Proposal{}
	for path := range files {
		out[path] = h.waitProposal(path, path+" "+reason, func(p *crds.Proposal) bool {
			c := conditionOf(p, crds.ConditionApplied)
			return p.Status.Phase == crds.PhasePending && c != nil && c.Reason == reason
		})
	}
	return out
}

// TestWriteBackWritesAsTheRulesServiceAccount plays the attack of issue 47 through. On main every
// step of it was applied with the daemon's own rights. Now:
//   - mallory's rule names no ServiceAccount: her five files become proposals that wait
//     (NoServiceAccount), the destination's WritesAs condition says what to add, nothing changes;
//   - she names powerful, a namespace admin that never agreed: her rule is refused for reads
//     (ServiceAccountConsentMissing) and nothing is written;
//   - she names reader, which agreed but may only read: the apiserver refuses every apply as
//     reader (Forbidden), nothing changes, and she still may not create Secrets;
//   - reader is granted patch on ConfigMaps: her next edit of settings is auto-applied (rights
//     count at the next apply), credited to the Git author;
//   - carol, who may create RoleBindings but not bind cluster-admin, approves mallory-admin: refused;
//     dave, who may bind cluster-admin in team-m, approves it: the apiserver refuses it as reader,
//     who may create RoleBindings but not bind cluster-admin; an approval within both carol's and
//     reader's rights (the ConfigMap planted) is applied.
func TestWriteBackWritesAsTheRulesServiceAccount(t *testing.T) {
	cp := planes.Lend(t)
	h := newHeist(t)
	ctx := context.Background()
	mallory := dynamic.NewForConfigOrDie(cp.ImpersonatingConfig("mallory", testenv.Users["mallory"]...))

	loot := h.loot()
	h.edit(loot)
	h.syncNow()
	h.waitAll(loot, writeback.ReasonNoServiceAccount)
	writesAs := meta.FindStatusCondition(h.destStatus().Conditions, writeback.ConditionWritesAs)
	if writesAs == nil || writesAs.Status != metav1.ConditionFalse || !strings.Contains(writesAs.Message, "spec.serviceAccountName") ||
		!strings.Contains(writesAs.Message, crds.AnnotationWatchRules+"=loot") {
		t.Errorf("WritesAs condition %+v does not say what to add", writesAs)
	}
	h.untouched("safe")

	rename := func(sa string) {
		t.Helper()
		if _, err := mallory.Resource(crds.WatchRules).Namespace(heistNS).Patch(ctx, "loot", types.MergePatchType,
			[]byte(`{"spec":{"serviceAccountName":"`+sa+`"}}`), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	rename("powerful")
	msg := waitReadyReason(t, h.d, crds.WatchRules, heistNS, "loot", "ServiceAccountConsentMissing")
	if !strings.Contains(msg, crds.AnnotationWatchRules) {
		t.Errorf("the refusal does not name the annotation: %s", msg)
	}
	h.syncNow()
	h.waitAll(loot, writeback.ReasonNoServiceAccount)
	h.untouched("safe")

	rename("reader")
	waitReadyReason(t, h.d, crds.WatchRules, heistNS, "loot", "Watching")
	h.syncNow()
	refused := h.waitAll(loot, "Forbidden")
	for path, p := range refused {
		if !strings.Contains(p.Status.Message, "system:serviceaccount:"+heistNS+":reader") {
			t.Errorf("%s: the refusal does not say the apiserver refused reader: %s", path, p.Status.Message)
		}
	}
	h.untouched("safe")

	// Rights granted to reader count at the next apply.
	bindRole(t, h.admin, heistNS, "reader-writes-configmaps", []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"create", "patch", "update"}},
		{APIGroups: []string{rbacv1.GroupName}, Resources: []string{"rolebindings"}, Verbs: []string{"create", "patch", "update"}},
	}, "system:serviceaccount:"+heistNS+":reader")
	h.allowed("system:serviceaccount:"+heistNS+":reader", "patch", "", "configmaps")
	settings := h.path("configmaps", "settings")
	h.edit(map[string]string{settings: strings.Replace(loot[settings], "mode: owned", "mode: tuned", 1)})
	h.syncNow()
	h.waitProposal(settings, "settings auto-applied as reader", func(p *crds.Proposal) bool { return p.Status.Phase == crds.PhaseApplied })
	if cm, err := h.admin.CoreV1().ConfigMaps(heistNS).Get(ctx, "settings", metav1.GetOptions{}); err != nil || cm.Data["mode"] != "tuned" {
		t.Errorf("settings: %v (%v), want mode tuned", cm.Data, err)
	}
	testenv.Eventually(t, time.Minute, "the applied edit credited to its Git author", func() (bool, string) {
		c := h.commitOf(settings)
		return c.AuthorName == alice.Name && strings.Contains(h.remote(settings), "mode: tuned"), fmt.Sprintf("%+v", c)
	}, h.d.FailFast())

	// Approvals: the approver's rights and reader's, both.
	bindRole(t, h.admin, heistNS, "carol-reviews", []rbacv1.PolicyRule{
		{APIGroups: []string{crds.Group}, Resources: []string{"proposals"}, Verbs: []string{"get", "list", "watch", "update", "patch"}},
		{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "create", "patch"}},
		{APIGroups: []string{rbacv1.GroupName}, Resources: []string{"rolebindings"}, Verbs: []string{"get", "create", "patch"}},
	}, "carol")
	bindRole(t, h.admin, heistNS, "dave-reviews", []rbacv1.PolicyRule{
		{APIGroups: []string{crds.Group}, Resources: []string{"proposals"}, Verbs: []string{"get", "list", "watch", "update", "patch"}},
		{APIGroups: []string{rbacv1.GroupName}, Resources: []string{"rolebindings"}, Verbs: []string{"get", "create", "patch"}},
		{APIGroups: []string{rbacv1.GroupName}, Resources: []string{"clusterroles"}, Verbs: []string{"bind"}, ResourceNames: []string{"cluster-admin"}},
	}, "dave")
	h.allowed("dave", "bind", rbacv1.GroupName, "clusterroles")
	h.allowed("carol", "create", rbacv1.GroupName, "rolebindings")
	binding := h.path("rolebindings.rbac.authorization.k8s.io", "mallory-admin")
	h.decide("carol", refused[binding], crds.DecisionApprove)
	p := h.waitProposal(binding, "carol's approval refused", func(p *crds.Proposal) bool {
		c := conditionOf(p, crds.ConditionApplied)
		return c != nil && c.Reason == "Forbidden" && p.Spec.Decision == crds.DecisionNone && p.Status.ReviewedBy != nil && p.Status.ReviewedBy.Username == "carol"
	})
	if !strings.Contains(p.Status.Message, "bind clusterroles cluster-admin") {
		t.Errorf("carol's refusal does not say she may not bind cluster-admin: %s", p.Status.Message)
	}
	h.untouched("tuned")
	h.decide("dave", p, crds.DecisionApprove)
	p = h.waitProposal(binding, "dave's approval refused by the apiserver as reader", func(p *crds.Proposal) bool {
		c := conditionOf(p, crds.ConditionApplied)
		return c != nil && c.Reason == "Forbidden" && p.Spec.Decision == crds.DecisionNone && p.Status.ReviewedBy != nil && p.Status.ReviewedBy.Username == "dave"
	})
	if !strings.Contains(p.Status.Message, "system:serviceaccount:"+heistNS+":reader") {
		t.Errorf("the refusal of dave's approval is not the apiserver's as reader: %s", p.Status.Message)
	}
	h.untouched("tuned")

	planted := h.path("configmaps", "planted")
	h.decide("carol", refused[planted], crds.DecisionApprove)
	h.waitProposal(planted, "carol's approval within both rights applied", func(p *crds.Proposal) bool { return p.Status.Phase == crds.PhaseApplied })
	if _, err := h.admin.CoreV1().ConfigMaps(heistNS).Get(ctx, "planted", metav1.GetOptions{}); err != nil {
		t.Errorf("planted after carol's approval: %v", err)
	}
}

// allowed waits until the authorizer lets user verb resource (of group) in team-m: a Role just
// bound counts a moment later.
func (h *heist) allowed(user, verb, group, resource string) {
	h.t.Helper()
	review := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{User: user, Groups: testenv.Users[user],
		ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: heistNS, Verb: verb, Group: group, Resource: resource, Name: "cluster-admin"}}}
	if strings.HasPrefix(user, "system:serviceaccount:") {
		review.Spec.Groups = []string{"system:serviceaccounts", "system:serviceaccounts:" + heistNS}
	}
	testenv.Eventually(h.t, time.Minute, user+" may "+verb+" "+resource, func() (bool, string) {
		got, err := h.admin.AuthorizationV1().SubjectAccessReviews().Create(context.Background(), review, metav1.CreateOptions{})
		return err == nil && got.Status.Allowed, fmt.Sprint(err)
	})
}

// TestClusterWatchRuleWritesBackAsItsServiceAccount: a ClusterWatchRule that names no
// ServiceAccount writes nothing back: an edit its destination would auto-apply waits
// (NoServiceAccount, saying to set spec.serviceAccountRef), and the cluster stays as it was. Once
// the rule names one, the waiting proposal is applied at the next run, as that ServiceAccount:
// nothing was lost on the way, as for a destination that wrote back before the upgrade.
func TestClusterWatchRuleWritesBackAsItsServiceAccount(t *testing.T) {
	planes.Lend(t)
	const ns, rule = "cwr-wb", "cwr-wb-configmaps"
	ctx := context.Background()
	w := newWBWorld(t, ns, crds.WriteBack{Enabled: true, AutoApply: true}, func(w *wbWorld) {
		if err := w.dyn.Resource(crds.WatchRules).Namespace(ns).Delete(ctx, "cms", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		createAs(t, w.dyn, crds.ClusterWatchRules, &crds.ClusterWatchRule{ObjectMeta: metav1.ObjectMeta{Name: rule},
			Spec: crds.ClusterWatchRuleSpec{DestinationRef: crds.NamespacedReference{Name: "dest", Namespace: ns}, Rules: []crds.ClusterResourceRule{{
				ResourceRule: crds.ResourceRule{Resources: []string{"configmaps"}}, Scope: crds.ScopeNamespaced,
				NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": ns}}}}}})
		t.Cleanup(func() {
			_ = w.dyn.Resource(crds.ClusterWatchRules).Delete(context.Background(), rule, metav1.DeleteOptions{})
		})
	})
	w.configMap("tuned", map[string]string{"color": "blue"})
	path := w.cmPath("tuned")
	w.edit(map[string]string{path: w.replace(w.liveYAML("tuned"), "color: blue", "color: green")})
	w.syncNow()
	p := w.waitProposal(path, "the auto-apply waiting for a ServiceAccount", func(p *crds.Proposal) bool {
		c := conditionOf(p, crds.ConditionApplied)
		return p.Status.Phase == crds.PhasePending && c != nil && c.Reason == writeback.ReasonNoServiceAccount
	})
	if !strings.Contains(p.Status.Message, "spec.serviceAccountRef") || !strings.Contains(p.Status.Message, "ClusterWatchRule "+rule) {
		t.Errorf("the waiting proposal does not say what to add: %s", p.Status.Message)
	}
	if got := w.liveColor("tuned"); got != "blue" {
		t.Fatalf("a rule naming no ServiceAccount changed the cluster: color %q", got)
	}

	if _, err := w.dyn.Resource(crds.ClusterWatchRules).Patch(ctx, rule, types.MergePatchType,
		[]byte(`{"spec":{"serviceAccountRef":{"name":"writer","namespace":"`+ns+`"}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, time.Minute, "the waiting proposal applied as the rule's ServiceAccount", func() (bool, string) {
		w.syncNow() // the selections follow the rule a moment after its change; each run tries again
		return w.liveColor("tuned") == "green", "color " + w.liveColor("tuned")
	}, w.d.FailFast())
	w.waitProposal(path, "the proposal applied", func(q *crds.Proposal) bool { return q.Name == p.Name && q.Status.Phase == crds.PhaseApplied })
}
