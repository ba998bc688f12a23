package writeback

import (
	"context"
	"errors"
	"fmt"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/configbutler/gitops-reverser/crds"
	"github.com/configbutler/gitops-reverser/gitedits"
	"github.com/configbutler/gitops-reverser/gitops"
	"github.com/configbutler/gitops-reverser/metrics"
	"github.com/configbutler/gitops-reverser/sanitize"
)

// Trailers of the commits that record what write-back did.
const (
	TrailerProposal   = "X-ConfigButler-Proposal"
	TrailerApprovedBy = "X-ConfigButler-ApprovedBy"
)

// Refusal reasons of an approval (proposals_refused_total{reason}).
const (
	ReasonApproverUnknown   = "ApproverUnknown"
	ReasonApproverForbidden = "ApproverForbidden"
	ReasonNotFromGit        = "NotFromGit"
)

// decide acts on a waiting proposal: Stale when the live object moved, else its decision.
func (c *Controller) decide(ctx context.Context, namespace, name string) error {
	p, err := c.proposal(ctx, namespace, name)
	if p == nil || err != nil {
		return err
	}
	if !c.ours(p) {
		return c.disown(ctx, p)
	}
	if !waiting(p) {
		return nil
	}
	d, err := c.destination(namespace, p.Spec.DestinationRef.Name)
	if errors.Is(err, errNotWriteBack) {
		return nil
	}
	if err != nil {
		return err
	}
	if !c.owns(d) {
		return nil // its owner decides it; Resync brings it back should this replica take the shard
	}
	cl, problem := c.clusterOf(d)
	if problem != "" {
		if p.Spec.Decision == crds.DecisionNone && !waitsToApply(p) {
			return nil // nothing to act on: an approval, or the next run, tries again
		}
		return c.waitToApply(ctx, p, nil, ReasonClusterNotConnected, problem)
	}
	live, err := cl.live(ctx, p)
	if err != nil {
		return err
	}
	if why := staleness(p, live); why != "" {
		return c.markStale(ctx, d, p, live, why)
	}
	switch p.Spec.Decision {
	case crds.DecisionReject:
		return c.reject(ctx, d, p, live)
	case crds.DecisionIgnore:
		return c.ignore(ctx, p)
	case crds.DecisionApprove:
		return c.approve(ctx, d, cl, p)
	case crds.DecisionNone:
		if waitsToApply(p) {
			return c.applyWaiting(ctx, d, p)
		}
	}
	return nil
}

// proposal reads the Proposal namespace/name from the apiserver; nil when it is gone.
func (c *Controller) proposal(ctx context.Context, namespace, name string) (*crds.Proposal, error) {
	u, err := c.dyn.Resource(crds.Proposals).Namespace(namespace).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read Proposal %s/%s: %w", namespace, name, err)
	}
	return crds.FromUnstructured[crds.Proposal](u)
}

// ignore leaves the live object and the file as they are.
func (c *Controller) ignore(ctx context.Context, p *crds.Proposal) error {
	if p.Status.Phase == crds.PhaseIgnored {
		return nil
	}
	who, _, _, err := c.approver(ctx, p)
	if err != nil {
		return err
	}
	_, err = c.setStatus(ctx, p, func(s *crds.ProposalStatus) {
		s.Phase, s.ReviewedBy, s.DecidedAt = crds.PhaseIgnored, reviewer(who), now()
		s.Message = "ignored: the file stays as written in Git until it is edited again or the live object changes"
		setApplied(s, metav1.ConditionFalse, reasonIgnored, s.Message)
	})
	return err
}

