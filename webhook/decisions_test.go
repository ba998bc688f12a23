package webhook

import (
	"net/http"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus/testutil"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/configbutler/gitops-reverser/metrics"
)

const proposalUID = types.UID("7c1e0d2a-5b7f-4f5e-9a51-2f0b3c4d5e6f")

// Users of the decision reviews, as the apiserver sends userInfo.
var (
	aliceInfo = authenticationv1.UserInfo{Username: "alice", UID: "a-1", Groups: []string{"developers", "system:authenticated"},
		Extra: map[string]authenticationv1.ExtraValue{"email": {"alice@example.com"}}}
	bobInfo   = authenticationv1.UserInfo{Username: "bob", UID: "b-1", Groups: []string{"developers", "system:authenticated"}}
	carolInfo = authenticationv1.UserInfo{Username: "carol", UID: "c-1", Groups: []string{"operators", "system:authenticated"}}
)

// userJSON renders u as the userInfo of a review.
func userJSON(u authenticationv1.UserInfo) map[string]any {
	out := map[string]any{"username": u.Username, "uid": u.UID, "groups": u.Groups}
	if u.Extra != nil {
		out["extra"] = u.Extra
	}
	return out
}

// proposal is a Proposal with the given decision ("" leaves spec.decision out) and labels.
func proposal(uid types.UID, decision string, labels map[string]any) map[string]any {
	spec := map[string]any{"path": "team-a/configmaps/app.yaml", "patch": "data:\n  k: v2\n"}
	if decision != "" {
		spec["decision"] = decision
	}
	meta := map[string]any{"name": "p-1", "namespace": "team-a", "creationTimestamp": "2025-10-20T12:00:00Z"}
	if uid != "" {
		meta["uid"] = string(uid)
	}
	if labels != nil {
		meta["labels"] = labels
	}
	return map[string]any{"apiVersion": "configbutler.ai/v1alpha1", "kind": "Proposal", "metadata": meta, "spec": spec}
}

// proposalReview is a review of a Proposal change by user; old nil makes it a CREATE.
func proposalReview(user authenticationv1.UserInfo, object, old map[string]any) reviewCase {
	rc := reviewCase{op: "UPDATE", namespace: "team-a", name: "p-1", gvr: ProposalsResource, kind: "Proposal",
		object: object, oldObject: old, user: userJSON(user)}
	if old == nil {
		rc.op = "CREATE"
	}
	return rc
}

// newDecisionHandler records decisions on a clock the test moves, and attributes ConfigMaps and,
// to show that proposals never reach the store, proposals too.
func newDecisionHandler(tb testing.TB) (http.Handler, *Decisions, *Store, *metrics.Attribution, *testClock) {
	tb.Helper()
	s, m, clock := newTestStore(tb, StoreConfig{})
	var w Watched
	w.Set(WithProposals([]Resource{{GVR: configMaps, Namespaced: true}}))
	d := NewDecisions(0, 0, clock.Now)
	return NewAdmissionHandler(s, &w, m, nil, WithDecisions(d)), d, s, m, clock
}

// send posts rc to h and checks that it was allowed.
func send(tb testing.TB, h http.Handler, rc reviewCase) {
	tb.Helper()
	rec := post(h, http.MethodPost, "application/json", rc.review(tb))
	assertAllowed(tb, rec.Code, rec.Body.Bytes())
}

// wantWho fails unless Who(proposalUID, decision) is user's record, or a miss when user is nil.
func wantWho(tb testing.TB, d *Decisions, decision string, user *authenticationv1.UserInfo) {
	tb.Helper()
	got, ok := d.Who(proposalUID, decision)
	switch {
	case user == nil && ok:
		tb.Errorf("Who(%q) = %s; want no record", decision, got.User.Username)
	case user != nil && !ok:
		tb.Errorf("Who(%q) = no record; want %s", decision, user.Username)
	case user != nil:
		if diff := cmp.Diff(*user, got.User); diff != "" || got.Decision != decision {
			tb.Errorf("Who(%q) = %q by %+v; want by %+v (-want +got):\n%s", decision, got.Decision, got.User, *user, diff)
		}
	}
}

