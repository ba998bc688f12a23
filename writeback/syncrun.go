package writeback

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/configbutler/gitops-reverser/crds"
)

// runRecord is a SyncRun being filled in.
type runRecord struct {
	obj    *crds.SyncRun
	counts map[crds.DifferenceCount]int // by group, kind and change (Count unused in the key)
	errs   []string
	note   string
	// capped: the run stopped at MaxPerTick with edits left, so the next run must read the same
	// edits again. A run that is partial for any other reason is complete and moves on.
	capped bool
	// unapplied counts auto-applies that were tried and not made (the apiserver refused them, or
	// the object moved, or they failed maxAutoApplyAttempts times); their proposals wait for a
	// person.
	unapplied int
	// retrying: an auto-apply that failed waits to be tried again, so the next run must read the
	// same edits again.
	retrying bool
}

func (r *runRecord) fail(err error) { r.errs = append(r.errs, err.Error()) }

func (r *runRecord) count(cand *candidate) {
	gv, _ := gvrOf(cand.target)
	r.counts[crds.DifferenceCount{Group: gv.Group, Kind: cand.target.Kind, Change: cand.change}]++
	r.obj.Status.DifferenceTotal++
}

// startRun creates the SyncRun of a reconcile, Running.
func (c *Controller) startRun(ctx context.Context, d *dest, trigger, base string) (*runRecord, error) {
	started := metav1.Now()
	run := &crds.SyncRun{
		TypeMeta: metav1.TypeMeta{APIVersion: crds.GroupVersion.String(), Kind: crds.KindSyncRun},
		ObjectMeta: metav1.ObjectMeta{
			GenerateName: truncate(d.obj.Name, 240) + "-",
			Namespace:    d.obj.Namespace,
			Labels:       map[string]string{crds.LabelDestination: d.obj.Name},
		},
		Spec:   crds.SyncRunSpec{DestinationRef: crds.LocalReference{Name: d.obj.Name}, Trigger: trigger},
		Status: crds.SyncRunStatus{Phase: crds.SyncRunRunning, StartedAt: &started, BaseRevision: base},
	}
	u, err := crds.ToUnstructured(run)
	if err != nil {
		return nil, err
	}
	if err := c.mayWrite(d); err != nil {
		return nil, err
	}
	created, err := c.dyn.Resource(crds.SyncRuns).Namespace(d.obj.Namespace).Create(ctx, u, metav1.CreateOptions{FieldManager: crds.FieldManager})
	if err != nil {
		return nil, fmt.Errorf("create a SyncRun for GitDestination %s: %w", d.key, err)
	}
	if run, err = crds.FromUnstructured[crds.SyncRun](created); err != nil {
		return nil, err
	}
	return &runRecord{obj: run, counts: map[crds.DifferenceCount]int{}}, nil
}

// finishRun completes the SyncRun: its phase, counts, error, condition and an Event.
func (c *Controller) finishRun(ctx context.Context, d *dest, r *runRecord) error {
	st := &r.obj.Status
	message := r.complete()
	if c.mayWrite(d) != nil {
		return nil // deposed meanwhile: the run stays as it was, the owner runs again
	}
	c.cfg.Metrics.SyncRuns.WithLabelValues(strings.ToLower(string(st.Phase))).Inc()
	u, err := crds.ToUnstructured(r.obj)
	if err != nil {
		return err
	}
	if _, err := c.dyn.Resource(crds.SyncRuns).Namespace(r.obj.Namespace).Update(ctx, u, metav1.UpdateOptions{FieldManager: crds.FieldManager}); err != nil {
		return fmt.Errorf("complete SyncRun %s/%s: %w", r.obj.Namespace, r.obj.Name, err)
	}
	eventType := corev1.EventTypeNormal
	if st.Phase == crds.SyncRunFailed {
		eventType = corev1.EventTypeWarning
	}
	c.recorder.Event(crds.ObjectReference(crds.KindSyncRun, r.obj), eventType, string(st.Phase), message)
	c.cfg.Log.Info("write-back run", "destination", d.key, "run", r.obj.Name, "phase", st.Phase, "revision", short(st.Revision),
		"differences", st.DifferenceTotal, "opened", st.ProposalsOpened, "applied", st.Applied, "refused", st.RefusedTotal, "error", st.Error)
	c.prune(ctx, d)
	return nil
}