// approve applies an approved proposal when nothing forbids it; cl is the destination's cluster.
func (c *Controller) approve(ctx context.Context, d *dest, cl *cluster, p *crds.Proposal) error {
	who, ok, untrusted, err := c.approver(ctx, p)
	switch {
	case err != nil:
		return err
	case !ok && untrusted != "":
		return c.refuseApproval(ctx, p, nil, refusal{ReasonStampNotCurrent, reasonApproverUnknown,
			fmt.Sprintf("the approval by %s in spec.decidedBy is not vouched for by the admission policies in force now (%s); "+
				"set spec.decision again", p.Spec.DecidedBy.Username, untrusted)})
	case !ok:
		return c.refuseApproval(ctx, p, nil, refusal{ReasonApproverUnknown, reasonApproverUnknown,
			"nobody is known to have approved it (no spec.decidedBy the apiserver vouches for, and the admission webhook did not see " +
				"who set spec.decision); set spec.decision again, naming yourself in spec.decidedBy where the GitDestination's " +
				"write-back Ready condition asks for it"})
	}
	switch {
	case c.cfg.Halt:
		return c.hold(ctx, p, who, reasonHalted, "approved by "+who.Username+", but write-back is halted (--halt-write-back): nothing is applied until it is lifted")
	case d.writeBack().Suspend || !d.writeBack().Enabled:
		return c.hold(ctx, p, who, reasonSuspended, "approved by "+who.Username+", but write-back of GitDestination "+d.key+
			" is suspended or off (spec.writeBack): nothing is applied until it is on again")
	}
	if may, err := c.approverMay(ctx, cl, p, who); !may || err != nil {
		return err
	}
	if err := c.fromGit(ctx, d, p); err != nil {
		var refused *Refused
		if errors.As(err, &refused) {
			return c.refuseApproval(ctx, p, &who, refusal{refused.Reason, reasonNotFromGit, refused.Message})
		}
		return err
	}
	credit := gitops.Credit{
		Author:   gitops.Signature{Name: p.Spec.Author.Name, Email: p.Spec.Author.Email},
		Trailers: [][2]string{{TrailerProposal, p.Namespace + "/" + p.Name}, {TrailerApprovedBy, who.Username}},
	}
	_, err = c.applyAndRecord(ctx, d, p, credit, &who)
	return err
}

// approverMay asks cl, the destination's cluster, whether the approver may make p's change
// themselves there, escalation included. When not, the approval is refused; when a RemoteCluster's
// kubeconfig identity may not ask it there, the approval is held; either says why, and may is false.
func (c *Controller) approverMay(ctx context.Context, cl *cluster, p *crds.Proposal, who authenticationv1.UserInfo) (may bool, _ error) {
	missing, err := cl.missingRights(ctx, crds.ServiceAccountReference{})
	if err != nil {
		return false, err
	}
	if missing != "" {
		return false, c.waitToApply(ctx, p, &who, ReasonClusterForbidden,
			fmt.Sprintf("approved by %s, but whether they may %s %s cannot be asked: %s", who.Username, verbOf(p.Spec.Change), targetName(p.Spec.Target), missing))
	}
	asked, as, err := c.approverIn(ctx, cl, who)
	if err != nil {
		return false, err
	}
	allowed, why, err := cl.mayChange(ctx, asked, p)
	if err != nil {
		return false, err
	}
	if !allowed {
		return false, c.refuseApproval(ctx, p, &who, refusal{ReasonApproverForbidden, reasonForbidden,
			fmt.Sprintf("%s approved it but may not %s %s%s themselves%s%s; someone who may must approve it", who.Username,
				verbOf(p.Spec.Change), targetName(p.Spec.Target), cl.where(), because(why), as)})
	}
	if allowed, why, err = cl.mayEscalate(ctx, asked, p); err != nil {
		return false, err
	} else if !allowed {
		return false, c.refuseApproval(ctx, p, &who, refusal{ReasonApproverForbidden, reasonForbidden,
			fmt.Sprintf("%s approved %s %s%s, but %s%s; someone who may must approve it", who.Username,
				p.Spec.Change, targetName(p.Spec.Target), cl.where(), why, as)})
	}
	return true, nil
}

// autoApply applies a proposal it has just opened, without review. A refusal by the apiserver is
// told in the proposal, which then waits for a person; only a failure to talk to it is an error.
func (c *Controller) autoApply(ctx context.Context, d *dest, p *crds.Proposal) (bool, error) {
	credit := gitops.Credit{
		Author:   gitops.Signature{Name: p.Spec.Author.Name, Email: p.Spec.Author.Email},
		Trailers: [][2]string{{TrailerProposal, p.Namespace + "/" + p.Name}},
	}
	return c.applyAndRecord(ctx, d, p, credit, nil)
}

