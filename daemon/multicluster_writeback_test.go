package daemon

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/configbutler/gitops-reverser/crds"
	"github.com/configbutler/gitops-reverser/layout"
	"github.com/configbutler/gitops-reverser/testenv"
	"github.com/configbutler/gitops-reverser/writeback"
)

// remoteWriteBack is a fleet whose one remote, "east", is written back to: its hub destination
// auto-applies, and a ClusterWatchRule writes its ConfigMaps and Services as the remote's
// ServiceAccount shop/deployer, which may change ConfigMaps in shop and nothing else.
type remoteWriteBack struct {
	*fleet
	d      *testenv.Daemon
	remote *kubernetes.Clientset // east's admin
	sync   int                   // the last sync-now value
}

// newRemoteWriteBack prepares east before the daemon starts: deployer, and bob (the kubeconfig's
// identity) allowed to read ConfigMaps and do anything to Services in shop, so that a Service
// refused proves the apply was made as deployer, not as bob. Bob may neither impersonate nor ask
// SubjectAccessReviews yet.
func newRemoteWriteBack(t *testing.T) *remoteWriteBack {
	return newRemoteWriteBackIn(t, "fleet-writeback")
}

// newRemoteWriteBackIn is newRemoteWriteBack with the hub's configuration in namespace ns.
func newRemoteWriteBackIn(t *testing.T, ns string) *remoteWriteBack {
	f := newFleet(t, ns, "east")
	w := &remoteWriteBack{fleet: f, remote: kubernetes.NewForConfigOrDie(f.remotes["east"].AdminConfig())}
	writerAccount(t, w.remote, "shop", "deployer", "", []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: writeVerbs}})
	bindRole(t, w.remote, "shop", "bob-services", []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"services"}, Verbs: writeVerbs}}, "bob")
	f.create(crds.ClusterWatchRules, &crds.ClusterWatchRule{ObjectMeta: metav1.ObjectMeta{Name: "east-writes"},
		Spec: crds.ClusterWatchRuleSpec{DestinationRef: crds.NamespacedReference{Name: "east", Namespace: f.ns},
			ServiceAccountRef: &crds.ServiceAccountReference{Namespace: "shop", Name: "deployer"},
			Rules:             []crds.ClusterResourceRule{{ResourceRule: crds.ResourceRule{Resources: []string{"configmaps", "services"}}, Scope: crds.ScopeNamespaced}}}})
	w.patchEast(map[string]any{"spec": map[string]any{"writeBack": crds.WriteBack{Enabled: true, AutoApply: true}}})
	t.Cleanup(func() {
		_ = f.hubDyn.Resource(crds.Proposals).Namespace(f.ns).DeleteCollection(context.Background(), metav1.DeleteOptions{}, metav1.ListOptions{})
	})
	w.d = startDaemon(t, t.TempDir(), "--git-batch-quiet-ms", "200")
	f.file(w.d, "clusters/east/shop/configmaps/first.yaml", "1")
	testenv.Eventually(t, time.Minute, "write-back baseline of east", func() (bool, string) {
		if st := destination(t, f.hubDyn, f.ns, "east").Status.WriteBack; st != nil && st.LastRevision != "" {
			return true, ""
		}
		w.syncNow()
		return false, "no status.writeBack.lastRevision yet"
	}, w.d.FailFast())
	return w
}

func (w *remoteWriteBack) patchEast(body map[string]any) {
	w.t.Helper()
	data, err := json.Marshal(body)
	if err != nil {
		w.t.Fatal(err)
	}
	if _, err := w.hubDyn.Resource(crds.GitDestinations).Namespace(w.ns).Patch(context.Background(), "east", types.MergePatchType, data, metav1.PatchOptions{}); err != nil {
		w.t.Fatal(err)
	}
}

// syncNow asks for a write-back run of east and waits until it was made.
func (w *remoteWriteBack) syncNow() {
	w.t.Helper()
	w.sync++
	value := fmt.Sprint(w.sync)
	w.patchEast(map[string]any{"metadata": map[string]any{"annotations": map[string]any{crds.AnnotationSyncNow: value}}})
	testenv.Eventually(w.t, time.Minute, "sync-now "+value+" of east handled", func() (bool, string) {
		st := destination(w.t, w.hubDyn, w.ns, "east").Status.WriteBack
		return st != nil && st.LastHandledSyncNow == value, fmt.Sprintf("%+v", st)
	}, w.d.FailFast())
}

