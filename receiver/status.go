package receiver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/configbutler/gitops-reverser/crds"
)

// observation is the last event of one Receiver, as the handler reported it.
type observation struct {
	time             metav1.Time
	outcome, message string
	pending          bool      // a write is queued
	written          time.Time // when the last write started
}

// written is a status the controller wrote: sig sums it up, fromRV is the resourceVersion it was
// computed from. While the informer's cache still holds fromRV, the same status is not written
// again (nor its Event recorded twice).
type written struct{ fromRV, sig string }

// Observe records the last event of a Receiver ("namespace/name"): its outcome (crds.Outcome*)
// and a message. It is the handler's Observer and never blocks: the status is written
// debounced, at most once per ObserveInterval per Receiver, the latest event winning.
func (c *Controller) Observe(receiverKey, outcome, message string) {
	c.mu.Lock()
	o := c.observed[receiverKey]
	if o == nil {
		o = &observation{}
		c.observed[receiverKey] = o
	}
	o.time, o.outcome, o.message = metav1.Now(), outcome, message
	if o.pending {
		c.mu.Unlock()
		return
	}
	o.pending = true
	delay := time.Until(o.written.Add(ObserveInterval))
	c.mu.Unlock()
	c.ctl.AddAfter(observeKeyPrefix+receiverKey, max(delay, 0))
}

// writeObserved writes the latest observation of a Receiver into its status.
func (c *Controller) writeObserved(ctx context.Context, key string) error {
	c.mu.Lock()
	o := c.observed[key]
	if o == nil {
		c.mu.Unlock()
		return nil
	}
	o.pending, o.written = false, time.Now()
	st := map[string]any{"lastEventTime": o.time, "lastEvent": o.message, "lastOutcome": o.outcome}
	c.mu.Unlock()
	namespace, name, ok := strings.Cut(key, "/")
	if !ok {
		return nil
	}
	err := c.patchStatus(ctx, namespace, name, st)
	if apierrors.IsNotFound(err) {
		c.mu.Lock()
		if o := c.observed[key]; o != nil && !o.pending {
			delete(c.observed, key)
		}
		c.mu.Unlock()
		return nil
	}
	return err
}

// writeStatuses writes the status of every Receiver whose path, readiness or observed
// generation changed, with an Event when its readiness does.
func (c *Controller) writeStatuses(ctx context.Context, all []resolved) error {
	var errs []error
	keep := make(map[string]bool, len(all))
	for _, r := range all {
		keep[r.entry.Key()] = true
		if err := c.writeStatus(ctx, r); err != nil {
			errs = append(errs, err)
		}
	}
	c.mu.Lock()
	for k := range c.written {
		if !keep[k] {
			delete(c.written, k)
		}
	}
	c.mu.Unlock()
	return errors.Join(errs...)
}

// writeStatus writes one Receiver's status when it changed.
func (c *Controller) writeStatus(ctx context.Context, r resolved) error {
	old := r.obj.Status
	cond := metav1.Condition{
		Type: crds.ConditionReady, Status: metav1.ConditionTrue, Reason: r.reason,
		Message: "POST to " + r.path, ObservedGeneration: r.obj.Generation,
	}
	if r.reason != ReasonReady {
		cond.Status, cond.Message = metav1.ConditionFalse, r.entry.NotReady
	}
	conds := append([]metav1.Condition(nil), old.Conditions...)
	changed := meta.SetStatusCondition(&conds, cond)
	if !changed && old.WebhookPath == r.path && old.ObservedGeneration == r.obj.Generation {
		return nil
	}
	key := r.entry.Key()
	w := written{fromRV: r.obj.ResourceVersion, sig: fmt.Sprintf("%s|%s|%s|%s|%d", r.path, cond.Status, cond.Reason, cond.Message, cond.ObservedGeneration)}
	c.mu.Lock()
	stale := c.written[key] == w
	c.mu.Unlock()
	if stale {
		return nil // written already; the cache has not caught up
	}
	st := map[string]any{"conditions": conds, "observedGeneration": r.obj.Generation, "webhookPath": nil}
	if r.path != "" {
		st["webhookPath"] = r.path
	}
	if err := c.patchStatus(ctx, r.obj.Namespace, r.obj.Name, st); err != nil {
		if apierrors.IsNotFound(err) {
			return nil // deleted meanwhile
		}
		return err
	}
	c.mu.Lock()
	c.written[key] = w
	c.mu.Unlock()
	was := meta.FindStatusCondition(old.Conditions, crds.ConditionReady)
	if was == nil || was.Status != cond.Status || was.Reason != cond.Reason {
		ref := crds.ObjectReference(crds.KindReceiver, r.obj)
		if cond.Status == metav1.ConditionTrue {
			c.recorder.Event(ref, corev1.EventTypeNormal, cond.Reason, cond.Message)
		} else {
			c.recorder.Event(ref, corev1.EventTypeWarning, cond.Reason, cond.Message)
		}
	}
	return nil
}

// patchStatus merges st into the Receiver's status through the status subresource.
func (c *Controller) patchStatus(ctx context.Context, namespace, name string, st map[string]any) error {
	body, err := json.Marshal(map[string]any{"status": st})
	if err != nil {
		return fmt.Errorf("encode the status of Receiver %s/%s: %w", namespace, name, err)
	}
	_, err = c.dyn.Resource(crds.Receivers).Namespace(namespace).Patch(ctx, name, types.MergePatchType, body,
		metav1.PatchOptions{FieldManager: crds.FieldManager}, "status")
	if err != nil {
		return fmt.Errorf("update the status of Receiver %s/%s: %w", namespace, name, err)
	}
	return nil
}
