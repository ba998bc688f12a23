package writeback

import (
	"context"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/configbutler/gitops-reverser/crds"
)

// prune deletes what the destination keeps past its retention: SyncRuns and ended proposals. It
// runs each time a run of the destination is recorded.
func (c *Controller) prune(ctx context.Context, d *dest) {
	c.pruneRuns(ctx, d)
	c.pruneProposals(ctx, d)
}

// pruneRuns deletes the destination's SyncRuns past their retention: Retention for successful
// ones, FailedRetention for failed and partial ones.
func (c *Controller) pruneRuns(ctx context.Context, d *dest) {
	client := c.dyn.Resource(crds.SyncRuns).Namespace(d.obj.Namespace)
	list, err := client.List(ctx, metav1.ListOptions{LabelSelector: crds.LabelDestination + "=" + d.obj.Name})
	if err != nil {
		c.cfg.Log.Warn("list SyncRuns to prune", "destination", d.key, "err", err)
		return
	}
	now := c.clock()
	for i := range list.Items {
		run, err := crds.FromUnstructured[crds.SyncRun](&list.Items[i])
		if err != nil || run.Status.CompletedAt == nil {
			continue
		}
		keep := c.cfg.Retention
		if run.Status.Phase != crds.SyncRunSuccess {
			keep = c.cfg.FailedRetention
		}
		if now.Sub(run.Status.CompletedAt.Time) < keep {
			continue
		}
		if err := client.Delete(ctx, run.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			c.cfg.Log.Warn("prune SyncRun", "run", run.Name, "err", err)
		}
	}
}

// ended says whether a proposal's phase is final: Applied, Rejected, Stale or Superseded. Pending
// is not, and neither is Ignored: an Ignored proposal still holds its file, so the mirror leaves the
// edit as written, and a restart finds the holds in the waiting proposals; deleting it would let
// the mirror write the live state over an edit a person chose to keep. It ends when a newer edit
// of the file supersedes it or the live object changes (Stale), and is pruned from then on.
func ended(phase crds.ProposalPhase) bool {
	switch phase {
	case crds.PhaseApplied, crds.PhaseRejected, crds.PhaseStale, crds.PhaseSuperseded, crds.PhaseForeign:
		return true
	}
	return false
}

// pruneProposals deletes the destination's ended proposals older than ProposalRetention. It reads
// them from the cache: proposals carry whole files and diffs, too much to list at every run.
func (c *Controller) pruneProposals(ctx context.Context, d *dest) {
	props, ok := c.caches.Indexer(crds.Proposals)
	if !ok {
		return
	}
	opened := map[string]time.Time{} // the destination's proposals, by name
	var done []*unstructured.Unstructured
	for _, item := range props.List() {
		u, ok := item.(*unstructured.Unstructured)
		if !ok || u.GetNamespace() != d.obj.Namespace {
			continue
		}
		if ref, _, _ := unstructured.NestedString(u.Object, "spec", "destinationRef", "name"); ref != d.obj.Name {
			continue
		}
		opened[u.GetName()] = u.GetCreationTimestamp().Time
		if phase, _, _ := unstructured.NestedString(u.Object, "status", "phase"); ended(crds.ProposalPhase(phase)) {
			done = append(done, u)
		}
	}
	client := c.dyn.Resource(crds.Proposals).Namespace(d.obj.Namespace)
	now := c.clock()
	for _, u := range done {
		p, err := crds.FromUnstructured[crds.Proposal](u)
		if err != nil || now.Sub(endedAt(p, opened)) < c.cfg.ProposalRetention {
			continue
		}
		// At the version read: a proposal that changed since is judged again at the next prune.
		rv, uid := p.ResourceVersion, p.UID
		err = client.Delete(ctx, p.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid, ResourceVersion: &rv}})
		switch {
		case err == nil:
			c.cfg.Log.Debug("pruned proposal", "proposal", p.Namespace+"/"+p.Name, "phase", p.Status.Phase)
		case apierrors.IsNotFound(err) || apierrors.IsConflict(err):
		default:
			c.cfg.Log.Warn("prune proposal", "proposal", p.Namespace+"/"+p.Name, "err", err)
		}
	}
}

// endedAt is when a proposal reached its final phase, as near as its status tells: the newest of
// when its decision was acted on, when it was applied, when its Applied condition last changed, and
// for a Superseded one when the proposal that superseded it (in opened, by name) was opened. A
// proposal that went Stale records no time of its own: its Applied condition stayed False since it
// was opened, so it counts from then (or from its decision). Its creation when nothing is known.
func endedAt(p *crds.Proposal, opened map[string]time.Time) time.Time {
	var t time.Time
	later := func(m time.Time) {
		if m.After(t) {
			t = m
		}
	}
	if p.Status.DecidedAt != nil {
		later(p.Status.DecidedAt.Time)
	}
	if p.Status.AppliedAt != nil {
		later(p.Status.AppliedAt.Time)
	}
	if cond := meta.FindStatusCondition(p.Status.Conditions, crds.ConditionApplied); cond != nil {
		later(cond.LastTransitionTime.Time)
	}
	if p.Status.Phase == crds.PhaseSuperseded {
		later(opened[p.Status.SupersededBy]) // zero when that one is gone
	}
	if t.IsZero() {
		return p.CreationTimestamp.Time
	}
	return t
}
