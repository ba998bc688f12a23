package writeback

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/configbutler/gitops-reverser/crds"
)

// An automatic apply that does not reach the apiserver (it fails to answer, or a webhook it
// calls does) is tried again by the replica that owns the destination's branch, after 1, 2, 4
// and 8 s, at the destination's next runs; after maxAutoApplyAttempts the proposal waits for a
// person. One that is fenced (this replica lost the branch's lease) writes nothing: the owner's
// runs find the proposal still due. A refusal (the apiserver answered no) is not retried.
const (
	maxAutoApplyAttempts = 5
	autoApplyBackoff     = time.Second
)

// Reasons of ConditionApplied while an automatic apply is under way.
const (
	reasonAutoApplyPending = "AutoApplyPending" // opened, to be applied without review
	reasonAutoApplyFailed  = "AutoApplyFailed"  // tried and not made; tried again at autoApplyRetryAt
)

// autoApplyDue says whether the automatic apply of p, a proposal write-back opened for it, is to
// be tried now; when not, at is when it will be (zero: never, the proposal waits for a person).
func autoApplyDue(p *crds.Proposal) (due bool, at time.Time) {
	c := meta.FindStatusCondition(p.Status.Conditions, crds.ConditionApplied)
	if c == nil || p.Status.Phase != crds.PhasePending || p.Spec.Decision != crds.DecisionNone {
		return false, time.Time{}
	}
	switch {
	case c.Reason == reasonAutoApplyPending:
		return true, time.Time{}
	case c.Reason != reasonAutoApplyFailed:
		return false, time.Time{}
	case p.Status.AutoApplyRetryAt == nil || !time.Now().Before(p.Status.AutoApplyRetryAt.Time):
		return true, time.Time{}
	}
	return false, p.Status.AutoApplyRetryAt.Time
}

// autoApplyFailed records an automatic apply of p that did not reach the apiserver, counting it
// on the proposal as the apiserver has it (the cache may lag), and returns when to try again
// (zero: never, the proposal now waits for a person).
func (c *Controller) autoApplyFailed(ctx context.Context, p *crds.Proposal, cause error) (time.Time, error) {
	var retryAt time.Time
	var reason, msg string
	_, err := c.setStatus(ctx, p, func(s *crds.ProposalStatus) {
		attempts := s.AutoApplyAttempts + 1
		retryAt, reason = time.Time{}, reasonApplyFailed
		msg = fmt.Sprintf("not applied automatically after %d attempts: %v; waiting for spec.decision (Approve, Reject or Ignore)", attempts, cause)
		s.AutoApplyRetryAt = nil
		if attempts < maxAutoApplyAttempts {
			retryAt, reason = time.Now().Add(autoApplyBackoff<<(attempts-1)), reasonAutoApplyFailed
			msg = fmt.Sprintf("automatic apply failed (attempt %d of %d): %v; trying again at %s",
				attempts, maxAutoApplyAttempts, cause, retryAt.UTC().Format(time.RFC3339))
			s.AutoApplyRetryAt = &metav1.Time{Time: retryAt}
		}
		s.Phase, s.Message, s.AutoApplyAttempts = crds.PhasePending, msg, attempts
		setApplied(s, metav1.ConditionFalse, reason, msg)
	})
	if err != nil {
		return time.Time{}, err
	}
	c.recorder.Event(crds.ObjectReference(crds.KindProposal, p), corev1.EventTypeWarning, reason, msg)
	return retryAt, nil
}

// tryAutoApply makes the automatic apply of p and records it in run: applied, refused (the
// proposal waits for a person), or not made (tried again at its time, when this replica still
// owns the branch).
func (c *Controller) tryAutoApply(ctx context.Context, d *dest, run *runRecord, p *crds.Proposal) {
	applied, err := c.autoApply(ctx, d, p)
	if err != nil {
		run.fail(fmt.Errorf("auto-apply %s: %w", p.Name, err))
	}
	switch {
	case errors.Is(err, ErrFenced): // the owner's runs try again
	case err != nil:
		switch retryAt, serr := c.autoApplyFailed(ctx, p, err); {
		case serr != nil:
			run.fail(serr) // the proposal is still due: the next run tries again
		case retryAt.IsZero():
			run.unapplied++
		default:
			c.runAt(d.key, retryAt)
		}
	case applied:
		run.obj.Status.Applied++
	default:
		run.unapplied++
	}
}

// runAt runs write-back for the destination key again at at, unless a run is queued sooner.
func (c *Controller) runAt(key string, at time.Time) {
	c.mu.Lock()
	if _, ok := c.triggers[key]; !ok {
		c.triggers[key] = trigger{kind: crds.TriggerInterval}
	}
	c.mu.Unlock()
	c.ctl.AddAfter(destinationKeyPrefix+key, max(time.Until(at), 0))
}
