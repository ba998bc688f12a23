package authz

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/configbutler/gitops-reverser/testenv"
)

// cp is the package's shared control plane.
var cp *testenv.ControlPlane

func TestMain(m *testing.M) {
	os.Exit(testenv.RunMainNoLeaks(m, &cp))
}

var namespaces atomic.Int64

// team is a namespace of its own in which a user may list ConfigMaps once bound.
type team struct {
	t    *testing.T
	ns   string
	kube kubernetes.Interface
	dyn  dynamic.Interface // the admin's
}

func newTeam(t *testing.T) *team {
	t.Helper()
	tm := &team{t: t, ns: fmt.Sprintf("authz-%d", namespaces.Add(1)), kube: kubernetes.NewForConfigOrDie(cp.AdminConfig()),
		dyn: mustDynamic(t, cp.AdminConfig())}
	ctx := context.Background()
	if _, err := tm.kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: tm.ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tm.kube.CoreV1().Namespaces().Delete(ctx, tm.ns, metav1.DeleteOptions{}) })
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "list-configmaps", Namespace: tm.ns},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"list"}}}}
	if _, err := tm.kube.RbacV1().Roles(tm.ns).Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return tm
}

func mustDynamic(t *testing.T, cfg *rest.Config) dynamic.Interface {
	t.Helper()
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return dyn
}

// bind lets subject (a User or a Group) list ConfigMaps, and waits until the apiserver says so.
func (tm *team) bind(kind, name string) {
	tm.t.Helper()
	rb := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: strings.ToLower(kind + "-" + name), Namespace: tm.ns},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "list-configmaps"},
		Subjects: []rbacv1.Subject{{Kind: kind, APIGroup: rbacv1.GroupName, Name: name}}}
	if _, err := tm.kube.RbacV1().RoleBindings(tm.ns).Create(context.Background(), rb, metav1.CreateOptions{}); err != nil {
		tm.t.Fatal(err)
	}
	q := tm.list(name)
	if kind == rbacv1.GroupKind {
		q = tm.list("someone", name)
	}
	tm.await(q, true)
}

// unbind takes the binding of user away, and waits until the apiserver says so.
func (tm *team) unbind(user string) {
	tm.t.Helper()
	if err := tm.kube.RbacV1().RoleBindings(tm.ns).Delete(context.Background(), "user-"+user, metav1.DeleteOptions{}); err != nil {
		tm.t.Fatal(err)
	}
	tm.await(tm.list(user), false)
}

// await polls the apiserver, uncached, until its answer to q is allowed.
func (tm *team) await(q Question, allowed bool) {
	tm.t.Helper()
	testenv.Eventually(tm.t, 30*time.Second, fmt.Sprintf("the apiserver says %s %v may list: %v", q.User.Username, q.User.Groups, allowed), func() (bool, string) {
		v := Ask(context.Background(), tm.dyn, q, FailClosed)
		return v.Err == nil && v.Allowed == allowed, fmt.Sprintf("%+v", v)
	})
}

func (tm *team) list(user string, groups ...string) Question {
	return Question{User: &authenticationv1.UserInfo{Username: user, Groups: groups},
		Resource: &authorizationv1.ResourceAttributes{Namespace: tm.ns, Verb: "list", Resource: "configmaps"}}
}

// TestAskReadsTheApiserversAnswer: a review about a user, or about the client's own identity,
// is the apiserver's answer with the user's groups counted.
func TestAskReadsTheApiserversAnswer(t *testing.T) {
	tm := newTeam(t)
	tm.bind(rbacv1.UserKind, "alice")
	tm.bind(rbacv1.GroupKind, "team")
	ctx := context.Background()
	del := tm.list("alice")
	del.Resource.Verb = "delete"
	asAlice := mustDynamic(t, cp.ImpersonatingConfig("alice"))
	self := Question{Resource: tm.list("alice").Resource}
	for _, tc := range []struct {
		name    string
		dyn     dynamic.Interface
		q       Question
		allowed bool
	}{
		{"a bound user", tm.dyn, tm.list("alice"), true},
		{"a verb the role lacks", tm.dyn, del, false},
		{"a user of the bound group", tm.dyn, tm.list("bob", "team"), true},
		{"the same user without the group", tm.dyn, tm.list("bob"), false},
		{"the client's own identity", asAlice, self, true},
		{"another client's own identity", mustDynamic(t, cp.ImpersonatingConfig("carol")), self, false},
	} {
		if v := Ask(ctx, tc.dyn, tc.q, FailClosed); v.Err != nil || v.Allowed != tc.allowed {
			t.Errorf("%s: %+v, want allowed %v", tc.name, v, tc.allowed)
		}
	}
}

