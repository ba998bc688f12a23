package notify

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/configbutler/gitops-reverser/crds"
	"github.com/configbutler/gitops-reverser/testenv"
)

const commitA = "0123456789abcdef0123456789abcdef01234567"

// TestAProposalWaitingReachesTheChannelWithWhatChanged: a proposal opened is told on the channel
// of the rule that selects it, with its destination, commit, author, file, a link to it on the
// page and its diff, values that may be secret hidden; signed with the channel's key.
func TestAProposalWaitingReachesTheChannelWithWhatChanged(t *testing.T) {
	e := newEnv(t, Config{PageURL: "https://gitops.example.com/"})
	ns := e.namespace("team")
	s := newSink(t, nil)
	e.channel(ns, "hook", crds.ChannelWebhook, s.srv.URL, nil)
	e.rule(ns, "reviews", "hook", func(r *crds.NotifyRuleSpec) {
		r.Events = []crds.NotifyEventSelector{{Kind: crds.KindProposal, Reasons: []string{"Opened"}}}
		r.Summary = "{{ .Secret }} production"
	})
	p := e.proposal(ns, "settings-update", "apps", commitA)
	e.rec.Eventf(crds.ObjectReference(crds.KindProposal, p), "Normal", "Applied", "not selected")
	e.opened(p)

	got := s.receives(t, 1)[0]
	want := Notice{
		Severity: SeverityInfo, Reason: "Opened", Message: "update ConfigMap " + ns + "/settings from commit 0123456 by Alice",
		Object:      Ref{APIVersion: crds.GroupVersion.String(), Kind: crds.KindProposal, Namespace: ns, Name: "settings-update"},
		Destination: "apps", Commit: commitA, Author: "Alice <alice@example.com>", File: "apps/settings.yaml",
		Diff: " -  colour: blue\n+  colour: green\n-  password: (hidden)\n+  password: (hidden)",
		Link: "https://gitops.example.com/proposals/" + ns + "/settings-update", Summary: "{{ .Secret }} production",
	}
	want.Diff = strings.TrimPrefix(want.Diff, " ")
	got.Time = time.Time{}
	if got != want {
		t.Errorf("notice:\n%+v\nwant:\n%+v", got, want)
	}
	if len(s.notices()) != 1 {
		t.Errorf("the Applied Event the rule does not select was sent: %+v", s.notices())
	}
}

// TestTheSameEventIsSentOnceWithinTheWindow: the same object, reason, message and commit within
// the rule's duplicate window go out once; another commit is another notice.
func TestTheSameEventIsSentOnceWithinTheWindow(t *testing.T) {
	e := newEnv(t, Config{})
	ns := e.namespace("dup")
	s := newSink(t, nil)
	e.channel(ns, "hook", crds.ChannelWebhook, s.srv.URL, nil)
	e.rule(ns, "all", "hook", nil)
	p := e.proposal(ns, "one", "apps", commitA)
	for range 3 {
		e.opened(p)
	}
	q := e.proposal(ns, "two", "apps", strings.Repeat("b", 40))
	e.opened(q)
	s.receives(t, 2)
	// one more Event of each, after the two arrived: still two
	e.opened(p)
	e.rec.Eventf(crds.ObjectReference(crds.KindProposal, q), "Normal", "Marker", "after the duplicates")
	s.receives(t, 3)
	got := s.notices()
	if len(got) != 3 || got[0].Object.Name != "one" || got[1].Object.Name != "two" || got[2].Reason != "Marker" {
		t.Errorf("notices: %+v", got)
	}
}

