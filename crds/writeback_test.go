package crds_test

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"

	"github.com/configbutler/gitops-reverser/crds"
	"github.com/configbutler/gitops-reverser/testenv"
)

// writeBackNS holds the write-back objects these tests really create.
const writeBackNS = "write-back"

// mustCreate creates obj (a typed object of this package) and deletes it when the test ends.
func mustCreate(t *testing.T, dyn dynamic.Interface, obj any) (dynamic.ResourceInterface, *unstructured.Unstructured) {
	t.Helper()
	u, err := crds.ToUnstructured(obj)
	if err != nil {
		t.Fatal(err)
	}
	client := dyn.Resource(gvrOf(t, u.GetKind())).Namespace(u.GetNamespace())
	created, err := client.Create(testContext(t), u, metav1.CreateOptions{FieldValidation: strict})
	if err != nil {
		t.Fatalf("create %s %s: %v", u.GetKind(), u.GetName(), err)
	}
	t.Cleanup(func() { _ = client.Delete(context.Background(), u.GetName(), metav1.DeleteOptions{}) })
	return client, created
}

// getAs reads name through client into a T.
func getAs[T any](t *testing.T, client dynamic.ResourceInterface, name string) *T {
	t.Helper()
	u, err := client.Get(testContext(t), name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get %s: %v", name, err)
	}
	out, err := crds.FromUnstructured[T](u)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// update sends obj as an update of the main resource.
func update(t *testing.T, client dynamic.ResourceInterface, obj any) error {
	t.Helper()
	u, err := crds.ToUnstructured(obj)
	if err != nil {
		t.Fatal(err)
	}
	_, err = client.Update(testContext(t), u, metav1.UpdateOptions{FieldValidation: strict})
	return err
}

// TestProposalSpecIsImmutableExceptDecision: what a reviewer approves is exactly what the daemon
// computed, so every spec field but decision is refused on update, whoever sends it; decision
// moves freely between its values, and only those.
func TestProposalSpecIsImmutableExceptDecision(t *testing.T) {
	dyn := mustInstall(t)
	mustNamespace(t, writeBackNS)
	client, _ := mustCreate(t, dyn, fullProposal(writeBackNS, "immutable"))

	changes := []struct {
		field string // the field the error must name
		edit  func(*crds.ProposalSpec)
	}{
		{"spec.destinationRef", func(s *crds.ProposalSpec) { s.DestinationRef.Name = "other" }},
		{"spec.change", func(s *crds.ProposalSpec) { s.Change = crds.ChangeDestroy }},
		{"spec.target", func(s *crds.ProposalSpec) { s.Target.Name = "db" }},
		{"spec.target", func(s *crds.ProposalSpec) { s.Target.Namespace = "" }}, // dropping an optional field too
		{"spec.path", func(s *crds.ProposalSpec) { s.Path = "clusters/prod/team-a/deployments.apps/db.yaml" }},
		{"spec.sourceCommit", func(s *crds.ProposalSpec) { s.SourceCommit = strings.Repeat("c", 40) }},
		{"spec.author", func(s *crds.ProposalSpec) { s.Author.Email = "mallory@example.com" }},
		{"spec.desired", func(s *crds.ProposalSpec) { s.Desired += "  paused: true\n" }},
		{"spec.diff", func(s *crds.ProposalSpec) { s.Diff = "" }},
		{"spec.liveResourceVersion", func(s *crds.ProposalSpec) { s.LiveResourceVersion = "99999" }},
		{"spec.liveDigest", func(s *crds.ProposalSpec) { s.LiveDigest = "" }},
	}
	for i, c := range changes {
		t.Run(fmt.Sprintf("%d change of %s refused", i, c.field), func(t *testing.T) {
			p := getAs[crds.Proposal](t, client, "immutable")
			c.edit(&p.Spec)
			err := update(t, client, p)
			if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), c.field) || !strings.Contains(err.Error(), "is immutable") {
				t.Fatalf("err = %v, want Invalid naming %s as immutable", err, c.field)
			}
		})
	}

	for _, d := range []crds.Decision{crds.DecisionReject, crds.DecisionIgnore, crds.DecisionNone, crds.DecisionApprove} {
		t.Run(fmt.Sprintf("decision %q accepted", d), func(t *testing.T) {
			p := getAs[crds.Proposal](t, client, "immutable")
			p.Spec.Decision = d
			if err := update(t, client, p); err != nil {
				t.Fatalf("decision %q refused: %v", d, err)
			}
			if got := getAs[crds.Proposal](t, client, "immutable").Spec.Decision; got != d {
				t.Errorf("decision = %q, want %q", got, d)
			}
		})
	}
	t.Run("decision outside the enum refused", func(t *testing.T) {
		p := getAs[crds.Proposal](t, client, "immutable")
		p.Spec.Decision = "Yes"
		if err := update(t, client, p); !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "spec.decision") {
			t.Fatalf("err = %v, want Invalid on spec.decision", err)
		}
	})
	t.Run("decision by merge patch accepted", func(t *testing.T) {
		_, err := client.Patch(testContext(t), "immutable", "application/merge-patch+json",
			[]byte(`{"spec":{"decision":"Reject"}}`), metav1.PatchOptions{})
		if err != nil {
			t.Fatal(err)
		}
	})
}

