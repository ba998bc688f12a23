package writeback

import (
	"context"
	"errors"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/configbutler/gitops-reverser/crds"
	"github.com/configbutler/gitops-reverser/gitops"
)

// The keys of the controller's queue: a destination to reconcile, a proposal to decide, a
// destination that changed (its informer only queues this; the worker looks at what changed),
// and the pending gauges to recompute.
const (
	destinationKeyPrefix = "d/"
	proposalKeyPrefix    = "p/"
	seenKeyPrefix        = "s/"
	// gaugesKey asks only for the pending gauges to be recomputed: a proposal changed that
	// nothing needs to decide (it ended, was opened, or is gone), and the gauges read the cache.
	gaugesKey = "gauges"
)

// noWorkerWait is the first wait before a destination whose Git worker the mirror has not
// started yet is tried again; it doubles, up to noWorkerMaxWait: the worker comes moments later,
// or later still on a loaded machine, and asking the pool again costs nothing.
const (
	noWorkerWait    = time.Second
	noWorkerMaxWait = 5 * time.Second
)

// requestSyncTimeout bounds the write that hands a trigger to the owner of a destination.
const requestSyncTimeout = 10 * time.Second

// fencedRetry is when a proposal whose apply the fence refused is decided again: by then this
// replica has stepped down (and stopped), or renewed the lease it was late to renew.
const fencedRetry = 5 * time.Second

// errNotWriteBack says a destination is gone or does not enable write-back.
var errNotWriteBack = errors.New("not a write-back destination")

// SyncNow reconciles the destination as soon as the controller is free: fetch, read the edits
// people pushed, open proposals. It is the one call every trigger uses. A destination whose
// branch another replica owns is handed to it through the sync-now annotation, as the CLI's
// sync does: the owner's cache sees it and runs it.
func (c *Controller) SyncNow(namespace, name, why string) {
	if d, err := c.destination(namespace, name); err == nil && !c.owns(d) {
		go c.requestSync(d, why)
		return
	}
	c.enqueueDestination(namespace+"/"+name, trigger{kind: why})
}

// requestSync sets the destination's sync-now annotation to a value nobody handled yet.
func (c *Controller) requestSync(d *dest, why string) {
	ctx, cancel := context.WithTimeout(context.Background(), requestSyncTimeout)
	defer cancel()
	_, body := crds.SyncNowPatch(time.Now())
	_, err := c.dyn.Resource(crds.GitDestinations).Namespace(d.obj.Namespace).Patch(ctx, d.obj.Name, types.MergePatchType, body, metav1.PatchOptions{})
	if err != nil {
		c.cfg.Log.Warn("could not ask the owner of a destination to sync now; it runs at its interval", "destination", d.key, "trigger", why, "err", err)
		return
	}
	c.cfg.Log.Debug("asked the owner of a destination to sync now", "destination", d.key, "trigger", why)
}

// HeldChanged is the pool's OnHeldChange: the mirror wanted to write a file a proposal holds,
// so the live object may have moved and the proposal be stale.
func (c *Controller) HeldChanged(url, branch, path string) {
	for _, p := range c.proposalsAt(path) {
		if d, err := c.destination(p.Namespace, p.Spec.DestinationRef.Name); err == nil && d.url == url && d.branch == branch {
			c.ctl.Add(proposalKeyPrefix + p.Namespace + "/" + p.Name)
		}
	}
}