func TestDecisionIsRecordedOnlyWhenItChanges(t *testing.T) {
	h, d, s, m, clock := newDecisionHandler(t)
	results := func() map[string]float64 {
		out := map[string]float64{}
		for _, r := range []string{metrics.ReviewRecorded, metrics.ReviewIgnored, metrics.ReviewDryRun, metrics.ReviewError} {
			out[r] = testutil.ToFloat64(m.Reviews.WithLabelValues(r))
		}
		return out
	}

	send(t, h, proposalReview(bobInfo, proposal(proposalUID, "", nil), nil))
	if d.Len() != 0 {
		t.Fatalf("a proposal created without a decision was recorded")
	}

	clock.Advance(time.Minute)
	approvedAt := clock.Now()
	send(t, h, proposalReview(aliceInfo, proposal(proposalUID, "Approve", nil), proposal(proposalUID, "", nil)))
	wantWho(t, d, "Approve", &aliceInfo)
	if got, _ := d.Who(proposalUID, "Approve"); !got.At.Equal(approvedAt) {
		t.Errorf("At = %v; want %v", got.At, approvedAt)
	}

	clock.Advance(time.Minute)
	send(t, h, proposalReview(bobInfo, proposal(proposalUID, "Approve", map[string]any{"x": "y"}), proposal(proposalUID, "Approve", nil)))
	wantWho(t, d, "Approve", &aliceInfo)

	send(t, h, proposalReview(bobInfo, proposal(proposalUID, "Reject", nil), proposal(proposalUID, "Approve", nil)))
	wantWho(t, d, "Reject", &bobInfo)
	wantWho(t, d, "Approve", nil)

	dry := proposalReview(carolInfo, proposal(proposalUID, "Ignore", nil), proposal(proposalUID, "Reject", nil))
	dry.dryRun = true
	send(t, h, dry)
	wantWho(t, d, "Ignore", nil)
	wantWho(t, d, "Reject", &bobInfo)

	send(t, h, proposalReview(carolInfo, proposal(proposalUID, "", nil), proposal(proposalUID, "Reject", nil)))
	wantWho(t, d, "", &carolInfo)
	wantWho(t, d, "Reject", nil)

	if s.Len() != 0 {
		t.Errorf("store Len = %d; proposals must not reach the attribution store", s.Len())
	}
	want := map[string]float64{metrics.ReviewRecorded: 3, metrics.ReviewIgnored: 2, metrics.ReviewDryRun: 1, metrics.ReviewError: 0}
	if diff := cmp.Diff(want, results()); diff != "" {
		t.Errorf("admission_reviews_total (-want +got):\n%s", diff)
	}
}