// applyAndRecord applies p and records the outcome in its status, an Event and the metrics.
// who is the approver, nil for an automatic apply. applied says whether the cluster changed.
func (c *Controller) applyAndRecord(ctx context.Context, d *dest, p *crds.Proposal, credit gitops.Credit, who *authenticationv1.UserInfo) (bool, error) {
	outcome, err := c.apply(ctx, d, p, credit)
	if err != nil {
		return false, err
	}
	switch outcome.kind {
	case outcomeStale:
		return false, c.markStale(ctx, d, p, outcome.live, outcome.message)
	case outcomeWaits:
		return false, c.waitToApply(ctx, p, who, outcome.reason, outcome.message)
	case outcomeRefused:
		c.cfg.Metrics.ProposalsRefused.WithLabelValues(outcome.reason).Inc()
		if who != nil {
			if err := c.clearDecision(ctx, p); err != nil {
				return false, err
			}
		}
		_, err := c.setStatus(ctx, p, func(s *crds.ProposalStatus) {
			s.Phase, s.Message = crds.PhasePending, "not applied: "+outcome.message
			if who != nil {
				s.ReviewedBy = reviewer(*who)
			}
			setApplied(s, metav1.ConditionFalse, outcome.reason, s.Message)
		})
		c.recorder.Event(crds.ObjectReference(crds.KindProposal, p), corev1.EventTypeWarning, outcome.reason, "not applied: "+outcome.message)
		return false, err
	}
	mode := metrics.ApplyAuto
	if who != nil {
		mode = metrics.ApplyApproved
	}
	c.release(ctx, d, p, nil)
	c.cfg.Metrics.ProposalsApplied.WithLabelValues(mode).Inc()
	_, err = c.setStatus(ctx, p, func(s *crds.ProposalStatus) {
		s.Phase, s.AppliedAt, s.AutoApplied = crds.PhaseApplied, now(), who == nil
		s.Message = fmt.Sprintf("applied (%s)", mode)
		if who != nil {
			s.ReviewedBy, s.DecidedAt = reviewer(*who), now()
			s.Message = "applied: approved by " + who.Username
		}
		setApplied(s, metav1.ConditionTrue, reasonApplied, s.Message)
	})
	c.recorder.Eventf(crds.ObjectReference(crds.KindProposal, p), corev1.EventTypeNormal, reasonApplied, "%s %s applied (%s)", p.Spec.Change, targetName(p.Spec.Target), mode)
	return true, err
}

// reject keeps the live state; the mirror writes it back over the edit.
func (c *Controller) reject(ctx context.Context, d *dest, p *crds.Proposal, live *unstructured.Unstructured) error {
	who, _, _, err := c.approver(ctx, p)
	if err != nil {
		return err
	}
	restore, err := c.restoreChange(d, p, live, "rejected")
	if err != nil {
		return err
	}
	p, err = c.setStatus(ctx, p, func(s *crds.ProposalStatus) {
		s.Phase, s.ReviewedBy, s.DecidedAt = crds.PhaseRejected, reviewer(who), now()
		s.Message = "rejected: the live state stays and is written back to Git"
		setApplied(s, metav1.ConditionFalse, reasonRejected, s.Message)
	})
	if err != nil {
		return err
	}
	c.release(ctx, d, p, restore)
	c.recorder.Eventf(crds.ObjectReference(crds.KindProposal, p), corev1.EventTypeNormal, reasonRejected, "%s %s rejected", p.Spec.Change, targetName(p.Spec.Target))
	return nil
}

// markStale ends a proposal whose live object moved: the mirror writes the live state again.
func (c *Controller) markStale(ctx context.Context, d *dest, p *crds.Proposal, live *unstructured.Unstructured, why string) error {
	restore, err := c.restoreChange(d, p, live, "stale")
	if err != nil {
		return err
	}
	if _, err := c.setStatus(ctx, p, func(s *crds.ProposalStatus) {
		s.Phase, s.Message = crds.PhaseStale, why+"; the live state is written back to Git"
		setApplied(s, metav1.ConditionFalse, reasonStale, s.Message)
	}); err != nil {
		return err
	}
	c.release(ctx, d, p, restore)
	c.recorder.Event(crds.ObjectReference(crds.KindProposal, p), corev1.EventTypeWarning, reasonStale, why)
	return nil
}