// TestProposalStatusOnlyThroughSubresource: a reviewer who may update Proposals cannot mark one
// Applied; only the status subresource (the daemon's) writes status, and it cannot touch spec.
func TestProposalStatusOnlyThroughSubresource(t *testing.T) {
	dyn := mustInstall(t)
	mustNamespace(t, writeBackNS)
	withStatus := fullProposal(writeBackNS, "status-guard")
	withStatus.Status = crds.ProposalStatus{Phase: crds.PhaseApplied, AutoApplied: true}
	client, created := mustCreate(t, dyn, withStatus)
	if _, found := created.Object["status"]; found {
		t.Errorf("create kept the status it was sent: %v", created.Object["status"])
	}

	p := getAs[crds.Proposal](t, client, "status-guard")
	p.Spec.Decision = crds.DecisionReject
	p.Status = crds.ProposalStatus{Phase: crds.PhaseApplied}
	if err := update(t, client, p); err != nil {
		t.Fatalf("update with a decision: %v", err)
	}
	got := getAs[crds.Proposal](t, client, "status-guard")
	if got.Spec.Decision != crds.DecisionReject {
		t.Errorf("decision = %q, want Reject", got.Spec.Decision)
	}
	if got.Status.Phase != "" {
		t.Errorf("an update of the main resource wrote status.phase %q", got.Status.Phase)
	}

	want := proposalStatus(got.Generation).(crds.ProposalStatus)
	got.Status = want
	got.Spec.Decision = crds.DecisionApprove // ignored by /status
	u, err := crds.ToUnstructured(got)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.UpdateStatus(testContext(t), u, metav1.UpdateOptions{FieldValidation: strict}); err != nil {
		t.Fatalf("update status: %v", err)
	}
	after := getAs[crds.Proposal](t, client, "status-guard")
	if diff := cmp.Diff(want, after.Status, equalTimes); diff != "" {
		t.Errorf("status after /status update (-want +got):\n%s", diff)
	}
	if after.Spec.Decision != crds.DecisionReject {
		t.Errorf("an update of /status changed the decision to %q", after.Spec.Decision)
	}
}

// TestSyncRunCreatedWithStatusInOneCall: the daemon records a run in one create, then updates it
// when the run ends; what it recorded as the run's identity (spec) stays.
func TestSyncRunCreatedWithStatusInOneCall(t *testing.T) {
	dyn := mustInstall(t)
	mustNamespace(t, writeBackNS)
	started := metav1.NewTime(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	run := &crds.SyncRun{
		ObjectMeta: metav1.ObjectMeta{Name: "prod-run", Namespace: writeBackNS, Labels: map[string]string{crds.LabelDestination: "prod"}},
		Spec:       crds.SyncRunSpec{DestinationRef: crds.LocalReference{Name: "prod"}, Trigger: crds.TriggerStartup},
		Status:     crds.SyncRunStatus{Phase: crds.SyncRunRunning, StartedAt: &started, BaseRevision: sourceCommit},
	}
	client, _ := mustCreate(t, dyn, run)
	got := getAs[crds.SyncRun](t, client, "prod-run")
	if diff := cmp.Diff(run.Status, got.Status, equalTimes); diff != "" {
		t.Fatalf("status written with the create (-sent +read):\n%s", diff)
	}

	done := syncRunStatus(1).(crds.SyncRunStatus)
	got.Status = done
	if err := update(t, client, got); err != nil {
		t.Fatalf("update at the end of the run: %v", err)
	}
	if diff := cmp.Diff(done, getAs[crds.SyncRun](t, client, "prod-run").Status, equalTimes); diff != "" {
		t.Errorf("status after the update (-sent +read):\n%s", diff)
	}

	changed := getAs[crds.SyncRun](t, client, "prod-run")
	changed.Spec.Trigger = crds.TriggerApproval
	if err := update(t, client, changed); !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "is immutable") {
		t.Errorf("err = %v, want the spec refused as immutable", err)
	}
}