func TestDecisionReviewResults(t *testing.T) {
	otherVersion := schema.GroupVersionResource{Group: ProposalsResource.Group, Version: "v1beta1", Resource: ProposalsResource.Resource}
	withShadow := proposal(proposalUID, "", nil)
	withShadow["spec"].(map[string]any)["Decision"] = "Approve" // preserved unknown field, not the decision
	numeric := proposal(proposalUID, "", nil)
	numeric["spec"].(map[string]any)["decision"] = 1
	otherUID := proposal("another-uid", "", nil)
	cases := []struct {
		name     string
		rc       reviewCase
		result   string
		decision string // recorded for proposalUID, by alice; "-" for none
	}{
		{"create with a decision", proposalReview(aliceInfo, proposal(proposalUID, "Approve", nil), nil), metrics.ReviewRecorded, "Approve"},
		{"another version of the resource", func() reviewCase {
			rc := proposalReview(aliceInfo, proposal(proposalUID, "Ignore", nil), proposal(proposalUID, "", nil))
			rc.gvr = otherVersion
			return rc
		}(), metrics.ReviewRecorded, "Ignore"},
		{"dry run", func() reviewCase {
			rc := proposalReview(aliceInfo, proposal(proposalUID, "Approve", nil), nil)
			rc.dryRun = true
			return rc
		}(), metrics.ReviewDryRun, "-"},
		{"status subresource", func() reviewCase {
			rc := proposalReview(aliceInfo, proposal(proposalUID, "Approve", nil), proposal(proposalUID, "", nil))
			rc.subResource = "status"
			return rc
		}(), metrics.ReviewIgnored, "-"},
		{"delete", reviewCase{op: "DELETE", namespace: "team-a", name: "p-1", gvr: ProposalsResource, kind: "Proposal",
			oldObject: proposal(proposalUID, "Approve", nil)}, metrics.ReviewIgnored, "-"},
		{"no uid", proposalReview(aliceInfo, proposal("", "Approve", nil), nil), metrics.ReviewError, "-"},
		{"uid differs from the old object's", proposalReview(aliceInfo, proposal(proposalUID, "Approve", nil), otherUID), metrics.ReviewError, "-"},
		{"update without an old object", reviewCase{op: "UPDATE", namespace: "team-a", name: "p-1", gvr: ProposalsResource, kind: "Proposal",
			object: proposal(proposalUID, "Approve", nil), user: userJSON(aliceInfo)}, metrics.ReviewError, "-"},
		{"decision that is not a string", proposalReview(aliceInfo, numeric, nil), metrics.ReviewError, "-"},
		{"key that only differs in case", proposalReview(aliceInfo, withShadow, proposal(proposalUID, "", nil)), metrics.ReviewIgnored, "-"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h, d, _, m, _ := newDecisionHandler(t)
			send(t, h, tc.rc)
			if n := testutil.ToFloat64(m.Reviews.WithLabelValues(tc.result)); n != 1 {
				t.Errorf("admission_reviews_total{result=%q} = %v; want 1", tc.result, n)
			}
			if tc.decision == "-" {
				if d.Len() != 0 {
					t.Errorf("Len = %d; want nothing recorded", d.Len())
				}
				return
			}
			wantWho(t, d, tc.decision, &aliceInfo)
		})
	}
}

// Without WithDecisions a proposal is reviewed like any other resource: attributed when watched.
func TestProposalsWithoutDecisionsAreAttributedLikeAnyResource(t *testing.T) {
	s, _, _ := newTestStore(t, StoreConfig{})
	var w Watched
	w.Set(WithProposals(nil))
	h := NewAdmissionHandler(s, &w, nil, nil, WithDecisions(nil))
	send(t, h, proposalReview(aliceInfo, proposal(proposalUID, "Approve", nil), proposal(proposalUID, "", nil)))
	if s.Len() != 1 {
		t.Errorf("store Len = %d; want the watched proposal attributed", s.Len())
	}
}

func TestDecisionsEvictTheOldestAtCapacity(t *testing.T) {
	clock := &testClock{now: time.Date(2025, 10, 20, 12, 0, 0, 0, time.UTC)}
	d := NewDecisions(2, time.Hour, clock.Now)
	d.Record("p1", "Approve", alice)
	d.Record("p2", "Approve", alice)
	d.Record("p1", "Reject", alice) // p1 is now the youngest
	d.Record("p3", "Approve", alice)
	if d.Len() != 2 {
		t.Fatalf("Len = %d; want 2", d.Len())
	}
	if _, ok := d.Who("p2", "Approve"); ok {
		t.Error("p2, changed longest ago, was kept")
	}
	for uid, decision := range map[types.UID]string{"p1": "Reject", "p3": "Approve"} {
		if _, ok := d.Who(uid, decision); !ok {
			t.Errorf("%s was evicted", uid)
		}
	}
}