// push commits files (path → content) and removes others as alice, then has east run.
func (w *remoteWriteBack) push(write map[string]string, remove ...string) {
	w.t.Helper()
	if _, err := w.srv.PushCommit("state", "main", alice, "edit by alice", write, remove); err != nil {
		w.t.Fatal(err)
	}
	w.syncNow()
}

// proposal waits for a proposal of path on the hub that satisfies cond.
func (w *remoteWriteBack) proposal(path, what string, cond func(*crds.Proposal) bool) *crds.Proposal {
	w.t.Helper()
	var found *crds.Proposal
	testenv.Eventually(w.t, time.Minute, what, func() (bool, string) {
		var seen string
		found, seen = w.findProposal(path, cond)
		return found != nil, seen
	}, w.d.FailFast())
	return found
}

// proposalAfterRuns is proposal, running east between looks: a proposal that waits is tried
// again at its destination's runs.
func (w *remoteWriteBack) proposalAfterRuns(path, what string, cond func(*crds.Proposal) bool) *crds.Proposal {
	w.t.Helper()
	var found *crds.Proposal
	testenv.Eventually(w.t, 2*time.Minute, what, func() (bool, string) {
		var seen string
		if found, seen = w.findProposal(path, cond); found == nil {
			w.syncNow()
		}
		return found != nil, seen
	}, w.d.FailFast())
	return found
}

// findProposal is the proposal of path on the hub that satisfies cond; nil when there is none,
// with those of path that there are.
func (w *remoteWriteBack) findProposal(path string, cond func(*crds.Proposal) bool) (*crds.Proposal, string) {
	list, err := w.hubDyn.Resource(crds.Proposals).Namespace(w.ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		return nil, err.Error()
	}
	var seen []string
	for i := range list.Items {
		p, err := crds.FromUnstructured[crds.Proposal](&list.Items[i])
		if err != nil || p.Spec.Path != path {
			continue
		}
		if cond(p) {
			return p, ""
		}
		seen = append(seen, fmt.Sprintf("%s %s %s: %+v", p.Name, p.Spec.Change, p.Status.Phase, appliedCondition(p)))
	}
	return nil, strings.Join(seen, "; ")
}

// decide sets spec.decision of p as user, a user of the hub.
func (w *remoteWriteBack) decide(user string, p *crds.Proposal, decision crds.Decision) {
	w.t.Helper()
	client := dynamic.NewForConfigOrDie(w.hub.ImpersonatingConfig(user, testenv.Users[user]...))
	body := fmt.Sprintf(`{"spec":{"decision":%q}}`, decision)
	if _, err := client.Resource(crds.Proposals).Namespace(w.ns).Patch(context.Background(), p.Name, types.MergePatchType, []byte(body), metav1.PatchOptions{}); err != nil {
		w.t.Fatalf("%s sets decision %s: %v", user, decision, err)
	}
}

// grantBob gives the kubeconfig's identity on east what write-back needs there: impersonate
// deployer, and create SubjectAccessReviews.
func (w *remoteWriteBack) grantBob() {
	w.t.Helper()
	ctx := context.Background()
	bindRole(w.t, w.remote, "shop", "write-back-impersonate", []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"serviceaccounts"}, ResourceNames: []string{"deployer"}, Verbs: []string{"impersonate"}}}, "bob")
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "write-back-reviews"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{authorizationv1.GroupName}, Resources: []string{"subjectaccessreviews"}, Verbs: []string{"create"}}}}
	mustCreate(w.t, func() error {
		_, err := w.remote.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{})
		return err
	})
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "write-back-reviews"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, Name: "bob", APIGroup: rbacv1.GroupName}}}
	mustCreate(w.t, func() error {
		_, err := w.remote.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{})
		return err
	})
}