// Resync is told that this replica started or stopped owning shards: every write-back
// destination runs again, answering a sync-now request nobody handled yet, and every proposal
// waiting with a decision is decided again, each by the replica that owns it now.
func (c *Controller) Resync() {
	for _, item := range c.dests.GetStore().List() {
		d, err := crds.FromUnstructured[crds.GitDestination](item.(*unstructured.Unstructured))
		if err != nil || d.Spec.WriteBack == nil || !d.Spec.WriteBack.Enabled {
			continue
		}
		key := d.Namespace + "/" + d.Name
		t := trigger{kind: crds.TriggerStartup}
		if v := d.Annotations[crds.AnnotationSyncNow]; v != "" && (d.Status.WriteBack == nil || d.Status.WriteBack.LastHandledSyncNow != v) {
			t = trigger{kind: crds.TriggerSyncNow, value: v}
			c.mu.Lock()
			c.requested[key] = v
			c.mu.Unlock()
		}
		c.enqueueDestination(key, t)
	}
	if proposals, ok := c.caches.Indexer(crds.Proposals); ok {
		for _, obj := range proposals.List() {
			if key := c.proposalKey(obj); key != gaugesKey {
				c.ctl.Add(key)
			}
		}
	}
}

// enqueueDestination queues a run; a sync-now request wins over a start-up run, which wins
// over an interval run, so the annotation's value is recorded as handled. A webhook trigger
// waits until receiverSpacing after the destination's last run started: a flood of pushes then
// costs at most two fetches (the run under way and one that answers all the others).
func (c *Controller) enqueueDestination(key string, t trigger) {
	c.mu.Lock()
	if cur, ok := c.triggers[key]; !ok || cur.kind == crds.TriggerInterval || t.kind == crds.TriggerSyncNow {
		c.triggers[key] = t
	}
	var wait time.Duration
	if t.kind == crds.TriggerReceiver {
		wait = time.Until(c.started[key].Add(receiverSpacing))
	}
	c.mu.Unlock()
	c.ctl.AddAfter(destinationKeyPrefix+key, max(wait, 0))
}

// proposalKey is the key of a proposal that waits and carries a decision, or that the daemon did
// not open and has not disowned yet; for any other change of a proposal, gaugesKey, so the
// pending gauges follow the cache.
func (c *Controller) proposalKey(obj any) string {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return gaugesKey // deleted: nothing to decide
	}
	p, err := crds.FromUnstructured[crds.Proposal](u)
	if err != nil {
		return gaugesKey
	}
	if p.Status.Phase != crds.PhaseForeign && !c.ours(p) {
		return proposalKeyPrefix + p.Namespace + "/" + p.Name // to be disowned, whatever its decision
	}
	if !waiting(p) || (p.Spec.Decision == crds.DecisionNone && !waitsToApply(p)) {
		return gaugesKey
	}
	if p.Status.Phase == crds.PhaseIgnored && p.Spec.Decision == crds.DecisionIgnore {
		return gaugesKey
	}
	return proposalKeyPrefix + p.Namespace + "/" + p.Name
}

// handle is the controller's one handler: it keeps the caches write-back needs running while a
// destination enables it, then acts on the key.
func (c *Controller) handle(ctx context.Context, key string) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, defaultOperationDeadline)
	defer cancel()
	if strings.HasPrefix(key, seenKeyPrefix) {
		// Its run is queued even when the caches cannot start yet: the run retries that itself.
		c.destinationSeen(strings.TrimPrefix(key, seenKeyPrefix))
		return 0, c.followCaches(ctx)
	}
	if err := c.followCaches(ctx); err != nil {
		return 0, err
	}
	if _, err := c.sealKey(ctx); err != nil { // nothing is opened nor decided without it
		return 0, err
	}
	var after time.Duration
	var err error
	switch {
	case strings.HasPrefix(key, destinationKeyPrefix):
		after, err = c.runDestination(ctx, strings.TrimPrefix(key, destinationKeyPrefix))
	case strings.HasPrefix(key, proposalKeyPrefix):
		ns, name, _ := strings.Cut(strings.TrimPrefix(key, proposalKeyPrefix), "/")
		err = c.decide(ctx, ns, name)
		if errors.Is(err, ErrFenced) { // said once where it was refused; not a failure to retry
			after, err = fencedRetry, nil
		}
	case key == policiesKey:
		err = c.policiesChanged(ctx)
	}
	n, oldest := c.pending("")
	c.cfg.Metrics.Pending.Set(float64(n))
	var opened float64 // 0 when none waits
	if !oldest.IsZero() {
		opened = float64(oldest.Unix())
	}
	c.cfg.Metrics.OldestPending.Set(opened)
	return after, err
}

