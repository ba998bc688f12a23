package writeback

import (
	"context"
	"errors"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/configbutler/gitops-reverser/crds"
	"github.com/configbutler/gitops-reverser/gitedits"
	"github.com/configbutler/gitops-reverser/gitops"
)

// reconcile runs write-back once for the destination "namespace/name": fetch, read what people
// changed since the last reconciled revision, open a proposal per difference (at most MaxPerTick),
// auto-apply what may be, and record it all in a SyncRun. enabled is false when the destination
// is gone or does not enable write-back (it is then not scheduled again).
func (c *Controller) reconcile(ctx context.Context, key string, t trigger) (enabled bool, err error) {
	d, enabled, err := c.runnable(key)
	if d == nil {
		return enabled, err
	}
	c.retryWaiting(d)
	since := d.status().LastRevision
	res, lost, err := c.edits(ctx, d, since)
	switch {
	case errors.Is(err, gitops.ErrStopped):
		// The mirror has not started the destination's Git worker (yet): nothing to record, retry.
		return true, fmt.Errorf("GitDestination %s: %w", d.key, err)
	case err == nil && res.Tip == "":
		// The branch does not exist yet: the mirror's first commit will be the baseline.
		return true, c.recordDestination(ctx, d, t, "", "")
	case err == nil && !lost && t.kind == crds.TriggerInterval && since != "" && res.Tip == since:
		// Nothing was pushed since the last run: a run that finds nothing is not worth a record.
		return true, c.recordDestination(ctx, d, t, "", "")
	case err == nil && !lost && since != "" && !edited(d, res.Edits) && !c.recordIdle(d.key, t):
		// Only the daemon's own commits since the last run: recorded at most once per
		// idleRunSpacing, but the destination moves on.
		return true, c.recordDestination(ctx, d, t, res.Tip, "")
	}
	return true, c.runEdits(ctx, d, t, since, res, lost, err)
}

// runnable is the destination "namespace/name" when this replica is to run its write-back now;
// nil when not, with enabled false when it is gone or does not enable write-back (it is then not
// scheduled again).
func (c *Controller) runnable(key string) (d *dest, enabled bool, err error) {
	namespace, name, _ := strings.Cut(key, "/")
	d, err = c.destination(namespace, name)
	switch {
	case errors.Is(err, errNotWriteBack):
		return nil, false, nil
	case err != nil:
		return nil, true, err
	case !d.writeBack().Enabled:
		return nil, false, nil
	}
	if admitted, err := c.admitted(d); !admitted {
		return nil, true, err // its repository does not admit it: write-back reads none of it either
	}
	if !c.owns(d) || c.mayWrite(d) != nil {
		// Another replica owns its branch, or this one lost the branch's Lease: Resync runs it
		// should this one take it (again).
		return nil, true, nil
	}
	return d, true, nil
}

// edits reads what people pushed to d since the revision since; lost says the history since
// then is gone (force-push) or too long, so every file was read.
func (c *Controller) edits(ctx context.Context, d *dest, since string) (gitedits.Result, bool, error) {
	git := gitedits.Branch{Git: c.cfg.Git, URL: d.url, Name: d.branch}
	q := gitedits.Query{Folder: d.folder, Since: since, Ours: c.cfg.Ours, MaxBytes: MaxDocumentBytes}
	res, err := git.Edits(ctx, q)
	lost := errors.Is(err, gitedits.ErrUnknownRevision) || errors.Is(err, gitedits.ErrHistoryTooLong)
	if lost {
		q.Whole = true
		res, err = git.Edits(ctx, q)
	}
	return res, lost, err
}

// runEdits records a SyncRun of the edits read (readErr when they could not be), opening and
// auto-applying their proposals, and moves the destination on when the run was complete.
func (c *Controller) runEdits(ctx context.Context, d *dest, t trigger, since string, res gitedits.Result, lost bool, readErr error) error {
	base := since
	if res.Base != "" {
		base = res.Base
	}
	run, err := c.startRun(ctx, d, t.kind, base)
	if errors.Is(err, ErrFenced) {
		return nil // deposed meanwhile: the owner runs it
	}
	if err != nil {
		return err
	}
	run.obj.Status.Revision = res.Tip
	switch {
	case readErr != nil:
		run.obj.Status.Revision = ""
		run.fail(fmt.Errorf("read the edits of %s@%s: %w", d.url, d.obj.Spec.Branch, readErr))
	case lost:
		run.note = fmt.Sprintf("revision %s is no longer in the history of %s (force-pushed?) or too far from its tip: "+
			"every file under the folder was compared with the cluster", short(since), d.obj.Spec.Branch)
		c.consider(ctx, d, run, base, res.Edits)
	case since == "" && res.Base == res.Tip:
		run.note = fmt.Sprintf("first run: the daemon has written no commit on %s yet, so its tip %s is the baseline", d.obj.Spec.Branch, short(res.Tip))
	case since == "":
		run.note = fmt.Sprintf("first run: the baseline is %s, the daemon's newest commit; the commits after it were considered", short(res.Base))
		c.consider(ctx, d, run, base, res.Edits)
	default:
		c.consider(ctx, d, run, base, res.Edits)
	}
	finishErr := c.finishRun(ctx, d, run)
	next := ""
	if run.obj.Status.Phase != crds.SyncRunFailed && !run.capped && !run.retrying {
		// Only a complete run moves on, partial or not: a refused file stays refused until it is
		// pushed again, and a proposal whose auto-apply was refused waits for a person. After a
		// capped or failed run the next one reads the same edits again (after a force-push, the
		// whole folder again), and the proposals it already opened are found, not opened twice.
		next = run.obj.Status.Revision
	}
	return errors.Join(finishErr, c.recordDestination(ctx, d, t, next, run.obj.Name))
}

