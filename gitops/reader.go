package gitops

import (
	"context"
	"fmt"

	"github.com/configbutler/gitops-reverser/gitstore"
)

// ErrNoWorker: no worker runs for the branch. It is an ErrStopped too.
var ErrNoWorker = fmt.Errorf("no git worker for the branch: %w", ErrStopped)

// Reader reads the objects of a worker's clone, and of the commits it built and has not pushed
// yet (gitstore.Reader's methods), and tells what the worker holds that the remote does not have
// yet: read-only access for what is built on Git history elsewhere (package gitedits). It is
// valid only inside the function given to Read, which runs on the worker's goroutine: one clone,
// one goroutine.
type Reader struct {
	gitstore.Reader
	w *Worker
}

// Pending returns the paths of the changes the worker holds that the remote has not accepted
// yet, batched or committed and not pushed: there the remote says what the mirror is about to
// replace.
func (r Reader) Pending() map[string]struct{} {
	out := map[string]struct{}{}
	if r.w == nil {
		return out
	}
	add := func(items []item) {
		for _, it := range items {
			if it.sync != nil || it.change.Path == "" {
				continue
			}
			if p, adopted := r.w.adoptedPath(it.change.Adopt); adopted { // its document's file
				if p != "" {
					out[p] = struct{}{}
				}
				continue
			}
			out[it.change.Path] = struct{}{}
		}
	}
	add(r.w.batch.items)
	for _, run := range r.w.pending {
		add(run.items)
	}
	return out
}

// Requested returns the paths of the files the worker's head branch changes against its
// target: the mirror's change that waits in its pull request (none without a head branch).
func (r Reader) Requested() (map[string]struct{}, error) {
	out := map[string]struct{}{}
	if r.w == nil || r.w.remote.Head == "" {
		return out, nil
	}
	files, err := r.w.headFiles()
	for _, f := range files {
		out[f.Path] = struct{}{}
	}
	return out, err
}

// Read runs fn on the worker's goroutine with a Reader of its clone, without fetching, and
// returns fn's error; ErrStopped when the worker stopped, ctx's error when ctx ended first (fn
// may still run: it should watch ctx itself when it reads much).
func (w *Worker) Read(ctx context.Context, fn func(Reader) error) error {
	var ferr error
	if err := w.call(ctx, func(wctx context.Context) { ferr = fn(Reader{Reader: w.repo.Reader(wctx), w: w}) }); err != nil {
		return err
	}
	return ferr
}

// Read runs fn with a Reader of the clone of the branch's worker (see Worker.Read).
func (p *Pool) Read(ctx context.Context, url, branch string, fn func(Reader) error) error {
	w := p.worker(url, branch)
	if w == nil {
		return ErrNoWorker
	}
	return w.Read(ctx, fn)
}

// call runs fn on the worker's goroutine, with the worker's context, and waits for it to
// return or for ctx to end.
func (w *Worker) call(ctx context.Context, fn func(wctx context.Context)) error {
	done := make(chan struct{})
	if !w.in.request(control{run: func(wctx context.Context) { fn(wctx); close(done) }}) {
		return ErrStopped
	}
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-w.done:
		select {
		case <-done:
			return nil
		default:
			return ErrStopped
		}
	}
}
