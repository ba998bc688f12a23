package daemon

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	"github.com/configbutler/gitops-reverser/crds"
	"github.com/configbutler/gitops-reverser/testenv"
)

// patchAs merge-patches a proposal's spec as user, returning the apiserver's answer.
func (w *wbWorld) patchAs(user string, p *crds.Proposal, spec string) error {
	client := dynamic.NewForConfigOrDie(planes.Of(w.t).ImpersonatingConfig(user, testenv.Users[user]...))
	_, err := client.Resource(crds.Proposals).Namespace(w.ns).Patch(context.Background(), p.Name, types.MergePatchType,
		[]byte(`{"spec":`+spec+`}`), metav1.PatchOptions{})
	return err
}

// waitReady waits for the destination's write-back Ready condition to have reason.
func (w *wbWorld) waitReady(reason string) {
	w.t.Helper()
	testenv.Eventually(w.t, time.Minute, "write-back Ready: "+reason, func() (bool, string) {
		c := meta.FindStatusCondition(w.destStatus().Conditions, crds.ConditionReady)
		if c != nil && c.Reason == reason {
			return true, ""
		}
		w.syncNow() // a run records the condition; the daemon checks the policies every 10 s
		if c == nil {
			return false, "no Ready condition"
		}
		return false, fmt.Sprintf("%s %s: %s", c.Status, c.Reason, c.Message)
	}, w.d.FailFast())
}

func applied(name string) func(*crds.Proposal) bool {
	return func(q *crds.Proposal) bool { return q.Name == name && q.Status.Phase == crds.PhaseApplied }
}

// TestApprovalsStampedByTheAPIServer: with the webhook off, the apiserver's mutating policy writes
// the approver into the Proposal, so alice's plain `kubectl patch` approval is applied, dave's (no
// RBAC on ConfigMaps) is refused, nobody can name someone else, and an approval made while the
// daemon is stopped is applied once it starts again.
func TestApprovalsStampedByTheAPIServer(t *testing.T) {
	planes.Lend(t)
	w := newWBWorld(t, "wb-stamped", crds.WriteBack{Enabled: true}, nil, "--enable-webhook=false")
	w.reviewers("alice", "dave")
	grant(t, w.kube, w.ns, "alice")
	w.waitReady("ApproverFromMutatingPolicy")

	path, p := w.pendingEdit("by-alice")
	w.decide("alice", p, crds.DecisionApprove)
	p = w.waitProposal(path, "alice's approval applied", applied(p.Name))
	if p.Status.ReviewedBy == nil || p.Status.ReviewedBy.Username != "alice" || p.Spec.DecidedBy == nil || p.Spec.DecidedBy.Username != "alice" {
		t.Errorf("reviewedBy %+v, decidedBy %+v; want alice", p.Status.ReviewedBy, p.Spec.DecidedBy)
	}
	if got := w.liveColor("by-alice"); got != "green" {
		t.Errorf("color %q after alice's approval, want green", got)
	}

	path, p = w.pendingEdit("by-dave")
	if err := w.patchAs("dave", p, `{"decidedBy":{"username":"alice"}}`); err == nil || !strings.Contains(err.Error(), crds.ApproverPolicyName) {
		t.Errorf("dave naming alice as the approver: %v, want a refusal by %s", err, crds.ApproverPolicyName)
	}
	w.decide("dave", p, crds.DecisionApprove)
	w.waitProposal(path, "dave's approval refused", refusedFor(p, "Forbidden"))
	if got := w.liveColor("by-dave"); got != "blue" {
		t.Errorf("dave's approval changed the ConfigMap: color %q", got)
	}

	path, p = w.pendingEdit("offline")
	w.d.Stop(t)
	w.decide("alice", p, crds.DecisionApprove)
	w.d = startDaemon(w.root, w.root.TempDir(), "--git-batch-quiet-ms", "200", "--enable-webhook=false")
	w.waitProposal(path, "the approval made while the daemon was stopped applied", applied(p.Name))
	if got := w.liveColor("offline"); got != "green" {
		t.Errorf("color %q after the offline approval, want green", got)
	}
}

// TestApprovalsNamedUnderTheValidatingPolicy is the path of Kubernetes 1.30–1.35, where only the
// validating policy exists: an approval must name its approver in spec.decidedBy, and the
// apiserver refuses one without it or naming someone else.
func TestApprovalsNamedUnderTheValidatingPolicy(t *testing.T) {
	planes.Lend(t)
	w := newWBWorld(t, "wb-named", crds.WriteBack{Enabled: true}, nil, "--enable-webhook=false", "--approver-policy=validating")
	w.reviewers("alice", "dave")
	grant(t, w.kube, w.ns, "alice")
	w.waitReady("ApproverFromValidatingPolicy")

	path, p := w.pendingEdit("named")
	if err := w.patchAs("alice", p, `{"decision":"Approve"}`); err == nil || !strings.Contains(err.Error(), "decidedBy") {
		t.Errorf("an approval that names nobody: %v, want a refusal asking for spec.decidedBy", err)
	}
	if err := w.patchAs("dave", p, `{"decision":"Approve","decidedBy":{"username":"alice"}}`); err == nil {
		t.Error("dave approving in alice's name was accepted")
	}
	stamped := fmt.Sprintf(`{"decision":"Approve","decidedBy":{"username":"alice","groups":["developers"],"stamp":%q}}`, p.Status.Stamp)
	if err := w.patchAs("alice", p, stamped); err != nil {
		t.Fatal(err)
	}
	p = w.waitProposal(path, "alice's named approval applied", applied(p.Name))
	if p.Status.ReviewedBy == nil || p.Status.ReviewedBy.Username != "alice" {
		t.Errorf("reviewedBy %+v, want alice", p.Status.ReviewedBy)
	}
}

// TestApprovalHonouredAfterAFailover: alice approves while replica a leads but may apply nothing
// (--halt-write-back); a second replica, b, takes over when a stops and applies the approval,
// reading its approver from the Proposal. The webhook is off, so only the Proposal tells.
func TestApprovalHonouredAfterAFailover(t *testing.T) {
	planes.Lend(t)
	const lease = "wb-failover-leader"
	flags := []string{"--enable-webhook=false", "--leader-election-lease-duration", "4s", "--leader-election-renew-deadline", "3s",
		"--leader-election-retry-period", "1s"}
	w := newWBWorld(t, "wb-failover", crds.WriteBack{Enabled: true}, func(w *wbWorld) {
		replicaPods(t, w.kube, "wb-a", "wb-b")
	}, append([]string{"--leader-elect", "--leader-election-id", lease, "--pod-name", "wb-a", "--halt-write-back"}, flags...)...)
	w.reviewers("alice")
	grant(t, w.kube, w.ns, "alice")
	w.waitReady("ApproverFromMutatingPolicy")

	path, p := w.pendingEdit("failover")
	w.decide("alice", p, crds.DecisionApprove)
	w.waitProposal(path, "the approval held by replica a", appliedReason(p, "Halted"))
	b := startReplica(t, "wb-b", lease, flags...)
	waitStandingBy(t, b)
	w.d.Stop(t)
	w.d = b.Daemon
	p = w.waitProposal(path, "the approval applied by replica b", applied(p.Name))
	if p.Status.ReviewedBy == nil || p.Status.ReviewedBy.Username != "alice" {
		t.Errorf("reviewedBy %+v, want alice", p.Status.ReviewedBy)
	}
	if got := w.liveColor("failover"); got != "green" {
		t.Errorf("color %q after the failover, want green", got)
	}
}