// TestAChannelThatFailsHoldsUpNoOther: one channel answers 500, one never answers, one is not
// listening; a fourth, healthy one gets every notice while the others are still failing, and each
// failing one ends up not Ready with what went wrong, its failures counted.
func TestAChannelThatFailsHoldsUpNoOther(t *testing.T) {
	e := newEnv(t, Config{})
	ns := e.namespace("faults")
	failing := newSink(t, func(w http.ResponseWriter, _ *http.Request) bool {
		w.WriteHeader(http.StatusInternalServerError)
		return true
	})
	release := make(chan struct{})
	hanging := newSink(t, func(w http.ResponseWriter, r *http.Request) bool {
		select {
		case <-release:
		case <-r.Context().Done():
		}
		return true
	})
	t.Cleanup(func() { close(release) })
	gone := newSink(t, nil)
	goneURL := gone.srv.URL
	gone.srv.Close()
	healthy := newSink(t, nil)
	short := func(c *crds.NotifyChannelSpec) { c.Timeout = &metav1.Duration{Duration: 2 * time.Second} }
	for name, url := range map[string]string{"failing": failing.srv.URL, "hanging": hanging.srv.URL, "gone": goneURL, "healthy": healthy.srv.URL} {
		e.channel(ns, name, crds.ChannelWebhook, url, short)
		e.rule(ns, name, name, nil)
	}
	const proposals = 5
	for i := range proposals {
		e.opened(e.proposal(ns, "p"+strconv.Itoa(i), "apps", strings.Repeat(strconv.Itoa(i), 40)))
	}
	healthy.receives(t, proposals)
	if testutil.ToFloat64(e.reg.Notify.Failed.WithLabelValues(ns+"/hanging")) >= proposals {
		t.Errorf("the hanging channel had failed every notice before the healthy one got them all")
	}
	for _, name := range []string{"failing", "hanging", "gone"} {
		testenv.Eventually(t, 2*time.Minute, name+" not Ready", func() (bool, string) {
			status, reason := e.condition(crds.NotifyChannels, ns, name)
			return status == "False" && strings.HasPrefix(reason, ReasonSendFailing), status + " " + reason
		})
	}
}

// TestATenantReadsAnotherNamespacesEventsOnlyWithConsent: mallory, who holds only a Role in her
// own namespace (its Secrets, NotifyChannels and NotifyRules), makes a channel and a rule that
// names the victim's namespace. She gets nothing of it until the destination its Events concern
// admits her namespace; then she gets those, and still none about another destination there.
func TestATenantReadsAnotherNamespacesEventsOnlyWithConsent(t *testing.T) {
	e := newEnv(t, Config{})
	victim, tenant := e.namespace("victim"), e.namespace("tenant")
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "notifications", Namespace: tenant}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"create"}},
		{APIGroups: []string{crds.Group}, Resources: []string{"notifychannels", "notifyrules"}, Verbs: []string{"create", "get"}},
	}}
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "mallory", Namespace: tenant},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "mallory"}}}
	if _, err := e.kube.RbacV1().Roles(tenant).Create(t.Context(), role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.kube.RbacV1().RoleBindings(tenant).Create(t.Context(), binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, converge, "mallory's Role in force", func() (bool, string) {
		review, err := e.kube.AuthorizationV1().SubjectAccessReviews().Create(t.Context(), &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User: "mallory", ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: tenant, Verb: "create", Group: crds.Group, Resource: "notifyrules"}}}, metav1.CreateOptions{})
		return err == nil && review.Status.Allowed, fmt.Sprint(err)
	})
	mallory := cp.ImpersonatingConfig("mallory")
	stolen := newSink(t, nil)
	e.as(mallory, func() {
		e.channel(tenant, "mine", crds.ChannelWebhook, stolen.srv.URL, nil)
		e.rule(tenant, "spy", "mine", func(r *crds.NotifyRuleSpec) { r.Namespaces = []string{victim, tenant} })
	})
	e.opened(e.proposal(victim, "secret-plan", "prod", commitA))
	own := e.proposal(tenant, "marker", "apps", commitA)
	e.opened(own)
	if got := stolen.receives(t, 1); len(got) != 1 || got[0].Object.Namespace != tenant {
		t.Fatalf("without consent the tenant got: %+v", got)
	}

	e.admitted.Store(victim+"/shared/"+tenant, true)
	e.opened(e.proposal(victim, "still-secret", "prod", commitA))
	e.opened(e.proposal(victim, "shared-change", "shared", commitA))
	stolen.receives(t, 2)
	e.rec.Eventf(crds.ObjectReference(crds.KindProposal, own), "Normal", "Marker", "the last one")
	got := stolen.receives(t, 3)
	if len(got) != 3 || got[1].Object.Name != "shared-change" || got[2].Reason != "Marker" {
		t.Errorf("with consent for destination shared only, the tenant got: %+v", got)
	}
}