// TestUnansweredFollowsTheRuleOfTheCall: when the apiserver does not answer a review, the verdict
// is the call's rule (refused when closed, allowed when open) and the error says who and what
// was asked, for the refusal the caller shows.
func TestUnansweredFollowsTheRuleOfTheCall(t *testing.T) {
	tm := newTeam(t)
	outage := testenv.Unanswer(testenv.Reviews)
	outage.Set(true)
	dyn := mustDynamic(t, outage.Config(cp.AdminConfig()))
	ctx := context.Background()
	for _, q := range []Question{tm.list("alice"), {Resource: tm.list("alice").Resource}} {
		closed, open := Ask(ctx, dyn, q, FailClosed), Ask(ctx, dyn, q, FailOpen)
		if closed.Allowed || closed.Err == nil || !open.Allowed || open.Err == nil {
			t.Errorf("unanswered %s: closed %+v, open %+v; want refused and allowed, each with the error", q.who(), closed, open)
		}
		if msg := closed.Err.Error(); !strings.Contains(msg, q.who()+" may list configmaps in namespace "+tm.ns) {
			t.Errorf("the error %q does not say who and what was asked", msg)
		}
	}
	if v := Ask(ctx, dyn, tm.list("alice"), 0); v.Allowed { // no rule named: nothing is allowed
		t.Errorf("unanswered with no rule: %+v", v)
	}
}

// TestCacheNeverAnswersWithAnOlderAnswer: an answer is used again while fresh (an allowance
// longer than a refusal); once due, a review the apiserver does not answer gets the call's rule,
// never the older answer, and is not kept: the next call asks again.
func TestCacheNeverAnswersWithAnOlderAnswer(t *testing.T) {
	tm := newTeam(t)
	clock := testenv.NewClock(time.Now())
	outage := testenv.Unanswer(testenv.Reviews)
	c := NewCache(mustDynamic(t, outage.Config(cp.AdminConfig())), Keep{Allowed: 30 * time.Second, Refused: 5 * time.Second, Max: 100, Now: clock.Now})
	ctx := context.Background()
	ask := func(step string, rule Failure, allowed, failed bool) {
		t.Helper()
		if v := c.Ask(ctx, tm.list("alice"), rule); v.Allowed != allowed || (v.Err != nil) != failed {
			t.Fatalf("%s: %+v, want allowed %v, error %v", step, v, allowed, failed)
		}
	}
	tm.bind(rbacv1.UserKind, "alice")
	ask("bound", FailClosed, true, false)
	tm.unbind("alice")
	ask("unbound, the allowance still fresh", FailClosed, true, false)

	clock.Advance(30 * time.Second)
	outage.Set(true)
	ask("due and unanswered, failing closed", FailClosed, false, true)
	ask("due and unanswered, failing open", FailOpen, true, true)
	outage.Set(false)
	ask("answered again", FailOpen, false, false)

	tm.bind(rbacv1.UserKind, "alice")
	ask("bound again, the refusal still fresh", FailClosed, false, false)
	clock.Advance(5 * time.Second)
	ask("the refusal due", FailClosed, true, false)
}

// TestCacheKeysOnWhoAndWhat: the same groups in another order are the same question; other
// groups, or another namespace, are another; and the answers kept stay within Max.
func TestCacheKeysOnWhoAndWhat(t *testing.T) {
	tm := newTeam(t)
	tm.bind(rbacv1.GroupKind, "team")
	tm.bind(rbacv1.UserKind, "alice")
	c := NewCache(tm.dyn, Keep{Allowed: time.Hour, Refused: time.Hour, Max: 3})
	ctx := context.Background()
	elsewhere := tm.list("bob", "team", "x")
	elsewhere.Resource.Namespace = "default"
	for _, tc := range []struct {
		q       Question
		allowed bool
	}{
		{tm.list("bob", "team", "x"), true},
		{tm.list("bob", "x", "team"), true},
		{tm.list("bob", "x"), false},
		{elsewhere, false},
	} {
		if v := c.Ask(ctx, tc.q, FailClosed); v.Err != nil || v.Allowed != tc.allowed {
			t.Errorf("%v in %s: %+v, want allowed %v", tc.q.User.Groups, tc.q.Resource.Namespace, v, tc.allowed)
		}
	}
	if n := c.Len(); n != 3 {
		t.Errorf("%d answers kept, want 3 (two orders of the same groups are one question)", n)
	}
	c.Ask(ctx, tm.list("alice"), FailClosed)
	if n := c.Len(); n > 3 {
		t.Errorf("%d answers kept, want at most Max (3)", n)
	}
}