// eastConfigMap is the ConfigMap shop/name of east; nil when it does not exist.
func (w *remoteWriteBack) eastConfigMap(name string) *corev1.ConfigMap {
	w.t.Helper()
	cm, err := w.remote.CoreV1().ConfigMaps("shop").Get(context.Background(), name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		w.t.Fatal(err)
	}
	return cm
}

// warned waits for a Warning Event with reason about the proposal p on the hub.
func (w *remoteWriteBack) warned(p *crds.Proposal, reason string) {
	w.t.Helper()
	testenv.Eventually(w.t, time.Minute, "a Warning Event "+reason+" of proposal "+p.Name, func() (bool, string) {
		events, err := w.hubKube.CoreV1().Events(w.ns).List(context.Background(), metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		return slices.ContainsFunc(events.Items, func(e corev1.Event) bool {
			return e.Type == corev1.EventTypeWarning && e.Reason == reason && e.InvolvedObject.Name == p.Name
		}), fmt.Sprintf("%d events", len(events.Items))
	}, w.d.FailFast())
}

// mayInEast waits until east's RBAC lets user verb configmaps in shop.
func (w *remoteWriteBack) mayInEast(user, verb string) {
	w.t.Helper()
	testenv.Eventually(w.t, time.Minute, user+" may "+verb+" configmaps in east", func() (bool, string) {
		review := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{User: user, Groups: testenv.Users[user],
			ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: "shop", Verb: verb, Resource: "configmaps"}}}
		res, err := w.remote.AuthorizationV1().SubjectAccessReviews().Create(context.Background(), review, metav1.CreateOptions{})
		if err != nil {
			return false, err.Error()
		}
		return res.Status.Allowed, res.Status.Reason
	}, w.d.FailFast())
}

func appliedCondition(p *crds.Proposal) metav1.Condition {
	if c := meta.FindStatusCondition(p.Status.Conditions, crds.ConditionApplied); c != nil {
		return *c
	}
	return metav1.Condition{}
}

// TestWriteBackToARemoteClusterActsThere: the Git edits of a hub destination that mirrors a
// RemoteCluster are applied in that cluster, never on the hub, as the rule's ServiceAccount of
// that cluster impersonated through the kubeconfig's identity. While that identity may not
// impersonate it nor ask SubjectAccessReviews there, nothing is applied and the proposal says what
// to grant; the remote apiserver refuses what the ServiceAccount may not write; and an approval
// counts only with the approver's rights in the remote cluster.
func TestWriteBackToARemoteClusterActsThere(t *testing.T) {
	w := newRemoteWriteBack(t)
	x := layout.Path("clusters/east", "", "configmaps", "shop", "x")
	file := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n  namespace: shop\ndata:\n  value: from-git\n"

	// Bob may not impersonate deployer there: nothing is applied, and the proposal says what to grant.
	w.push(map[string]string{x: file})
	p := w.proposal(x, "x waits for the rights of east's kubeconfig identity", func(p *crds.Proposal) bool {
		return appliedCondition(p).Reason == writeback.ReasonClusterForbidden
	})
	msg := appliedCondition(p).Message
	for _, want := range []string{"RemoteCluster " + w.ns + "/east", "impersonate on serviceaccounts (resourceNames: deployer) in namespace shop",
		"create on subjectaccessreviews.authorization.k8s.io"} {
		if !strings.Contains(msg, want) {
			t.Errorf("the reason of the waiting proposal does not say %q: %s", want, msg)
		}
	}
	if p.Status.Phase != crds.PhasePending {
		t.Errorf("the waiting proposal is %s, want %s", p.Status.Phase, crds.PhasePending)
	}
	w.warned(p, writeback.ReasonClusterForbidden)
	if cm := w.eastConfigMap("x"); cm != nil {
		t.Fatalf("x reached east without the rights to act as deployer: %v", cm.Data)
	}

	// Once granted, the waiting proposal is applied in east, and nothing on the hub.
	w.grantBob()
	w.proposalAfterRuns(x, "x applied once east's identity may act as deployer", func(p *crds.Proposal) bool {
		return p.Status.Phase == crds.PhaseApplied
	})
	if cm := w.eastConfigMap("x"); cm == nil || cm.Data["value"] != "from-git" {
		t.Errorf("ConfigMap shop/x of east after the apply: %v", cm)
	}
	for _, ns := range []string{"shop", w.ns, "default"} {
		if _, err := w.hubKube.CoreV1().ConfigMaps(ns).Get(context.Background(), "x", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("the hub has a ConfigMap %s/x (err %v): write-back applied a remote's file to the hub", ns, err)
		}
	}

	refusedAsDeployer(w)
	approvalAskedInTheRemote(w, x)
}

