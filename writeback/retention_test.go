package writeback

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/configbutler/gitops-reverser/crds"
	"github.com/configbutler/gitops-reverser/testenv"
)

// TestEndedProposalsArePrunedAfterTheirRetention: with a retention of an hour, the destination's
// Applied, Rejected, Stale and Superseded proposals that ended two hours ago are deleted; those
// that ended lately, a Superseded one whose successor was opened just now, Pending and Ignored
// ones, and another destination's are kept.
func TestEndedProposalsArePrunedAfterTheirRetention(t *testing.T) {
	e := newWBEnv(t, &crds.WriteBack{Enabled: true})
	c := e.start(Config{Kube: cp.AdminConfig(), Git: &edits{Pool: e.startPool()}, Interval: time.Hour,
		ProposalRetention: time.Hour, Log: slog.New(slog.DiscardHandler)}, nil)
	long, lately := metav1.NewTime(time.Now().Add(-2*time.Hour)), metav1.NewTime(time.Now().Add(-30*time.Minute))
	cond := func(at metav1.Time, status metav1.ConditionStatus, reason string) []metav1.Condition {
		return []metav1.Condition{{Type: crds.ConditionApplied, Status: status, Reason: reason, Message: reason, LastTransitionTime: at}}
	}
	cases := []struct {
		name, dest string
		status     crds.ProposalStatus
		kept       bool
	}{
		{name: "approved-long-ago", status: crds.ProposalStatus{Phase: crds.PhaseApplied, DecidedAt: &long, AppliedAt: &long,
			Conditions: cond(long, metav1.ConditionTrue, reasonApplied)}},
		{name: "auto-applied-long-ago", status: crds.ProposalStatus{Phase: crds.PhaseApplied, AppliedAt: &long, AutoApplied: true}},
		{name: "rejected-long-ago", status: crds.ProposalStatus{Phase: crds.PhaseRejected, DecidedAt: &long,
			Conditions: cond(long, metav1.ConditionFalse, reasonRejected)}},
		{name: "stale-long-ago", status: crds.ProposalStatus{Phase: crds.PhaseStale, Conditions: cond(long, metav1.ConditionFalse, reasonStale)}},
		{name: "superseded-by-a-gone-one", status: crds.ProposalStatus{Phase: crds.PhaseSuperseded, SupersededBy: "gone",
			Conditions: cond(long, metav1.ConditionFalse, reasonSuperseded)}},
		{name: "superseded-just-now", kept: true, status: crds.ProposalStatus{Phase: crds.PhaseSuperseded, SupersededBy: "pending",
			Conditions: cond(long, metav1.ConditionFalse, reasonSuperseded)}},
		{name: "applied-lately", kept: true, status: crds.ProposalStatus{Phase: crds.PhaseApplied, DecidedAt: &lately, AppliedAt: &lately,
			Conditions: cond(lately, metav1.ConditionTrue, reasonApplied)}},
		{name: "ignored-long-ago", kept: true, status: crds.ProposalStatus{Phase: crds.PhaseIgnored, DecidedAt: &long,
			Conditions: cond(long, metav1.ConditionFalse, reasonIgnored)}},
		{name: "pending", kept: true, status: crds.ProposalStatus{Phase: crds.PhasePending,
			Conditions: cond(long, metav1.ConditionFalse, reasonAwaitingReview)}},
		{name: "another-destinations", dest: "other", kept: true, status: crds.ProposalStatus{Phase: crds.PhaseApplied,
			DecidedAt: &long, AppliedAt: &long, Conditions: cond(long, metav1.ConditionTrue, reasonApplied)}},
	}
	// The queue tells the daemon's proposals by their seal once it has read the key. Before, it
	// would send each to decide, which marks a waiting one whose live object moved (none of these
	// ConfigMaps exists) Stale, and Stale ones that waited long are pruned.
	if _, err := c.sealKey(context.Background()); err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, tc := range cases {
		e.proposalWithStatus(tc.name, cmp.Or(tc.dest, "dest"), tc.status)
		if tc.kept {
			want = append(want, tc.name)
		}
	}
	testenv.Eventually(t, converge, "every proposal's status cached", func() (bool, string) {
		props, ok := c.caches.Indexer(crds.Proposals)
		if !ok {
			return false, "no cache of proposals"
		}
		n := 0
		for _, item := range props.List() {
			u := item.(*unstructured.Unstructured)
			if phase, _, _ := unstructured.NestedString(u.Object, "status", "phase"); u.GetNamespace() == e.ns && phase != "" {
				n++
			}
		}
		return n == len(cases), fmt.Sprintf("%d of %d", n, len(cases))
	})
	d, err := c.destination(e.ns, "dest")
	if err != nil {
		t.Fatal(err)
	}
	c.pruneProposals(context.Background(), d)

	list, err := e.dyn.Resource(crds.Proposals).Namespace(e.ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, u := range list.Items {
		got = append(got, u.GetName())
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("proposals left %v, want %v", got, want)
	}
}

// proposalWithStatus creates an update proposal of ConfigMap name for destination dest, then
// writes status through the status subresource, as the daemon does.
func (e *wbEnv) proposalWithStatus(name, dest string, status crds.ProposalStatus) {
	e.t.Helper()
	ctx := context.Background()
	desired := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: " + name + "\n  namespace: " + e.ns + "\ndata:\n  k: v\n"
	p := &crds.Proposal{
		TypeMeta:   metav1.TypeMeta{APIVersion: crds.GroupVersion.String(), Kind: crds.KindProposal},
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{crds.LabelDestination: dest}},
		Spec: crds.ProposalSpec{
			DestinationRef: crds.LocalReference{Name: dest}, Change: crds.ChangeUpdate,
			Target: crds.ProposalTarget{APIVersion: "v1", Kind: "ConfigMap", Resource: "configmaps", Namespace: e.ns, Name: name},
			Path:   "clusters/test/" + e.ns + "/configmaps/" + name + ".yaml", SourceCommit: fmt.Sprintf("%040x", 1),
			Author: crds.GitAuthor{Name: "Alice", Email: "alice@example.com"}, Desired: desired,
			Diff: "--- live\n+++ desired\n", LiveResourceVersion: "1", LiveDigest: fmt.Sprintf("%064x", 1),
		},
	}
	p.Namespace = e.ns
	p.Annotations = map[string]string{crds.AnnotationSeal: seal(testSealKey, p)} // as the daemon opened it
	e.create(crds.Proposals, p)
	client := e.dyn.Resource(crds.Proposals).Namespace(e.ns)
	u, err := client.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	got, err := crds.FromUnstructured[crds.Proposal](u)
	if err != nil {
		e.t.Fatal(err)
	}
	got.Status = status
	got.Status.ObservedGeneration = got.Generation
	if u, err = crds.ToUnstructured(got); err != nil {
		e.t.Fatal(err)
	}
	if _, err := client.UpdateStatus(ctx, u, metav1.UpdateOptions{}); err != nil {
		e.t.Fatalf("write the status of Proposal %s: %v", name, err)
	}
}
