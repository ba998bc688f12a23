package writeback

import (
	"context"
	"fmt"
	"strings"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/configbutler/gitops-reverser/crds"
)

// approvalSource is how write-back knows who set a proposal's spec.decision.
type approvalSource int

const (
	sourceUnknown          approvalSource = iota // nothing tells: approvals are asked again
	sourceWebhook                                // the admission webhook's record, in memory
	sourceValidatingPolicy                       // spec.decidedBy, which the apiserver checks
	sourceMutatingPolicy                         // spec.decidedBy, which the apiserver writes
)

// Reasons of the Ready condition in a destination's status.writeBack.
const (
	ReasonApproverFromMutatingPolicy   = "ApproverFromMutatingPolicy"
	ReasonApproverFromValidatingPolicy = "ApproverFromValidatingPolicy"
	ReasonApproverFromWebhook          = "ApproverFromWebhook"
)

// probeSpacing is the least time between two checks of which admission policy is in force.
const probeSpacing = 10 * time.Second

// probeUser is the name the probe puts in spec.decidedBy: no request is ever made by it.
const probeUser = "system:gitops-reverser:approver-probe"

// approver is who set p's decision, as the apiserver authenticated them: spec.decidedBy while
// the daemon's admission policy is in force, else the webhook's record, else the reviewer the
// daemon already acted for. False when nobody is known.
func (c *Controller) approver(ctx context.Context, p *crds.Proposal) (authenticationv1.UserInfo, bool) {
	if src := c.approvalSource(ctx, p.Namespace); src >= sourceValidatingPolicy {
		if r := p.Spec.DecidedBy; r != nil && r.Username != "" {
			return authenticationv1.UserInfo{Username: r.Username, UID: r.UID, Groups: r.Groups}, true
		}
	}
	if c.cfg.Approvers != nil {
		if u, ok := c.cfg.Approvers(p.UID, string(p.Spec.Decision)); ok {
			return u, true
		}
	}
	if r := p.Status.ReviewedBy; r != nil && p.Status.ObservedGeneration == p.Generation && p.Status.DecidedAt != nil {
		return authenticationv1.UserInfo{Username: r.Username, UID: r.UID, Groups: r.Groups}, true
	}
	return authenticationv1.UserInfo{}, false
}

// approvalSource says, from a check at most probeSpacing old, how approvers are known. The check
// is made in namespace, where the daemon may create Proposals.
func (c *Controller) approvalSource(ctx context.Context, namespace string) approvalSource {
	c.mu.Lock()
	src, fresh := c.source, time.Since(c.probedAt) < probeSpacing
	c.mu.Unlock()
	if fresh {
		return src
	}
	probed, err := c.probePolicy(ctx, namespace)
	if err != nil {
		c.cfg.Log.Warn("check which admission policy names approvers", "err", err)
		return src
	}
	if probed == sourceUnknown && c.cfg.Approvers != nil {
		probed = sourceWebhook
	}
	c.mu.Lock()
	changed := c.source != probed || c.probedAt.IsZero()
	c.source, c.probedAt = probed, time.Now()
	c.mu.Unlock()
	if changed {
		ready := readyCondition(probed)
		c.cfg.Log.Info("how approvers are known", "reason", ready.Reason, "message", ready.Message)
	}
	return probed
}

// probePolicy asks the apiserver to create, as a dry run, a Proposal whose spec.decidedBy names
// someone else: the mutating policy replaces the name with the daemon's, the validating policy
// refuses it, and without either it is accepted as it is.
func (c *Controller) probePolicy(ctx context.Context, namespace string) (approvalSource, error) {
	probe := &crds.Proposal{
		TypeMeta:   metav1.TypeMeta{APIVersion: crds.GroupVersion.String(), Kind: crds.KindProposal},
		ObjectMeta: metav1.ObjectMeta{GenerateName: "approver-probe-", Namespace: namespace},
		Spec: crds.ProposalSpec{
			DestinationRef: crds.LocalReference{Name: "approver-probe"}, Change: crds.ChangeCreate,
			Target: crds.ProposalTarget{APIVersion: "v1", Kind: "ConfigMap", Resource: "configmaps", Namespace: namespace, Name: "approver-probe"},
			Path:   "approver-probe.yaml", SourceCommit: strings.Repeat("0", 40),
			Author:  crds.GitAuthor{Name: "probe", Email: "probe@invalid"},
			Desired: "kind: ConfigMap\n", Diff: "-\n",
			Decision:  crds.DecisionApprove,
			DecidedBy: &crds.Reviewer{Username: probeUser},
		},
	}
	u, err := crds.ToUnstructured(probe)
	if err != nil {
		return sourceUnknown, err
	}
	created, err := c.dyn.Resource(crds.Proposals).Namespace(namespace).Create(ctx, u, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	switch {
	case (apierrors.IsForbidden(err) || apierrors.IsInvalid(err)) && strings.Contains(err.Error(), crds.ApproverPolicyName):
		return sourceValidatingPolicy, nil
	case err != nil:
		return sourceUnknown, fmt.Errorf("dry-run a Proposal in %s: %w", namespace, err)
	}
	if name, _, _ := unstructured.NestedString(created.Object, "spec", "decidedBy", "username"); name != probeUser {
		return sourceMutatingPolicy, nil
	}
	return sourceUnknown, nil
}

// readyCondition is the Ready condition of write-back for the way approvers are known.
func readyCondition(src approvalSource) metav1.Condition {
	c := metav1.Condition{Type: crds.ConditionReady, Status: metav1.ConditionTrue}
	switch src {
	case sourceMutatingPolicy:
		c.Reason = ReasonApproverFromMutatingPolicy
		c.Message = "the apiserver writes who sets spec.decision into spec.decidedBy (MutatingAdmissionPolicy " +
			crds.ApproverPolicyName + "): an approval is checked against its approver's own permissions"
	case sourceValidatingPolicy:
		c.Reason = ReasonApproverFromValidatingPolicy
		c.Message = "the apiserver refuses a spec.decidedBy that is not the requester (ValidatingAdmissionPolicy " +
			crds.ApproverPolicyName + "): set spec.decidedBy.username to your own name with spec.decision (the operator page does)"
	case sourceWebhook:
		c.Reason = ReasonApproverFromWebhook
		c.Message = "no admission policy of the daemon is in force: who sets spec.decision is known from the admission webhook only, " +
			"and an approval made while it is unreachable is asked again"
	default:
		c.Status, c.Reason = metav1.ConditionFalse, ReasonApproverUnknown
		c.Message = "nothing tells who sets spec.decision (no admission policy of the daemon in force and no webhook): approvals are refused; " +
			"let the daemon install its policies (--approver-policy) or enable the webhook"
	}
	return c
}
