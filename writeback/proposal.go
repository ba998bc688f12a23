package writeback

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/util/retry"

	"github.com/configbutler/gitops-reverser/crds"
)

// Reasons of a proposal's Applied condition.
const (
	reasonAwaitingReview  = "AwaitingReview"
	reasonApplied         = "Applied"
	reasonHalted          = "Halted"
	reasonSuspended       = "Suspended"
	reasonApproverUnknown = "ApproverUnknown"
	reasonForbidden       = "Forbidden"
	reasonApplyFailed     = "ApplyFailed"
	reasonStale           = "Stale"
	reasonRejected        = "Rejected"
	reasonIgnored         = "Ignored"
	reasonSuperseded      = "Superseded"
	reasonNotFromGit      = "NotFromGit"
)

// proposalName is the same for the same edit (file, commit and content), so a run that sees an
// edit again (after a crash, or after a partial run) finds its proposal instead of opening another.
func proposalName(destination, path, commit string, desired []byte) string {
	h := sha256.New()
	for _, part := range [][]byte{[]byte(path), []byte(commit), desired} {
		h.Write(part)
		h.Write([]byte{0})
	}
	suffix := hex.EncodeToString(h.Sum(nil))[:12]
	const maxPrefix = 253 - 13
	if len(destination) > maxPrefix {
		destination = destination[:maxPrefix]
	}
	return destination + "-" + suffix
}

// open records a candidate as a Pending proposal, holds its file, and supersedes older waiting
// proposals of the same file. opened is false when the same edit already has a proposal.
func (c *Controller) open(ctx context.Context, d *dest, cand *candidate, auto bool) (*crds.Proposal, bool, error) {
	for _, old := range c.proposalsAt(cand.edit.Path) {
		if old.Namespace == d.obj.Namespace && old.Spec.DestinationRef.Name == d.obj.Name && waiting(old) &&
			old.Spec.Desired == string(cand.desired) && old.Spec.LiveDigest == cand.liveDigest &&
			(cand.object == "" || sameObject(old.Spec.Target, cand.target)) {
			return old, false, nil // the same difference is already waiting
		}
	}
	p := newProposal(d, cand)
	if err := c.mayWrite(d); err != nil {
		return nil, false, err
	}
	key, err := c.sealKey(ctx)
	if err != nil {
		return nil, false, err
	}
	p.Annotations = map[string]string{crds.AnnotationSeal: seal(key, p)}
	u, err := crds.ToUnstructured(p)
	if err != nil {
		return nil, false, err
	}
	created, err := c.dyn.Resource(crds.Proposals).Namespace(p.Namespace).Create(ctx, u, metav1.CreateOptions{FieldManager: crds.FieldManager})
	if apierrors.IsAlreadyExists(err) {
		return p, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("create Proposal %s: %w", p.Name, err)
	}
	if p, err = crds.FromUnstructured[crds.Proposal](created); err != nil {
		return nil, false, err
	}
	c.cfg.Git.Hold(d.url, d.branch, p.Spec.Path)
	p, err = c.setStatus(ctx, p, func(s *crds.ProposalStatus) {
		s.Phase = crds.PhasePending
		s.Message = fmt.Sprintf("%s %s: waiting for spec.decision (Approve, Reject or Ignore)", p.Spec.Change, targetName(p.Spec.Target))
		reason := reasonAwaitingReview
		if auto {
			s.Message = fmt.Sprintf("%s %s: to be applied automatically (spec.writeBack.autoApply)", p.Spec.Change, targetName(p.Spec.Target))
			reason = reasonAutoApplyPending
		}
		setApplied(s, metav1.ConditionFalse, reason, s.Message)
	})
	if err != nil {
		return nil, true, err
	}
	c.cfg.Metrics.ProposalsOpened.WithLabelValues(string(p.Spec.Change)).Inc()
	c.recorder.Eventf(crds.ObjectReference(crds.KindProposal, p), corev1.EventTypeNormal, "Opened",
		"%s %s from commit %s by %s", p.Spec.Change, targetName(p.Spec.Target), short(p.Spec.SourceCommit), p.Spec.Author.Name)
	return p, true, c.supersede(ctx, d, p)
}

