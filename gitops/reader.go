package gitops

import (
	"context"
	"fmt"

	"github.com/go-git/go-git/v5/plumbing"
)

// ErrNoWorker: no worker runs for the branch. It is an ErrStopped too.
var ErrNoWorker = fmt.Errorf("no git worker for the branch: %w", ErrStopped)

// Reader reads the objects of a worker's clone, and of the commits it built and has not pushed
// yet: read-only access for what is built on Git history elsewhere (package gitedits). It is
// valid only inside the function given to Read, which runs on the worker's goroutine: one
// clone, one goroutine.
type Reader struct {
	s   *store
	w   *Worker         // nil: no worker, nothing pending
	ctx context.Context // of the worker, for Deepen
}

// Shallow reports whether commit h is at the boundary of the history the clone keeps (see
// KeptCommits): its parents are not in the clone, and a walk ends there as at a root commit.
func (r Reader) Shallow(h plumbing.Hash) bool { return r.s.shallow[h] }

// Deepen fetches the history of the branch that the clone does not keep (see KeptCommits), for
// a commit older than its boundary; the next renewal of the clone drops it again. Without a
// worker, or when the clone has all of it, it does nothing.
func (r Reader) Deepen() error {
	if r.w == nil || len(r.s.shallow) == 0 {
		return nil
	}
	if err := r.w.repo.deepen(r.ctx); err != nil {
		return err
	}
	r.s.readShallow()
	return nil
}

// Commit returns the encoding of commit h (its headers, a blank line, its message).
func (r Reader) Commit(h plumbing.Hash) ([]byte, error) {
	if o, ok := r.s.overlay[h]; ok {
		return o.data, nil
	}
	return r.s.read(plumbing.CommitObject, h)
}

// Tree returns the entries of tree h, in Git order. They must not be changed.
func (r Reader) Tree(h plumbing.Hash) ([]TreeEntry, error) { return r.s.tree(h) }

// Blob returns the content of blob h.
func (r Reader) Blob(h plumbing.Hash) ([]byte, error) { return r.s.blob(h) }

// Size is the size of object h without reading it; an error when the clone has no such object.
func (r Reader) Size(h plumbing.Hash) (int64, error) { return r.s.size(h) }

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
			if it.sync == nil && it.change.Path != "" {
				out[it.change.Path] = struct{}{}
			}
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

// Diff calls fn with the path (after prefix) of every file that differs between trees a and b
// (zero: empty): added, removed or changed. Subtrees with the same hash are skipped unread.
func (r Reader) Diff(a, b plumbing.Hash, prefix string, fn func(path string)) error {
	return r.s.diffFiles(a, b, prefix, func(path string, _, _ *TreeEntry) { fn(path) })
}

// Dir returns the entries of the directory at dir ("a/b", "" for the root) below the tree root,
// nil when there is none.
func (r Reader) Dir(root plumbing.Hash, dir string) ([]TreeEntry, error) {
	return r.s.lookupDir(root, dir)
}

// WalkFiles calls fn with the path of every file below the directory entries, whose path (with
// a trailing "/", or empty for the root) is prefix. The path buffer is reused: fn must copy it.
func (r Reader) WalkFiles(entries []TreeEntry, prefix []byte, fn func(path []byte)) error {
	return r.s.walkFiles(entries, prefix, fn)
}

// Read runs fn on the worker's goroutine with a Reader of its clone, without fetching, and
// returns fn's error; ErrStopped when the worker stopped, ctx's error when ctx ended first (fn
// may still run: it should watch ctx itself when it reads much).
func (w *Worker) Read(ctx context.Context, fn func(Reader) error) error {
	var ferr error
	if err := w.call(ctx, func(wctx context.Context) { ferr = fn(Reader{s: w.store, w: w, ctx: wctx}) }); err != nil {
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

// blob returns the content of blob h, from the overlay or the clone.
func (s *store) blob(h plumbing.Hash) ([]byte, error) {
	if o, ok := s.overlay[h]; ok {
		return o.data, nil
	}
	if data, ok := s.located.read(h); ok {
		return data, nil
	}
	return s.read(plumbing.BlobObject, h)
}

// size is the size of object h without reading it. (The storage's HasEncodedObject is not used:
// with exclusive access it misses objects that are packed.)
func (s *store) size(h plumbing.Hash) (int64, error) {
	if o, ok := s.overlay[h]; ok {
		return int64(len(o.data)), nil
	}
	n, err := s.sto.EncodedObjectSize(h)
	if err != nil {
		return 0, fmt.Errorf("size of %s: %w", h, err)
	}
	return n, nil
}