// followCaches starts the caches of GitRepoConfigs and Proposals when a GitDestination enables
// write-back, and stops them when none does.
func (c *Controller) followCaches(ctx context.Context) error {
	for _, item := range c.dests.GetStore().List() {
		d, err := crds.FromUnstructured[crds.GitDestination](item.(*unstructured.Unstructured))
		if err == nil && d.Spec.WriteBack != nil && d.Spec.WriteBack.Enabled {
			return c.caches.Start(ctx)
		}
	}
	c.caches.Stop()
	return nil
}

// destinationSeen queues a write-back destination ("namespace/name") the first time it is seen,
// and again when its sync-now annotation carries a value not acted on yet.
func (c *Controller) destinationSeen(key string) {
	item, ok, _ := c.dests.GetStore().GetByKey(key)
	var d *crds.GitDestination
	if ok {
		d, _ = crds.FromUnstructured[crds.GitDestination](item.(*unstructured.Unstructured))
	}
	if d == nil || d.Spec.WriteBack == nil || !d.Spec.WriteBack.Enabled {
		c.mu.Lock()
		delete(c.known, key) // enabled again later, it runs at once
		c.mu.Unlock()
		return
	}
	c.mu.Lock()
	first := !c.known[key]
	c.known[key] = true
	v := d.Annotations[crds.AnnotationSyncNow]
	syncNow := v != "" && c.requested[key] != v && (d.Status.WriteBack == nil || d.Status.WriteBack.LastHandledSyncNow != v)
	if syncNow {
		c.requested[key] = v
	}
	c.mu.Unlock()
	switch {
	case syncNow:
		c.enqueueDestination(key, trigger{kind: crds.TriggerSyncNow, value: v})
	case first:
		c.enqueueDestination(key, trigger{kind: crds.TriggerStartup})
	}
}

// runDestination reconciles one destination for the trigger it was queued with, and says when to
// run it again: its interval run (0: not scheduled), or shortly when the mirror has not started its
// Git worker yet. A retry after an error, or for the Git worker, answers the same trigger.
func (c *Controller) runDestination(ctx context.Context, name string) (time.Duration, error) {
	c.mu.Lock()
	t, ok := c.triggers[name]
	delete(c.triggers, name)
	// Without a trigger this is an interval timer; one set by an earlier run is not due yet.
	early := !ok && time.Now().Add(time.Second).Before(c.started[name].Add(c.cfg.Interval))
	if !early {
		c.started[name] = time.Now()
	}
	c.mu.Unlock()
	if early {
		return 0, nil
	}
	if !ok {
		t = trigger{kind: crds.TriggerInterval}
	}
	enabled, err := c.reconcile(ctx, name, t)
	noWorker := errors.Is(err, gitops.ErrStopped)
	c.mu.Lock()
	defer c.mu.Unlock()
	if err != nil {
		if _, newer := c.triggers[name]; !newer {
			c.triggers[name] = t
		}
	}
	if noWorker {
		// Not a failure: the mirror starts the worker moments after a destination appears (or at
		// start), so this is tried again quietly, soon.
		wait := min(noWorkerWait<<min(c.waits[name], 3), noWorkerMaxWait, c.cfg.Interval)
		c.waits[name]++
		c.cfg.Log.Debug("no Git worker for the destination yet; trying again", "destination", name, "in", wait)
		return wait, nil
	}
	delete(c.waits, name)
	switch {
	case err != nil:
		// Should the retries be given up, the interval run still comes.
		return c.cfg.Interval, err
	case !enabled:
		return 0, nil
	}
	return c.cfg.Interval, nil
}
