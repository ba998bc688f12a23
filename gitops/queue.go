package gitops

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/go-git/go-git/v5/plumbing/transport"
)

// Enqueue hands a change to the worker. It never blocks: while the remote is slow the changes
// wait in the inbox, coalesced per path past a bound. The worker keeps c.Content: the caller
// must not modify it afterwards.
func (w *Worker) Enqueue(c Change) error {
	if !ValidPath(c.Path) {
		return fmt.Errorf("enqueue change: invalid path %q", c.Path)
	}
	return w.put(item{change: c})
}

// Sync declares the live paths under scopes; orphans are deleted in order with the changes
// enqueued around it. It never blocks. The worker keeps s.Live: the caller must not modify it
// afterwards.
func (w *Worker) Sync(s Sync) error {
	for _, scope := range s.Scopes {
		if !strings.HasSuffix(scope, "/") || !ValidPath(strings.TrimSuffix(scope, "/")) {
			return fmt.Errorf("sync: invalid scope %q", scope)
		}
	}
	return w.put(item{sync: &s})
}

// pacePatience is how long Pace waits for the worker to take its inbox before it takes the
// worker for stuck on its remote and stops pacing, until the worker takes again.
const pacePatience = 5 * time.Second

// Pace blocks a caller that enqueues many changes at once (the list of a resource) while more than
// a few thousand wait, until the worker takes them, so that what waits for a commit is bounded by
// what the worker keeps up with, not by the number of objects listed. It never blocks for long: a
// worker that takes nothing for pacePatience is busy with a slow or dead remote, and Pace stops
// waiting for it until it takes again. Watch events are never paced.
func (w *Worker) Pace(ctx context.Context) { w.in.pace(ctx, pacePatience) }

func (w *Worker) put(it item) error {
	ok, coalesced := w.in.put(it, w.identity.Bot)
	if !ok {
		return ErrStopped
	}
	if coalesced {
		w.noteCoalesced("waiting")
	}
	return nil
}

// Flush commits everything enqueued so far and waits until the remote accepted it.
func (w *Worker) Flush(ctx context.Context) error {
	done := make(chan error, 1)
	if !w.in.request(control{flush: done}) {
		return ErrStopped
	}
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	case <-w.done:
		select {
		case err := <-done:
			return err
		default:
			return ErrStopped
		}
	}
}

// Fetch brings the worker's clone up to date with the remote branch now and returns the tip.
// Changes not pushed yet are replayed on a moved tip at the next push.
func (w *Worker) Fetch(ctx context.Context) (FetchResult, error) {
	done := make(chan FetchResult, 1)
	if !w.in.request(control{fetch: done}) {
		return FetchResult{}, ErrStopped
	}
	select {
	case r := <-done:
		return r, r.Err
	case <-ctx.Done():
		return FetchResult{}, ctx.Err()
	case <-w.done:
		return FetchResult{}, ErrStopped
	}
}

// SetAuth replaces the credentials the worker uses from its next request to the remote on; a
// retry waiting for its backoff is made at once.
func (w *Worker) SetAuth(auth transport.AuthMethod) {
	w.in.request(control{auth: &authUpdate{auth: auth}})
}

// setSigner makes the worker sign its commits with s from now on (nil: unsigned). The commits it
// built but has not pushed are built again, so every commit it pushes carries the new signature.
func (w *Worker) setSigner(s Signer) {
	w.in.request(control{run: func(context.Context) {
		w.signer = s
		w.built.valid = false
	}})
}

// Status is a snapshot of the worker's progress.
func (w *Worker) Status() WorkerStatus {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.status
}

// setDelivery replaces the Delivery of a worker with a head branch, from its next call on.
func (w *Worker) setDelivery(d Delivery) {
	w.in.request(control{run: func(context.Context) { w.delivery = d }})
}
