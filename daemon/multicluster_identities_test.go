package daemon

import (
	"context"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/configbutler/gitops-reverser/crds"
	"github.com/configbutler/gitops-reverser/layout"
)

// TestARemoteApprovalIsCheckedAsTheHubsUser is the attack of a hub user named like a remote
// cluster's admin. In east, a user named dave, and the group operators, may delete ConfigMaps in
// shop: east's own admins. On the hub, dave and carol (of the hub's group operators) are other
// people, whose only rights are to decide the proposals of the hub's namespace. Each approves the
// destroy of east's ConfigMap shop/x: east is asked about the hub's user under a name of the hub's
// own (hub:dave, in hub:operators), which east's RBAC does not know, so each approval is refused,
// visibly, and x stays. Once east's owner says its identities are the hub's
// (spec.sharedIdentities), dave's approval counts as that of east's dave.
func TestARemoteApprovalIsCheckedAsTheHubsUser(t *testing.T) {
	w := newRemoteWriteBackIn(t, "fleet-identities")
	w.grantBob()
	x := layout.Path("clusters/east", "", "configmaps", "shop", "x")
	w.push(map[string]string{x: "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n  namespace: shop\ndata:\n  value: from-git\n"})
	w.proposalAfterRuns(x, "x created in east", func(p *crds.Proposal) bool { return p.Status.Phase == crds.PhaseApplied })

	deletes := []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "delete"}}}
	bindRole(t, w.remote, "shop", "east-admin-dave", deletes, "dave")
	bindGroup(t, w, "shop", "east-operators", deletes, "operators")
	w.mayInEast("dave", "delete")
	w.mayInEast("carol", "delete")
	bindRole(t, w.hubKube, w.ns, "proposal-reviewer", []rbacv1.PolicyRule{{APIGroups: []string{crds.Group}, Resources: []string{"proposals"},
		Verbs: []string{"get", "list", "watch", "update", "patch"}}}, "dave", "carol")

	w.push(nil, x)
	p := w.proposal(x, "a destroy of x waiting for review", func(p *crds.Proposal) bool {
		return p.Spec.Change == crds.ChangeDestroy && p.Status.Phase == crds.PhasePending
	})
	for _, who := range []string{"dave", "carol"} {
		w.decide(who, p, crds.DecisionApprove)
		p = w.proposal(x, who+"'s approval carried out or refused", func(p *crds.Proposal) bool {
			return p.Spec.Change == crds.ChangeDestroy && (p.Status.Phase == crds.PhaseApplied ||
				appliedCondition(p).Reason == "Forbidden" && strings.Contains(appliedCondition(p).Message, who+" approved"))
		})
		if p.Status.Phase == crds.PhaseApplied || w.eastConfigMap("x") == nil {
			t.Fatalf("%s, a hub user, deleted x in east with the rights of east's own %s", who, who)
		}
		if msg := appliedCondition(p).Message; !strings.Contains(msg, crds.HubUserPrefix+who) || !strings.Contains(msg, "spec.sharedIdentities") {
			t.Errorf("the refusal of %s's approval does not say as whom east was asked, nor how to share identities: %s", who, msg)
		}
		w.warned(p, "Forbidden")
	}

	// East's owner says east's users are the hub's: dave's approval is east's dave's.
	patch := []byte(`{"spec":{"sharedIdentities":true}}`)
	if _, err := w.hubDyn.Resource(crds.RemoteClusters).Namespace(w.ns).Patch(context.Background(), "east", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	w.decide("dave", p, crds.DecisionApprove)
	w.proposal(x, "the destroy of x applied in east on dave's approval", func(p *crds.Proposal) bool {
		return p.Spec.Change == crds.ChangeDestroy && p.Status.Phase == crds.PhaseApplied
	})
	if cm := w.eastConfigMap("x"); cm != nil {
		t.Errorf("x is still in east after its approved destroy: %v", cm.Data)
	}
}

// bindGroup creates a Role named name in ns of east with rules, bound to group.
func bindGroup(t *testing.T, w *remoteWriteBack, ns, name string, rules []rbacv1.PolicyRule, group string) {
	t.Helper()
	ctx := context.Background()
	mustCreate(t, func() error {
		_, err := w.remote.RbacV1().Roles(ns).Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Rules: rules}, metav1.CreateOptions{})
		return err
	})
	mustCreate(t, func() error {
		_, err := w.remote.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.GroupKind, Name: group, APIGroup: rbacv1.GroupName}}}, metav1.CreateOptions{})
		return err
	})
}