// complete fills the run's status as it ended (its differences, phase and Complete condition),
// and returns what it says of it.
func (r *runRecord) complete() string {
	st := &r.obj.Status
	completed := metav1.Now()
	st.CompletedAt = &completed
	for k, n := range r.counts {
		k.Count = n
		st.Differences = append(st.Differences, k)
	}
	slices.SortFunc(st.Differences, func(a, b crds.DifferenceCount) int {
		return strings.Compare(a.Group+"/"+a.Kind+"/"+string(a.Change), b.Group+"/"+b.Kind+"/"+string(b.Change))
	})
	switch {
	case len(r.errs) > 0:
		st.Phase = crds.SyncRunFailed
		st.Error = strings.Join(r.errs, "; ")
	case r.capped || st.RefusedTotal > 0 || r.unapplied > 0:
		// It ended, but not every edit it read became a proposal, or an auto-apply was not made.
		st.Phase = crds.SyncRunPartial
	default:
		st.Phase = crds.SyncRunSuccess
	}
	message := fmt.Sprintf("%s at %s: %d differences, %d proposals opened, %d applied, %d files refused",
		st.Phase, short(st.Revision), st.DifferenceTotal, st.ProposalsOpened, st.Applied, st.RefusedTotal)
	if r.unapplied > 0 {
		message += fmt.Sprintf("; %d auto-applies not made (their proposals say why)", r.unapplied)
	}
	if r.note != "" {
		message += "; " + r.note
	}
	if st.Error != "" {
		message += "; " + st.Error
	}
	status := metav1.ConditionTrue
	if st.Phase != crds.SyncRunSuccess {
		status = metav1.ConditionFalse
	}
	meta.SetStatusCondition(&st.Conditions, metav1.Condition{
		Type: crds.ConditionComplete, Status: status, Reason: string(st.Phase), Message: truncate(message, 32<<10),
		ObservedGeneration: r.obj.Generation,
	})
	return message
}

// recordDestination writes the destination's write-back status: the revision the next run starts
// from (unchanged when next is ""), the last run, the sync-now value acted on, the pending count.
func (c *Controller) recordDestination(ctx context.Context, d *dest, t trigger, next, run string) error {
	if c.mayWrite(d) != nil {
		return nil // deposed: the owner records its own runs
	}
	st := d.status()
	if next != "" {
		st.LastRevision = next
	}
	if run != "" {
		st.LastSyncRun = run
	}
	st.LastSyncTime = now()
	if t.kind == crds.TriggerSyncNow && t.value != "" {
		st.LastHandledSyncNow = t.value
	}
	st.PendingProposals, _ = c.pending(d.key)
	meta.SetStatusCondition(&st.Conditions, readyCondition(c.approvalSource()))
	c.setWritesAs(d, &st)
	return c.patchWriteBackStatus(ctx, d, st)
}

// patchWriteBackStatus writes a destination's status.writeBack.
func (c *Controller) patchWriteBackStatus(ctx context.Context, d *dest, st crds.WriteBackStatus) error {
	body, err := json.Marshal(map[string]any{"status": map[string]any{"writeBack": st}})
	if err != nil {
		return err
	}
	client := c.dyn.Resource(crds.GitDestinations).Namespace(d.obj.Namespace)
	if _, err := client.Patch(ctx, d.obj.Name, types.MergePatchType, body, metav1.PatchOptions{}, "status"); err != nil {
		return fmt.Errorf("update the write-back status of GitDestination %s: %w", d.key, err)
	}
	return nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}
