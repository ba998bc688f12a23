package gitops

import (
	"context"
	"fmt"
	"strings"
)

// Enqueue hands a change to the worker, blocking while its queue is full (backpressure). The
// worker keeps c.Content: the caller must not modify it afterwards.
func (w *Worker) Enqueue(ctx context.Context, c Change) error {
	if !validPath(c.Path) {
		return fmt.Errorf("enqueue change: invalid path %q", c.Path)
	}
	return w.send(ctx, request{item: item{change: c}})
}

// Sync declares the live paths under scopes; orphans are deleted in order with the changes
// enqueued around it. The worker keeps s.Live: the caller must not modify it afterwards.
func (w *Worker) Sync(ctx context.Context, s Sync) error {
	for _, scope := range s.Scopes {
		if !strings.HasSuffix(scope, "/") || !validPath(strings.TrimSuffix(scope, "/")) {
			return fmt.Errorf("sync: invalid scope %q", scope)
		}
	}
	return w.send(ctx, request{item: item{sync: &s}})
}

// Flush commits everything enqueued so far and waits until the remote accepted it.
func (w *Worker) Flush(ctx context.Context) error {
	done := make(chan error, 1)
	if err := w.send(ctx, request{flush: done}); err != nil {
		return err
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

func (w *Worker) send(ctx context.Context, req request) error {
	select {
	case <-w.done:
		return ErrStopped
	default:
	}
	select {
	case w.in <- req:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-w.done:
		return ErrStopped
	}
}

// Status is a snapshot of the worker's progress.
func (w *Worker) Status() WorkerStatus {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.status
}