// TestKubectlGetShowsWriteBackColumns runs the real kubectl: a reviewer sees what a Proposal
// changes and where it stands, an auditor what a SyncRun did, at a glance.
func TestKubectlGetShowsWriteBackColumns(t *testing.T) {
	dyn := mustInstall(t)
	const ns = "write-back-columns"
	mustNamespace(t, ns)
	ctx := testContext(t)
	bins, err := testenv.EnsureBinaries(ctx)
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := cp.WriteKubeconfig(kubeconfig); err != nil {
		t.Fatal(err)
	}

	proposals, _ := mustCreate(t, dyn, fullProposal(ns, "web"))
	p := getAs[crds.Proposal](t, proposals, "web")
	p.Status.Phase = crds.PhasePending
	u, err := crds.ToUnstructured(p)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := proposals.UpdateStatus(ctx, u, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	run := &crds.SyncRun{
		ObjectMeta: metav1.ObjectMeta{Name: "dest-run", Namespace: ns},
		Spec:       crds.SyncRunSpec{DestinationRef: crds.LocalReference{Name: "dest"}, Trigger: crds.TriggerInterval},
		Status:     syncRunStatus(1).(crds.SyncRunStatus),
	}
	mustCreate(t, dyn, run)
	dest := destinationWithWriteBack(crds.WriteBack{Enabled: true})
	dest.Namespace = ns
	mustCreate(t, dyn, dest)

	cases := []struct {
		args   []string
		header []string
		row    []string // the fields of the object's row, before AGE
	}{
		{[]string{"get", "prop", "-n", ns}, []string{"NAME", "CHANGE", "KIND", "TARGET", "PHASE", "COMMIT", "AGE"},
			[]string{"web", "update", "Deployment", "web", "Pending", sourceCommit}},
		{[]string{"get", "proposals", "-n", ns, "-o", "wide"}, []string{"NAME", "CHANGE", "KIND", "NAMESPACE", "TARGET", "PHASE", "COMMIT", "AGE"},
			[]string{"web", "update", "Deployment", "team-a", "web", "Pending", sourceCommit}},
		{[]string{"get", "sr", "-n", ns}, []string{"NAME", "DESTINATION", "STATUS", "REVISION", "DIFFERENCES", "PROPOSALS", "AGE"},
			[]string{"dest-run", "dest", "Partial", sourceCommit, "3", "3"}},
		{[]string{"get", "gd", "-n", ns, "-o", "wide"}, []string{"NAME", "READY", "REPO", "BRANCH", "FOLDER", "WRITEBACK", "OWNER", "REQUEST", "AGE"},
			[]string{"dest", "repo", "main", "clusters/prod", "true"}},
	}
	for _, tc := range cases {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			var out string
			// A just-installed CRD's columns reach the apiserver's table printer a moment later.
			err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
				b, err := exec.CommandContext(ctx, bins.Kubectl, append([]string{"--kubeconfig", kubeconfig}, tc.args...)...).CombinedOutput()
				out = string(b)
				lines := strings.Split(strings.TrimSpace(out), "\n")
				if err != nil || len(lines) != 2 {
					return false, nil
				}
				row := strings.Fields(lines[1])
				return slices.Equal(strings.Fields(lines[0]), tc.header) &&
					len(row) > len(tc.row) && slices.Equal(row[:len(tc.row)], tc.row), nil
			})
			if err != nil {
				t.Fatalf("kubectl %s never showed columns %v with %v; last output:\n%s", strings.Join(tc.args, " "), tc.header, tc.row, out)
			}
		})
	}
}