// nameKey is what a candidate's proposal is named by, with its commit and content: its file in
// a canonical folder, its file and object in an adopted one.
func (cand *candidate) nameKey() string {
	if cand.object == "" {
		return cand.edit.Path
	}
	return cand.edit.Path + "\x00" + cand.object
}

// newProposal is the Proposal of a candidate of destination d, as it is created.
func newProposal(d *dest, cand *candidate) *crds.Proposal {
	return &crds.Proposal{
		TypeMeta: metav1.TypeMeta{APIVersion: crds.GroupVersion.String(), Kind: crds.KindProposal},
		ObjectMeta: metav1.ObjectMeta{
			Name:      proposalName(d.obj.Name, cand.nameKey(), cand.edit.Commit, cand.desired),
			Namespace: d.obj.Namespace,
			Labels:    map[string]string{crds.LabelDestination: d.obj.Name},
		},
		Spec: crds.ProposalSpec{
			DestinationRef: crds.LocalReference{Name: d.obj.Name},
			Change:         cand.change, Target: cand.target, Path: cand.edit.Path,
			SourceCommit: cand.edit.Commit,
			Author:       crds.GitAuthor{Name: cand.edit.Author.Name, Email: cand.edit.Author.Email},
			Desired:      string(cand.desired), Diff: cand.diff,
			LiveResourceVersion: cand.liveRV, LiveDigest: cand.liveDigest,
		},
	}
}

// supersede ends the older waiting proposals of p's file in its destination: p says what the
// file says now. In an adopted folder, where a file holds several objects, only those of p's
// object: the others say what their documents say.
func (c *Controller) supersede(ctx context.Context, d *dest, p *crds.Proposal) error {
	for _, old := range c.proposalsAt(p.Spec.Path) {
		if old.Name == p.Name || old.Namespace != p.Namespace || old.Spec.DestinationRef.Name != d.obj.Name || !waiting(old) ||
			d.obj.Adopted() && !sameObject(old.Spec.Target, p.Spec.Target) {
			continue
		}
		if _, err := c.setStatus(ctx, old, func(s *crds.ProposalStatus) {
			s.Phase, s.SupersededBy = crds.PhaseSuperseded, p.Name
			s.Message = "a newer edit of " + p.Spec.Path + " superseded it: " + p.Name
			setApplied(s, metav1.ConditionFalse, reasonSuperseded, s.Message)
		}); err != nil {
			return err
		}
	}
	return nil
}

// setStatus writes a proposal's status (read fresh, changed by f, retried on conflicts) and
// returns the proposal as written.
func (c *Controller) setStatus(ctx context.Context, p *crds.Proposal, f func(*crds.ProposalStatus)) (*crds.Proposal, error) {
	client := c.dyn.Resource(crds.Proposals).Namespace(p.Namespace)
	var out *crds.Proposal
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := client.Get(ctx, p.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		fresh, err := crds.FromUnstructured[crds.Proposal](cur)
		if err != nil {
			return err
		}
		f(&fresh.Status)
		fresh.Status.ObservedGeneration = fresh.Generation
		if e := c.epoch.Load(); e != nil {
			fresh.Status.Stamp = *e // what spec.decidedBy.stamp must carry under the validating policy alone
		}
		u, err := crds.ToUnstructured(fresh)
		if err != nil {
			return err
		}
		written, err := client.UpdateStatus(ctx, u, metav1.UpdateOptions{FieldManager: crds.FieldManager})
		if err != nil {
			return err
		}
		out, err = crds.FromUnstructured[crds.Proposal](written)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("update the status of Proposal %s/%s: %w", p.Namespace, p.Name, err)
	}
	return out, nil
}