// TestAChannelUsesOnlyItsOwnNamespacesSecret: a channel that names a Secret which exists only in
// another namespace is not Ready and sends nothing: its secretRef has no namespace to reach it by.
func TestAChannelUsesOnlyItsOwnNamespacesSecret(t *testing.T) {
	e := newEnv(t, Config{})
	other, tenant := e.namespace("other"), e.namespace("tenant")
	s := newSink(t, nil)
	e.secret(other, "their-hook", map[string]string{crds.ChannelAddressKey: s.srv.URL})
	e.create(crds.NotifyChannels, tenant, &crds.NotifyChannel{ObjectMeta: metav1.ObjectMeta{Name: "borrowed"},
		Spec: crds.NotifyChannelSpec{Type: crds.ChannelWebhook, SecretRef: crds.LocalReference{Name: "their-hook"}}})
	testenv.Eventually(t, converge, "the channel not Ready", func() (bool, string) {
		status, reason := e.condition(crds.NotifyChannels, tenant, "borrowed")
		return status == "False" && strings.HasPrefix(reason, ReasonSecretNotFound), status + " " + reason
	})
}

// TestAChannelSendsAtMostPerMinute: over spec.perMinute, notices are dropped and counted, in the
// metric and the channel's status.
func TestAChannelSendsAtMostPerMinute(t *testing.T) {
	e := newEnv(t, Config{})
	ns := e.namespace("cap")
	s := newSink(t, nil)
	e.channel(ns, "hook", crds.ChannelWebhook, s.srv.URL, func(c *crds.NotifyChannelSpec) { c.PerMinute = 2 })
	e.rule(ns, "all", "hook", func(r *crds.NotifyRuleSpec) { r.Events = []crds.NotifyEventSelector{{Kind: crds.KindProposal}} })
	for i := range 5 {
		e.opened(e.proposal(ns, "p"+strconv.Itoa(i), "apps", strings.Repeat(strconv.Itoa(i), 40)))
	}
	testenv.Eventually(t, converge, "three dropped", func() (bool, string) {
		n := testutil.ToFloat64(e.reg.Notify.Dropped.WithLabelValues(ns+"/hook", "cap"))
		return n == 3, strconv.Itoa(int(n)) + " dropped"
	})
	if got := s.notices(); len(got) != 2 {
		t.Errorf("sent %d notices over a cap of 2 a minute", len(got))
	}
	testenv.Eventually(t, converge, "status.dropped", func() (bool, string) {
		ch, ok := get[crds.NotifyChannel](t.Context(), e.dyn, crds.NotifyChannels, ns, "hook")
		return ok && ch.Status.Dropped == 3 && ch.Status.Sent == 2, "status not yet written"
	})
}

// TestARuleSaysWhatKeepsItFromSending: a rule whose channel is missing, or whose regular
// expression does not compile, is not Ready with the reason; once the channel exists it is.
func TestARuleSaysWhatKeepsItFromSending(t *testing.T) {
	e := newEnv(t, Config{})
	ns := e.namespace("rules")
	e.create(crds.NotifyRules, ns, &crds.NotifyRule{ObjectMeta: metav1.ObjectMeta{Name: "early"},
		Spec: crds.NotifyRuleSpec{ChannelRef: crds.LocalReference{Name: "later"}}})
	e.create(crds.NotifyRules, ns, &crds.NotifyRule{ObjectMeta: metav1.ObjectMeta{Name: "broken"},
		Spec: crds.NotifyRuleSpec{ChannelRef: crds.LocalReference{Name: "later"}, Include: []string{"(unclosed"}}})
	for name, reason := range map[string]string{"early": ReasonChannelNotFound, "broken": ReasonInvalidRegexp} {
		testenv.Eventually(t, converge, name+" not Ready", func() (bool, string) {
			status, got := e.condition(crds.NotifyRules, ns, name)
			return status == "False" && strings.HasPrefix(got, reason), status + " " + got
		})
	}
	s := newSink(t, nil)
	e.channel(ns, "later", crds.ChannelWebhook, s.srv.URL, nil)
	e.ready(crds.NotifyRules, ns, "early")
}

