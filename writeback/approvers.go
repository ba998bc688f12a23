package writeback

import (
	"context"
	"errors"
	"fmt"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/configbutler/gitops-reverser/controller"
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

// Reasons of the Ready condition in a destination's status.writeBack, and of the Warning Event
// when the daemon puts its admission policies back.
const (
	ReasonApproverFromMutatingPolicy   = "ApproverFromMutatingPolicy"
	ReasonApproverFromValidatingPolicy = "ApproverFromValidatingPolicy"
	ReasonApproverFromWebhook          = "ApproverFromWebhook"
	ReasonAdmissionPolicyChanged       = "AdmissionPolicyChanged"
	// ReasonStampNotCurrent refuses an approval whose spec.decidedBy carries no stamp of the
	// policies in force now (proposals_refused_total{reason}).
	ReasonStampNotCurrent = "StampNotCurrent"
)

// policiesKey asks for the daemon's admission policies to be looked at: one of them changed.
const policiesKey = "policies"

// policyKey queues policiesKey for a change of one of the daemon's policy objects.
func policyKey(obj any) string {
	if controller.ObjectKey(obj) == crds.ApproverPolicyName { // cluster-scoped: the key is the name
		return policiesKey
	}
	return ""
}

// approver is who set p's decision, as the apiserver vouches for it now: spec.decidedBy when it
// carries the epoch of the daemon's policies and they are still the ones that epoch was drawn
// for; else the webhook's record; else the reviewer the daemon already acted for at this
// generation. Never the daemon itself. False when nobody is known; refused says why a
// spec.decidedBy was not trusted ("" when there was none).
func (c *Controller) approver(ctx context.Context, p *crds.Proposal) (who authenticationv1.UserInfo, ok bool, refused string, err error) {
	if r := p.Spec.DecidedBy; r != nil && r.Username != "" && r.Username != c.cfg.Self && c.cfg.Approval != nil {
		epoch, err := c.checkPolicies(ctx)
		switch {
		case errors.Is(err, crds.ErrApproverPoliciesChanged):
			refused = err.Error()
		case err != nil:
			return who, false, "", err
		case r.Stamp != epoch:
			refused = fmt.Sprintf("its stamp %q is not %q, the epoch of the admission policies in force now (status.stamp): "+
				"it was made before they were last installed", r.Stamp, epoch)
		default:
			return authenticationv1.UserInfo{Username: r.Username, UID: r.UID, Groups: r.Groups}, true, "", nil
		}
	}
	if c.cfg.Approvers != nil {
		if u, ok := c.cfg.Approvers(p.UID, string(p.Spec.Decision)); ok && u.Username != c.cfg.Self {
			return u, true, "", nil
		}
	}
	if r := p.Status.ReviewedBy; r != nil && p.Status.ObservedGeneration == p.Generation && p.Status.DecidedAt != nil && r.Username != c.cfg.Self {
		return authenticationv1.UserInfo{Username: r.Username, UID: r.UID, Groups: r.Groups}, true, "", nil
	}
	return who, false, refused, nil
}

// checkPolicies reads the epoch of the daemon's policies from etcd, checking that they are the
// ones it was drawn for; a change found is acted on as the informer's would be.
func (c *Controller) checkPolicies(ctx context.Context) (string, error) {
	epoch, err := crds.CheckApproverPolicies(ctx, c.dyn, c.cfg.Approval.Namespace)
	if errors.Is(err, crds.ErrApproverPoliciesChanged) {
		c.ctl.Add(policiesKey)
	}
	if err == nil {
		c.epoch.Store(&epoch)
	}
	return epoch, err
}

// policiesChanged looks at the daemon's policies after one of them changed: when they are no
// longer those the epoch was drawn for, it says so on every write-back destination and puts them
// back (drawing a new epoch) if the daemon installs them; then every destination's Ready condition
// says how approvers are known now.
func (c *Controller) policiesChanged(ctx context.Context) error {
	if c.cfg.Approval == nil {
		return nil
	}
	_, err := c.checkPolicies(ctx)
	if errors.Is(err, crds.ErrApproverPoliciesChanged) {
		msg := err.Error() + ": approvals stamped before are asked again"
		if c.cfg.Approval.Reinstall != nil {
			msg = err.Error() + "; gitops-reverser put them back, and approvals stamped before are asked again"
		}
		c.cfg.Log.Warn("admission policies of the daemon changed", "change", err)
		for _, d := range c.writeBackDestinations() {
			c.recorder.Event(crds.ObjectReference(crds.KindGitDestination, d.obj), corev1.EventTypeWarning, ReasonAdmissionPolicyChanged, msg)
		}
		if c.cfg.Approval.Reinstall != nil {
			if err := c.cfg.Approval.Reinstall(ctx); err != nil {
				return fmt.Errorf("put the admission policies back: %w", err)
			}
			c.cfg.Metrics.PoliciesRestored.Inc()
			if _, err := c.checkPolicies(ctx); err != nil {
				return err
			}
		}
	} else if err != nil {
		return err
	}
	return c.refreshReady(ctx)
}

// refreshReady recomputes how approvers are known from the cached policies and, when that
// changed, writes every write-back destination's Ready condition at once.
func (c *Controller) refreshReady(ctx context.Context) error {
	src := c.approvalSource()
	c.mu.Lock()
	changed := c.source != src
	c.source = src
	c.mu.Unlock()
	if !changed {
		return nil
	}
	ready := readyCondition(src)
	c.cfg.Log.Info("how approvers are known", "reason", ready.Reason, "message", ready.Message)
	var errs []error
	for _, d := range c.writeBackDestinations() {
		st := d.status()
		meta.SetStatusCondition(&st.Conditions, ready)
		errs = append(errs, c.patchWriteBackStatus(ctx, d, st))
	}
	return errors.Join(errs...)
}

// approvalSource says how approvers are known, from the cached policy objects.
func (c *Controller) approvalSource() approvalSource {
	src := sourceUnknown
	if c.cfg.Approvers != nil {
		src = sourceWebhook
	}
	if c.cfg.Approval == nil {
		return src
	}
	present := func(resources ...int) bool {
		for _, i := range resources {
			idx, ok := c.caches.Indexer(crds.PolicyResources[i])
			if !ok {
				return false
			}
			if _, found, _ := idx.GetByKey(crds.ApproverPolicyName); !found {
				return false
			}
		}
		return true
	}
	switch {
	case present(0, 1, 2, 3):
		return sourceMutatingPolicy
	case present(0, 1):
		return sourceValidatingPolicy
	}
	return src
}

// writeBackDestinations are the cached destinations that enable write-back, may use their
// repository, and this replica owns.
func (c *Controller) writeBackDestinations() []*dest {
	var out []*dest
	for _, item := range c.dests.GetStore().List() {
		u := item.(*unstructured.Unstructured)
		d, err := c.destination(u.GetNamespace(), u.GetName())
		if err != nil || !d.writeBack().Enabled || !c.owns(d) {
			continue
		}
		if admitted, _ := c.admitted(d); admitted {
			out = append(out, d)
		}
	}
	return out
}

// readyCondition is the Ready condition of write-back for the way approvers are known.
func readyCondition(src approvalSource) metav1.Condition {
	c := metav1.Condition{Type: crds.ConditionReady, Status: metav1.ConditionTrue}
	switch src {
	case sourceMutatingPolicy:
		c.Reason = ReasonApproverFromMutatingPolicy
		c.Message = "the apiserver writes who sets spec.decision into spec.decidedBy, stamped with the epoch of the policies in force " +
			"(MutatingAdmissionPolicy " + crds.ApproverPolicyName + "): an approval is checked against its approver's own permissions"
	case sourceValidatingPolicy:
		c.Reason = ReasonApproverFromValidatingPolicy
		c.Message = "the apiserver refuses a spec.decidedBy that is not the requester (ValidatingAdmissionPolicy " +
			crds.ApproverPolicyName + "): set spec.decidedBy.username to your own name and spec.decidedBy.stamp to the Proposal's " +
			"status.stamp with spec.decision (the operator page and the CLI do)"
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