// clearDecision empties spec.decision and spec.decidedBy, so a person decides again (and the
// webhook sees who): a stamp never outlives its decision.
func (c *Controller) clearDecision(ctx context.Context, p *crds.Proposal) error {
	client := c.dyn.Resource(crds.Proposals).Namespace(p.Namespace)
	body := []byte(`{"spec":{"decision":null,"decidedBy":null}}`) // the stamp goes with the decision
	if _, err := client.Patch(ctx, p.Name, "application/merge-patch+json", body, metav1.PatchOptions{FieldManager: crds.FieldManager}); err != nil {
		return fmt.Errorf("clear the decision of Proposal %s/%s: %w", p.Namespace, p.Name, err)
	}
	return nil
}

func setApplied(s *crds.ProposalStatus, status metav1.ConditionStatus, reason, message string) {
	meta.SetStatusCondition(&s.Conditions, metav1.Condition{Type: crds.ConditionApplied, Status: status, Reason: reason, Message: message})
}

// waiting reports whether a proposal still holds its file: Pending or Ignored.
func waiting(p *crds.Proposal) bool {
	switch p.Status.Phase {
	case "", crds.PhasePending, crds.PhaseIgnored:
		return true
	}
	return false
}

// pathIndex indexes the cached proposals by the file they propose to apply, destinationIndex by
// their destination ("namespace/name").
const (
	pathIndex        = "path"
	destinationIndex = "destination"
)

func indexByDestination(obj any) ([]string, error) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return nil, nil
	}
	ref, _, _ := unstructured.NestedString(u.Object, "spec", "destinationRef", "name")
	return []string{u.GetNamespace() + "/" + ref}, nil
}

func indexByPath(obj any) ([]string, error) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return nil, nil
	}
	p, _, _ := unstructured.NestedString(u.Object, "spec", "path")
	return []string{p}, nil
}

// proposalsAt lists the cached proposals of a file path that the daemon opened, in any destination.
func (c *Controller) proposalsAt(path string) []*crds.Proposal {
	props, ok := c.caches.Indexer(crds.Proposals)
	if !ok {
		return nil // no destination enables write-back
	}
	items, err := props.ByIndex(pathIndex, path)
	if err != nil {
		return nil
	}
	out := make([]*crds.Proposal, 0, len(items))
	for _, item := range items {
		if p, err := crds.FromUnstructured[crds.Proposal](item.(*unstructured.Unstructured)); err == nil && c.ours(p) {
			out = append(out, p)
		}
	}
	return out
}

// pending counts the cached Pending proposals of a destination ("namespace/name"), or of every
// destination whose branch this replica owns for "", and finds when the oldest of them was opened
// (zero when none waits). With shards, each replica so exports its own, and their sum is the
// cluster's.
func (c *Controller) pending(destination string) (n int, oldest time.Time) {
	props, ok := c.caches.Indexer(crds.Proposals)
	if !ok {
		return 0, time.Time{}
	}
	for _, item := range props.List() {
		u := item.(*unstructured.Unstructured)
		phase, _, _ := unstructured.NestedString(u.Object, "status", "phase")
		if phase != string(crds.PhasePending) {
			continue
		}
		ref, _, _ := unstructured.NestedString(u.Object, "spec", "destinationRef", "name")
		if destination != "" && destination != u.GetNamespace()+"/"+ref {
			continue
		}
		if destination == "" && !c.ownsDestination(u.GetNamespace(), ref) {
			continue
		}
		n++
		if created := u.GetCreationTimestamp().Time; oldest.IsZero() || created.Before(oldest) {
			oldest = created
		}
	}
	return n, oldest
}

func targetName(t crds.ProposalTarget) string {
	if t.Namespace != "" {
		return t.Kind + " " + t.Namespace + "/" + t.Name
	}
	return t.Kind + " " + t.Name
}