// refusedAsDeployer: a Service, which bob may create but deployer may not, is refused by east's
// apiserver for deployer, and the proposal says so.
func refusedAsDeployer(w *remoteWriteBack) {
	w.t.Helper()
	web := layout.Path("clusters/east", "", "services", "shop", "web")
	w.push(map[string]string{web: "apiVersion: v1\nkind: Service\nmetadata:\n  name: web\n  namespace: shop\n" +
		"spec:\n  ports:\n  - port: 80\n    targetPort: 8080\n"})
	p := w.proposal(web, "web refused by east for deployer", func(p *crds.Proposal) bool {
		return appliedCondition(p).Reason == "Forbidden"
	})
	msg := appliedCondition(p).Message
	if !strings.Contains(msg, "ServiceAccount shop/deployer in RemoteCluster "+w.ns+"/east") || !strings.Contains(msg, `"system:serviceaccount:shop:deployer" cannot`) {
		w.t.Errorf("the refusal does not say east's apiserver refused deployer: %s", msg)
	}
	if _, err := w.remote.CoreV1().Services("shop").Get(context.Background(), "web", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		w.t.Errorf("Service shop/web of east exists (err %v): it was not applied as deployer", err)
	}
}

// approvalAskedInTheRemote: removing x opens a destroy, which alice (a hub user) approves; east
// answers whether she may delete it there, as hub:alice (east does not share the hub's
// identities): first not, then, once a Role of east lets hub:alice, it is deleted in east.
func approvalAskedInTheRemote(w *remoteWriteBack, x string) {
	w.t.Helper()
	bindRole(w.t, w.hubKube, w.ns, "proposal-reviewer", []rbacv1.PolicyRule{{APIGroups: []string{crds.Group}, Resources: []string{"proposals"},
		Verbs: []string{"get", "list", "watch", "update", "patch"}}}, "alice")
	w.push(nil, x)
	p := w.proposal(x, "a destroy of x waiting for review", func(p *crds.Proposal) bool {
		return p.Spec.Change == crds.ChangeDestroy && p.Status.Phase == crds.PhasePending
	})
	w.decide("alice", p, crds.DecisionApprove)
	p = w.proposal(x, "alice's approval refused by east", func(p *crds.Proposal) bool {
		return p.Spec.Change == crds.ChangeDestroy && appliedCondition(p).Reason == "Forbidden"
	})
	if msg := appliedCondition(p).Message; !strings.Contains(msg, "alice approved it but may not delete ConfigMap shop/x in RemoteCluster "+w.ns+"/east") {
		w.t.Errorf("the refusal of alice's approval: %s", msg)
	}
	if w.eastConfigMap("x") == nil {
		w.t.Fatal("x was deleted from east on the approval of someone who may not delete it there")
	}
	if msg := appliedCondition(p).Message; !strings.Contains(msg, "asked about "+crds.HubUserPrefix+"alice") {
		w.t.Errorf("the refusal of alice's approval does not say east was asked about %salice: %s", crds.HubUserPrefix, msg)
	}
	bindRole(w.t, w.remote, "shop", "alice-deletes", []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"},
		Verbs: []string{"get", "delete"}}}, crds.HubUserPrefix+"alice")
	w.mayInEast(crds.HubUserPrefix+"alice", "delete")
	w.decide("alice", p, crds.DecisionApprove)
	w.proposal(x, "the destroy of x applied in east", func(p *crds.Proposal) bool {
		return p.Spec.Change == crds.ChangeDestroy && p.Status.Phase == crds.PhaseApplied
	})
	if cm := w.eastConfigMap("x"); cm != nil {
		w.t.Errorf("x is still in east after its approved destroy: %v", cm.Data)
	}
}