func TestDecisionsExpireAfterTheTTL(t *testing.T) {
	clock := &testClock{now: time.Date(2025, 10, 20, 12, 0, 0, 0, time.UTC)}
	d := NewDecisions(0, 0, clock.Now)
	d.Record("old", "Approve", alice)
	clock.Advance(time.Hour)
	d.Record("young", "Approve", alice)
	clock.Advance(DefaultDecisionsTTL - time.Hour)
	if _, ok := d.Who("old", "Approve"); !ok {
		t.Fatal("a record exactly the TTL old was dropped")
	}
	clock.Advance(time.Nanosecond)
	if _, ok := d.Who("old", "Approve"); ok {
		t.Fatal("a record older than the TTL was returned")
	}
	if d.Len() != 1 {
		t.Errorf("Len = %d; want the expired record dropped", d.Len())
	}
	clock.Advance(time.Hour)
	d.Record("new", "Approve", alice) // a write drops expired records too
	if d.Len() != 1 {
		t.Errorf("Len = %d after the young record expired; want 1", d.Len())
	}
}

func TestDecisionsForgetCopyAndNil(t *testing.T) {
	d := NewDecisions(0, 0, nil)
	user := cloneUser(aliceInfo)
	d.Record(proposalUID, "Approve", user)
	user.Groups[0] = "system:masters" // the recorder's copy changes after the fact
	got, _ := d.Who(proposalUID, "Approve")
	got.User.Groups[1] = "system:masters" // so does a caller's
	got.User.Extra["email"][0] = "mallory@example.com"
	wantWho(t, d, "Approve", &aliceInfo)
	d.Record("", "Approve", alice)
	if d.Len() != 1 {
		t.Errorf("Len = %d; an empty uid was recorded", d.Len())
	}
	d.Forget(proposalUID)
	wantWho(t, d, "Approve", nil)

	var none *Decisions
	none.Record(proposalUID, "Approve", alice)
	none.Forget(proposalUID)
	if _, ok := none.Who(proposalUID, "Approve"); ok || none.Len() != 0 {
		t.Error("a nil Decisions knows something")
	}
}

func TestWithProposalsRegistersAndWatchesProposals(t *testing.T) {
	rs := make([]Resource, 1, 4)
	rs[0] = Resource{GVR: configMaps, Namespaced: true}
	got := WithProposals(rs[:1])
	if len(rs[:cap(rs)][1].Operations) != 0 || rs[:cap(rs)][1].GVR != (schema.GroupVersionResource{}) {
		t.Error("WithProposals wrote into the caller's array")
	}
	var w Watched
	w.Set(got)
	for _, tc := range []struct {
		op   string
		want bool
	}{{"CREATE", true}, {"UPDATE", true}, {"DELETE", false}} {
		if w.Has(ProposalsResource, "any-namespace", tc.op) != tc.want {
			t.Errorf("Has(proposals, %s) = %v; want %v", tc.op, !tc.want, tc.want)
		}
	}
	want := []ruleSummary{
		{"", "v1", "configmaps", []admissionregistrationv1.OperationType{"CREATE", "DELETE", "UPDATE"}, admissionregistrationv1.NamespacedScope},
		{"configbutler.ai", "v1alpha1", "proposals", []admissionregistrationv1.OperationType{"CREATE", "UPDATE"}, admissionregistrationv1.NamespacedScope},
	}
	var rules []admissionregistrationv1.RuleWithOperations
	for _, r := range NewRegistration(RegistrationConfig{URL: "https://127.0.0.1:1"}).desired(got).Webhooks[0].Rules {
		rules = append(rules, admissionregistrationv1.RuleWithOperations{
			Operations: r.Operations,
			Rule: admissionregistrationv1.Rule{APIGroups: r.APIGroups, APIVersions: r.APIVersions,
				Resources: r.Resources, Scope: r.Scope},
		})
	}
	if gotRules := summarize(rules); !sameRules(gotRules, want) {
		t.Errorf("rules = %+v; want %+v", gotRules, want)
	}
}