// hold keeps an approved proposal pending, saying why, once. It records the approver, so the
// approval still counts when the hold is lifted after a restart (while the decision is unchanged).
func (c *Controller) hold(ctx context.Context, p *crds.Proposal, who authenticationv1.UserInfo, reason, message string) error {
	if cur := meta.FindStatusCondition(p.Status.Conditions, crds.ConditionApplied); cur != nil && cur.Reason == reason {
		return nil
	}
	_, err := c.setStatus(ctx, p, func(s *crds.ProposalStatus) {
		s.Message, s.ReviewedBy, s.DecidedAt = message, reviewer(who), now()
		setApplied(s, metav1.ConditionFalse, reason, message)
	})
	c.recorder.Event(crds.ObjectReference(crds.KindProposal, p), corev1.EventTypeWarning, reason, message)
	return err
}

// waitToApply keeps a proposal that cannot be applied yet pending, with its decision, saying why
// (reason: ReasonNoServiceAccount, ReasonClusterNotConnected or ReasonClusterForbidden) and what to
// add or grant, once: it is tried again at every run of its destination, and once it can be, it is
// applied (an approval as approved, an automatic one as it was).
func (c *Controller) waitToApply(ctx context.Context, p *crds.Proposal, who *authenticationv1.UserInfo, reason, message string) error {
	if cur := meta.FindStatusCondition(p.Status.Conditions, crds.ConditionApplied); cur != nil && cur.Reason == reason && cur.Message == message {
		return nil
	}
	c.cfg.Metrics.ProposalsRefused.WithLabelValues(reason).Inc()
	_, err := c.setStatus(ctx, p, func(s *crds.ProposalStatus) {
		s.Phase, s.Message = crds.PhasePending, message
		if who != nil {
			s.ReviewedBy, s.DecidedAt = reviewer(*who), now()
		}
		setApplied(s, metav1.ConditionFalse, reason, message)
	})
	c.recorder.Event(crds.ObjectReference(crds.KindProposal, p), corev1.EventTypeWarning, reason, message)
	return err
}

// retryWaiting queues every proposal of d that waits to be applied (for a ServiceAccount to be
// applied as, or for its RemoteCluster), so that what was named or granted since is used.
func (c *Controller) retryWaiting(d *dest) {
	props, ok := c.caches.Indexer(crds.Proposals)
	if !ok {
		return
	}
	items, _ := props.ByIndex(destinationIndex, d.key)
	for _, item := range items {
		if p, err := crds.FromUnstructured[crds.Proposal](item.(*unstructured.Unstructured)); err == nil && waitsToApply(p) {
			c.ctl.Add(proposalKeyPrefix + p.Namespace + "/" + p.Name)
		}
	}
}

// waitsToApply says whether a proposal waits to be applied: for a ServiceAccount to be applied
// as, or for its RemoteCluster to be connected or to grant the rights write-back needs there.
func waitsToApply(p *crds.Proposal) bool {
	c := meta.FindStatusCondition(p.Status.Conditions, crds.ConditionApplied)
	if p.Status.Phase != crds.PhasePending || c == nil {
		return false
	}
	switch c.Reason {
	case ReasonNoServiceAccount, ReasonClusterNotConnected, ReasonClusterForbidden:
		return true
	}
	return false
}

// applyWaiting applies a proposal without a decision that waited to be applied, as it
// would have been at once had there been one: automatically, if its destination still
// auto-applies it; else it now waits for a person.
func (c *Controller) applyWaiting(ctx context.Context, d *dest, p *crds.Proposal) error {
	wb := d.writeBack()
	if wb.AutoApply && p.Spec.Change != crds.ChangeDestroy && !wb.Suspend && !c.cfg.Halt {
		_, err := c.autoApply(ctx, d, p)
		if err != nil && !errors.Is(err, ErrFenced) {
			_, err = c.autoApplyFailed(ctx, p, err)
		}
		return err
	}
	_, err := c.setStatus(ctx, p, func(s *crds.ProposalStatus) {
		s.Message = fmt.Sprintf("%s %s: waiting for spec.decision (Approve, Reject or Ignore)", p.Spec.Change, targetName(p.Spec.Target))
		setApplied(s, metav1.ConditionFalse, reasonAwaitingReview, s.Message)
	})
	return err
}

// refusal is why an approval is not carried out: the label of the refusal metric, the reason of
// the Applied condition and the message people read.
type refusal struct{ metric, reason, message string }