// consider turns the edits into proposals, at most MaxPerTick new ones; base is the revision
// they are counted from (what an adopted folder's files are compared with). The edits are
// compared with the destination's cluster; while it cannot be reached, the run fails and the
// next one reads them again.
func (c *Controller) consider(ctx context.Context, d *dest, run *runRecord, base string, edits []gitedits.Edit) {
	if len(edits) == 0 {
		return
	}
	cl, problem := c.clusterOf(d)
	if problem != "" {
		run.fail(errors.New(problem))
		return
	}
	sels := c.cfg.Selections(d.key)
	overlay, err := c.evaluateOverlay(ctx, d, cl, sels, base, edits)
	if err != nil {
		run.fail(fmt.Errorf("the overlay of GitDestination %s: %w", d.key, err))
		return
	}
	for _, r := range overlay.refused {
		c.refuse(run, overlay.path, r)
	}
	for _, cand := range overlay.cands {
		if !c.propose(ctx, d, run, cand, len(edits)) {
			return
		}
	}
	for i, e := range edits {
		if !considered(d, e.Path) || overlay.reads[e.Path] {
			continue // a README or the like (the mirror writes only .yaml files), or a file the overlay's render read
		}
		cands, refused, err := c.evaluateEdit(ctx, d, cl, sels, e, base)
		for _, r := range refused {
			c.refuse(run, e.Path, r)
		}
		if err != nil {
			run.fail(fmt.Errorf("%s: %w", e.Path, err))
			continue
		}
		for _, cand := range cands { // none when Git already says what the cluster says
			if overlay.decided[cand.object] {
				continue // an object the overlay renders: its render decides it, not a document elsewhere
			}
			if !c.propose(ctx, d, run, cand, len(edits)-i) {
				return
			}
		}
	}
}

// propose opens a candidate's proposal and applies it when it may be applied automatically;
// false when the run's cap is reached, with left edited files still to read.
func (c *Controller) propose(ctx context.Context, d *dest, run *runRecord, cand *candidate, left int) bool {
	if run.obj.Status.ProposalsOpened >= c.cfg.MaxPerTick {
		run.capped = true
		run.note = fmt.Sprintf("%d proposals opened, the cap per run; %d more edited files wait for the next runs",
			run.obj.Status.ProposalsOpened, left)
		return false
	}
	run.count(cand)
	wb := d.writeBack()
	auto := wb.AutoApply && cand.change != crds.ChangeDestroy && !wb.Suspend && !c.cfg.Halt
	p, opened, err := c.open(ctx, d, cand, auto)
	if err != nil {
		run.fail(fmt.Errorf("open a proposal for %s: %w", cand.edit.Path, err))
		return true
	}
	if opened {
		run.obj.Status.ProposalsOpened++
	}
	if !auto {
		return true
	}
	// A proposal opened before, whose automatic apply was not made, is tried again when due;
	// until then the run does not move on, so a later one reads this edit again.
	if due, at := autoApplyDue(p); !due {
		if !at.IsZero() {
			run.retrying = true
			c.runAt(d.key, at)
		}
		return true
	}
	c.tryAutoApply(ctx, d, run, p)
	return true
}

// refuse reports a Git file write-back will not act on, in the run and as an Event.
func (c *Controller) refuse(run *runRecord, path string, r *Refused) {
	c.cfg.Metrics.ProposalsRefused.WithLabelValues(r.Reason).Inc()
	run.obj.Status.RefusedTotal++
	if len(run.obj.Status.Refused) < crds.MaxRefusedListed {
		run.obj.Status.Refused = append(run.obj.Status.Refused, crds.RefusedFile{Path: path, Reason: r.Reason, Message: r.Message})
	}
	c.recorder.Eventf(crds.ObjectReference(crds.KindSyncRun, run.obj), corev1.EventTypeWarning, "Refused", "%s: %s", path, r.Error())
	c.cfg.Log.Warn("git file refused", "destination", run.obj.Namespace+"/"+run.obj.Spec.DestinationRef.Name,
		"path", path, "reason", r.Reason, "message", r.Message)
}

// short is a commit SHA as people read it.
func short(sha string) string {
	if len(sha) > 12 {
		return sha[:12]
	}
	if sha == "" {
		return "(empty branch)"
	}
	return sha
}

// admitted reports whether the destination may use its GitRepoConfig: always one of its own
// namespace; one of another namespace only once the mirror found its accessPolicy admits the
// destination's (an error, retried, until the mirror has decided).
func (c *Controller) admitted(d *dest) (bool, error) {
	repo := d.obj.Spec.RepoRef.NamespaceOr(d.obj.Namespace) + "/" + d.obj.Spec.RepoRef.Name
	if d.obj.Spec.RepoRef.NamespaceOr(d.obj.Namespace) == d.obj.Namespace {
		return true, nil
	}
	if c.cfg.Mirror == nil {
		return false, nil
	}
	admitted, known := c.cfg.Mirror.Admits(d.key, repo)
	if !known {
		return false, fmt.Errorf("GitDestination %s: the mirror has not yet decided whether GitRepoConfig %s admits it", d.key, repo)
	}
	return admitted, nil
}