// TestAPushFailingIsToldOnlyWhenItLasts: a destination's push failure is held, and told only if
// the destination still fails for that reason when the hold ends; one that recovered meanwhile
// is not told. The recovered one's hold ends first, so it was weighed before the stuck one is
// told.
func TestAPushFailingIsToldOnlyWhenItLasts(t *testing.T) {
	e := newEnv(t, Config{PushFailingAfter: time.Second})
	ns := e.namespace("pushes")
	s := newSink(t, nil)
	e.channel(ns, "hook", crds.ChannelWebhook, s.srv.URL, nil)
	e.rule(ns, "pushes", "hook", func(r *crds.NotifyRuleSpec) { r.Events = []crds.NotifyEventSelector{{Kind: crds.KindGitDestination}} })
	for _, name := range []string{"recovered", "stuck"} {
		ready := map[string]metav1.ConditionStatus{"stuck": metav1.ConditionFalse, "recovered": metav1.ConditionTrue}[name]
		d := &crds.GitDestination{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec: crds.GitDestinationSpec{RepoRef: crds.NamespacedReference{Name: "repo"}, Branch: "main", BaseFolder: name}}
		e.create(crds.GitDestinations, ns, d)
		reason := "PushFailing"
		if ready == metav1.ConditionTrue {
			reason = "Synced"
		}
		status := fmt.Sprintf(`{"status":{"conditions":[{"type":"Ready","status":%q,"reason":%q,"message":"m","lastTransitionTime":"2026-01-01T00:00:00Z"}]}}`, ready, reason)
		if _, err := e.dyn.Resource(crds.GitDestinations).Namespace(ns).Patch(t.Context(), name, types.MergePatchType, []byte(status), metav1.PatchOptions{}, "status"); err != nil {
			t.Fatal(err)
		}
		e.rec.Event(crds.ObjectReference(crds.KindGitDestination, d), "Warning", "PushFailing", "pushing to the remote fails (retrying): 503")
	}
	if got := s.receives(t, 1); len(got) != 1 || got[0].Object.Name != "stuck" || got[0].Reason != "PushFailing" {
		t.Errorf("notices: %+v", got)
	}
}

// TestAChannelsNewSettingsApplyAndItsCountsGoOn: a channel's cap is changed while it sends; the
// new cap applies from the next notice, the same outbox goes on, and its counts with it.
func TestAChannelsNewSettingsApplyAndItsCountsGoOn(t *testing.T) {
	e := newEnv(t, Config{})
	ns := e.namespace("retune")
	s := newSink(t, nil)
	e.channel(ns, "hook", crds.ChannelWebhook, s.srv.URL, func(c *crds.NotifyChannelSpec) { c.PerMinute = 1 })
	e.rule(ns, "all", "hook", func(r *crds.NotifyRuleSpec) { r.Events = []crds.NotifyEventSelector{{Kind: crds.KindProposal}} })
	e.opened(e.proposal(ns, "p0", "apps", strings.Repeat("0", 40)))
	e.opened(e.proposal(ns, "p1", "apps", strings.Repeat("1", 40)))
	testenv.Eventually(t, converge, "one sent, one over the cap", func() (bool, string) {
		dropped := testutil.ToFloat64(e.reg.Notify.Dropped.WithLabelValues(ns+"/hook", "cap"))
		return len(s.notices()) == 1 && dropped == 1, fmt.Sprintf("%d sent, %.0f dropped", len(s.notices()), dropped)
	})

	u, err := e.dyn.Resource(crds.NotifyChannels).Namespace(ns).Patch(t.Context(), "hook", types.MergePatchType, []byte(`{"spec":{"perMinute":5}}`), metav1.PatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, converge, "the new cap taken", func() (bool, string) {
		ch, ok := get[crds.NotifyChannel](t.Context(), e.dyn, crds.NotifyChannels, ns, "hook")
		return ok && ch.Status.ObservedGeneration == u.GetGeneration(), "status not yet of the new generation"
	})
	e.opened(e.proposal(ns, "p2", "apps", strings.Repeat("2", 40)))
	e.opened(e.proposal(ns, "p3", "apps", strings.Repeat("3", 40)))
	s.receives(t, 3)
	testenv.Eventually(t, converge, "status.sent 3", func() (bool, string) {
		ch, ok := get[crds.NotifyChannel](t.Context(), e.dyn, crds.NotifyChannels, ns, "hook")
		return ok && ch.Status.Sent == 3 && ch.Status.Dropped == 1, fmt.Sprintf("%+v", ch.Status)
	})
}
