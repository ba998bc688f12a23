package watch

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/configbutler/gitops-reverser/authz"
	"github.com/configbutler/gitops-reverser/crds"
	"github.com/configbutler/gitops-reverser/testenv"
)

// TestAnUnansweredReviewRefusesAServiceAccountsRule: a WatchRule mirrors only what its
// ServiceAccount may list and watch. Once the apiserver's last answer is due, a review it does not
// answer refuses the rule, and its Ready condition says why; the older answer no longer counts.
// When the apiserver answers again, so does the rule.
func TestAnUnansweredReviewRefusesAServiceAccountsRule(t *testing.T) {
	ctx := context.Background()
	admin := kubernetes.NewForConfigOrDie(cp.AdminConfig())
	ns := fmt.Sprintf("access-%d", envSeq.Add(1))
	mustCreate := func(_ any, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	mustCreate(admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}))
	t.Cleanup(func() { _ = admin.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}) })
	mustCreate(admin.RbacV1().Roles(ns).Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "read"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"list", "watch"}}}}, metav1.CreateOptions{}))
	mustCreate(admin.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "read"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "read"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "reader", Namespace: ns}}}, metav1.CreateOptions{}))
	awaitReviewAllows(t, "system:serviceaccount:"+ns+":reader", ns)

	outage := testenv.Unanswer(testenv.Reviews)
	dyn, err := dynamic.NewForConfig(outage.Config(cp.AdminConfig()))
	if err != nil {
		t.Fatal(err)
	}
	clock := testenv.NewClock(time.Now())
	m := &Manager{access: newAccess(dyn)}
	m.access.now = clock.Now
	ref := ruleRef{kind: crds.KindWatchRule, meta: &metav1.ObjectMeta{Name: "rule", Namespace: ns}, serviceAccount: "reader"}
	sels := []Selection{{GVR: corev1.SchemeGroupVersion.WithResource("configmaps"), Kind: "ConfigMap", Namespaced: true, Namespace: ns}}
	if refused, cond := m.serviceAccountRefuses(ctx, ref, sels); refused {
		t.Fatalf("answered: the rule is refused: %s", cond.message)
	}

	clock.Advance(accessRecheck)
	m.access.forget() // as each reconcile does first
	outage.Set(true)
	refused, cond := m.serviceAccountRefuses(ctx, ref, sels)
	if !refused || cond.reason != ReasonServiceAccountNotAllowed || !strings.Contains(cond.message, "did not answer") {
		t.Fatalf("unanswered: refused %v, %s: %q; want refused, %s, saying the apiserver did not answer", refused, cond.reason, cond.message,
			ReasonServiceAccountNotAllowed)
	}

	outage.Set(false)
	if refused, cond := m.serviceAccountRefuses(ctx, ref, sels); refused {
		t.Fatalf("answered again: the rule is still refused: %s", cond.message)
	}
}

// awaitReviewAllows waits until the apiserver says user may list and watch ConfigMaps in ns: a
// binding just made takes a moment to count.
func awaitReviewAllows(t *testing.T, user, ns string) {
	t.Helper()
	dyn, err := dynamic.NewForConfig(cp.AdminConfig())
	if err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 30*time.Second, user+" may list and watch configmaps", func() (bool, string) {
		for _, verb := range []string{"list", "watch"} {
			v := authz.Ask(context.Background(), dyn, authz.Question{User: &authenticationv1.UserInfo{Username: user},
				Resource: &authorizationv1.ResourceAttributes{Namespace: ns, Verb: verb, Resource: "configmaps"}}, authz.FailClosed)
			if !v.Allowed {
				return false, fmt.Sprintf("%s: %+v", verb, v)
			}
		}
		return true, ""
	})
}

// TestAnUnansweredReviewLeavesARemoteRuleToItsWatchers: the review of what a RemoteCluster's
// kubeconfig identity may read fails open. An answered refusal refuses the rule with what to
// grant; an unanswered review does not, since the watchers list and watch as that very identity
// and its cluster refuses them itself.
func TestAnUnansweredReviewLeavesARemoteRuleToItsWatchers(t *testing.T) {
	outage := testenv.Unanswer(testenv.Reviews)
	dyn, err := dynamic.NewForConfig(outage.Config(cp.ImpersonatingConfig("nobody", "system:authenticated")))
	if err != nil {
		t.Fatal(err)
	}
	r := &remote{name: "hub/far"}
	sels := []Selection{{Cluster: r.name, GVR: corev1.SchemeGroupVersion.WithResource("configmaps"), Kind: "ConfigMap", Namespaced: true, Namespace: "team"}}
	if why := r.unreadable(context.Background(), &connection{dyn: dyn}, sels); !strings.Contains(why, "may not list configmaps in namespace team") {
		t.Fatalf("answered: %q; want a refusal naming what to grant", why)
	}
	outage.Set(true)
	if why := r.unreadable(context.Background(), &connection{dyn: dyn}, sels); why != "" { // a new connection: nothing kept
		t.Fatalf("unanswered: the rule is refused: %s", why)
	}
}