// refuseApproval clears the decision, so someone decides again, and says why.
func (c *Controller) refuseApproval(ctx context.Context, p *crds.Proposal, who *authenticationv1.UserInfo, r refusal) error {
	reason, message := r.reason, r.message
	c.cfg.Metrics.ProposalsRefused.WithLabelValues(r.metric).Inc()
	if err := c.clearDecision(ctx, p); err != nil {
		return err
	}
	_, err := c.setStatus(ctx, p, func(s *crds.ProposalStatus) {
		s.Phase, s.Message = crds.PhasePending, message
		if who != nil {
			s.ReviewedBy = reviewer(*who)
		}
		setApplied(s, metav1.ConditionFalse, reason, message)
	})
	c.recorder.Event(crds.ObjectReference(crds.KindProposal, p), corev1.EventTypeWarning, reason, message)
	return err
}

// fromGit checks that the proposal says exactly what Git holds at its source commit, so nothing
// but a Git edit reaches the cluster (a hand-made Proposal is refused).
func (c *Controller) fromGit(ctx context.Context, d *dest, p *crds.Proposal) error {
	if d.obj.Adopted() {
		return c.adoptedFromGit(ctx, d, p)
	}
	data, err := gitedits.Branch{Git: c.cfg.Git, URL: d.url, Name: d.branch}.File(ctx, p.Spec.SourceCommit, p.Spec.Path)
	deleted := errors.Is(err, gitedits.ErrNotFound)
	if err != nil && !deleted {
		return fmt.Errorf("read %s at %s: %w", p.Spec.Path, short(p.Spec.SourceCommit), err)
	}
	if (p.Spec.Change == crds.ChangeDestroy) != deleted || (!deleted && string(data) != p.Spec.Desired) {
		return &Refused{Reason: ReasonNotFromGit, Message: fmt.Sprintf("its content is not what %s holds at commit %s; only Git edits are applied",
			p.Spec.Path, short(p.Spec.SourceCommit))}
	}
	return nil
}

// restoreChange is what the mirror writes when a proposal ends without being applied, should
// it have nothing newer: what the mirror itself writes for the target in the destination, through
// its own rules (a Secret only encrypted, nothing its rules do not select), at its own path; nil
// when that is nothing, or not the proposal's file.
//
// In an adopted folder it is nil: the mirror writes there what people changed in the cluster,
// into the document, never a whole object over a file of the team's.
func (c *Controller) restoreChange(d *dest, p *crds.Proposal, live *unstructured.Unstructured, why string) (*gitops.Change, error) {
	if c.cfg.Mirror == nil || d.obj.Adopted() {
		return nil, nil
	}
	t := p.Spec.Target
	gv, err := schema.ParseGroupVersion(t.APIVersion)
	if err != nil { // no object the mirror writes: nothing to hand back
		return nil, nil
	}
	ch, ok, err := c.cfg.Mirror.Render(d.key, gv.WithResource(t.Resource), t.Namespace, t.Name, live)
	if err != nil {
		return nil, fmt.Errorf("render %s as the mirror does: %w", targetName(t), err)
	}
	if !ok || ch.Path != p.Spec.Path {
		return nil, nil
	}
	ch.Summary = fmt.Sprintf("restore %s (proposal %s %s)", targetName(t), p.Name, why)
	ch.Credit = gitops.Credit{Trailers: [][2]string{{TrailerProposal, p.Namespace + "/" + p.Name}}}
	return &ch, nil
}

// staleness says why the live object no longer is what the proposal was computed against, or "".
func staleness(p *crds.Proposal, live *unstructured.Unstructured) string {
	switch {
	case p.Spec.Change == crds.ChangeCreate && live != nil:
		return "the object was created in the cluster meanwhile"
	case p.Spec.Change == crds.ChangeCreate:
		return ""
	case live == nil:
		return "the object was deleted from the cluster meanwhile"
	}
	content, err := sanitize.YAML(sanitize.Object(live.Object))
	if err != nil || digest(content) != p.Spec.LiveDigest {
		return "the live object changed since the proposal was computed"
	}
	return ""
}

func reviewer(u authenticationv1.UserInfo) *crds.Reviewer {
	if u.Username == "" {
		return nil
	}
	return &crds.Reviewer{Username: u.Username, UID: u.UID, Groups: u.Groups}
}

func because(why string) string {
	if why == "" {
		return ""
	}
	return " (" + why + ")"
}

func now() *metav1.Time {
	t := metav1.Now()
	return &t
}
