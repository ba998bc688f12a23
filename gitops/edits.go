package gitops

import (
	"context"
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
)

// Errors of Edits and File; each comes wrapped with what was asked.
var (
	// ErrUnknownRevision: the revision is not in the fetched history of the branch (force-pushed
	// away, or it never existed).
	ErrUnknownRevision = errors.New("unknown revision")
	// ErrHistoryTooLong: more commits than EditsQuery.MaxCommits separate Since from the tip.
	ErrHistoryTooLong = errors.New("history too long")
	// ErrNotFound: no file at that path in that commit.
	ErrNotFound = errors.New("file not found")
	// ErrTooLarge: the file is larger than MaxFileBytes and is not read.
	ErrTooLarge = errors.New("file too large")
	// ErrNoWorker: no worker runs for the branch. It is an ErrStopped too.
	ErrNoWorker = fmt.Errorf("no git worker for the branch: %w", ErrStopped)
)

// DefaultMaxCommits bounds the walk of Edits when EditsQuery.MaxCommits is not set.
const DefaultMaxCommits = 10000

// EditsQuery asks which files under Folder commits not written by the daemon changed since a
// revision.
type EditsQuery struct {
	Folder string // base folder (clean relative path, "" = whole repo)
	Since  string // the last reconciled commit; "" = none yet: return the tip only
	// Ours is true for a commit the daemon wrote (by its trailers); such commits are skipped.
	// nil: every commit is someone else's.
	Ours       func(message string) bool
	MaxBytes   int64 // content of a file larger than this is not read (Edit.Size tells); 0 = MaxFileBytes
	MaxCommits int   // bound on the walk (0 = DefaultMaxCommits); past it: ErrHistoryTooLong
}

// Edit is one file a person changed.
type Edit struct {
	Path    string    // from the root of the repository, like Change.Path
	Content []byte    // the file at the tip; nil when deleted there (or when Size > MaxBytes: check Size)
	Deleted bool      // no file at Path at the tip
	Size    int64     // blob size at the tip
	Commit  string    // newest commit not written by the daemon that changed this path
	Author  Signature // that commit's author
	When    time.Time // that commit's author time
}

// EditsResult is the remote tip and the files changed since the query's revision.
type EditsResult struct {
	Tip   string // "" when the remote has no such branch
	Edits []Edit // sorted by Path
}

// Edits fetches the branch and reports the files under q.Folder that commits not written by
// the daemon changed since q.Since (see Worker.Edits).
func (p *Pool) Edits(ctx context.Context, url, branch string, q EditsQuery) (EditsResult, error) {
	w := p.worker(url, branch)
	if w == nil {
		return EditsResult{}, fmt.Errorf("edits of %s: %w", branch, ErrNoWorker)
	}
	return w.Edits(ctx, q)
}

// File reads path at commit from the clone of the branch's worker (see Worker.File).
func (p *Pool) File(ctx context.Context, url, branch, commit, path string) ([]byte, error) {
	w := p.worker(url, branch)
	if w == nil {
		return nil, fmt.Errorf("read %s: %w", path, ErrNoWorker)
	}
	return w.File(ctx, commit, path)
}

// Edits fetches the branch, then walks every commit reachable from the remote tip and not from
// q.Since, newest first by committer time, skipping those q.Ours claims. A commit is compared
// with its first parent (a root commit with the empty tree); a merge only counts the paths that
// differ from every parent, the ones the merge itself decided: what it brought in from a branch
// was changed by that branch's commits, which the walk visits too, or by the daemon. Only the
// trees under q.Folder whose hashes differ are read, so a large folder with one change costs a
// handful of tree reads. Each changed path is reported once, with the newest commit that
// changed it and its content at the tip.
//
// Edits runs on the worker's goroutine, like Fetch. The result is relative to the remote tip,
// what people pushed: changes the worker has not pushed yet are not in it, and are replayed on
// the fetched tip at the next push.
func (w *Worker) Edits(ctx context.Context, q EditsQuery) (EditsResult, error) {
	folder, err := cleanFolder(q.Folder)
	if err != nil {
		return EditsResult{}, err
	}
	q.Folder = folder
	if q.MaxBytes <= 0 {
		q.MaxBytes = MaxFileBytes
	}
	if q.MaxCommits <= 0 {
		q.MaxCommits = DefaultMaxCommits
	}
	if q.Ours == nil {
		q.Ours = func(string) bool { return false }
	}
	type result struct {
		r   EditsResult
		err error
	}
	var out result
	err = w.call(ctx, func(wctx context.Context) {
		out.r, out.err = w.edits(wctx, ctx, q)
	})
	if err != nil {
		return EditsResult{}, err
	}
	return out.r, out.err
}

// File reads path at commit (a full SHA) from the worker's clone, without fetching: a commit
// that Edits reported is there. It is for checking that a file is exactly what Git holds. The
// error wraps ErrUnknownRevision when the clone has no such commit, ErrNotFound when the commit
// has no file at path, ErrTooLarge past MaxFileBytes.
func (w *Worker) File(ctx context.Context, commit, path string) ([]byte, error) {
	var data []byte
	var ferr error
	err := w.call(ctx, func(context.Context) {
		data, ferr = w.readFile(commit, path)
	})
	if err != nil {
		return nil, err
	}
	return data, ferr
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

// edits is Edits on the worker's goroutine: wctx bounds the fetch, like every fetch of the
// worker; ctx, the caller's, bounds the walk.
func (w *Worker) edits(wctx, ctx context.Context, q EditsQuery) (EditsResult, error) {
	if err := ctx.Err(); err != nil {
		return EditsResult{}, err
	}
	fr := w.fetch(wctx)
	if fr.Err != nil {
		return EditsResult{}, fmt.Errorf("edits: %w", fr.Err)
	}
	res := EditsResult{Tip: fr.Tip}
	if q.Since == "" {
		return res, nil
	}
	since, ok := parseHash(q.Since)
	if !ok || fr.Tip == "" || !w.store.has(since) {
		return res, fmt.Errorf("edits since %q: %w", q.Since, ErrUnknownRevision)
	}
	tip := plumbing.NewHash(fr.Tip)
	if tip == since {
		return res, nil
	}
	h := &history{s: w.store, ctx: ctx, max: q.MaxCommits, folder: q.Folder}
	changed, err := h.edits(tip, since, q.Ours)
	if err != nil {
		return res, fmt.Errorf("edits since %s: %w", q.Since, err)
	}
	root, err := w.store.commitTree(tip)
	if err != nil {
		return res, fmt.Errorf("edits: %w", err)
	}
	for p, e := range changed {
		e.Path = p
		if err := w.readTip(root, &e, q.MaxBytes); err != nil {
			return res, fmt.Errorf("edits: read %s at the tip: %w", p, err)
		}
		res.Edits = append(res.Edits, e)
	}
	slices.SortFunc(res.Edits, func(a, b Edit) int { return strings.Compare(a.Path, b.Path) })
	return res, nil
}

// readTip fills in e's content at the tip whose root tree is root.
func (w *Worker) readTip(root plumbing.Hash, e *Edit, maxBytes int64) error {
	entry, err := w.store.lookupFile(root, e.Path)
	if err != nil {
		return err
	}
	if entry == nil {
		e.Deleted = true
		return nil
	}
	if entry.mode == gitlinkMode { // a submodule: no blob here
		return nil
	}
	if e.Size, err = w.store.size(entry.hash); err != nil {
		return fmt.Errorf("size of blob %s: %w", entry.hash, err)
	}
	if e.Size <= maxBytes {
		e.Content, err = w.store.blob(entry.hash)
	}
	return err
}

// readFile is File on the worker's goroutine.
func (w *Worker) readFile(commit, path string) ([]byte, error) {
	h, ok := parseHash(commit)
	if !ok {
		return nil, fmt.Errorf("read %s at %q: %w", path, commit, ErrUnknownRevision)
	}
	if !w.store.has(h) {
		return nil, fmt.Errorf("read %s at %s: %w", path, commit, ErrUnknownRevision)
	}
	root, err := w.store.commitTree(h)
	if err != nil {
		return nil, fmt.Errorf("read %s at %s: %w", path, commit, err)
	}
	entry, err := w.store.lookupFile(root, path)
	if err != nil {
		return nil, fmt.Errorf("read %s at %s: %w", path, commit, err)
	}
	if entry == nil || entry.mode == gitlinkMode {
		return nil, fmt.Errorf("read %s at %s: %w", path, commit, ErrNotFound)
	}
	size, err := w.store.size(entry.hash)
	if err != nil {
		return nil, fmt.Errorf("read %s at %s: %w", path, commit, err)
	}
	if size > MaxFileBytes {
		return nil, fmt.Errorf("read %s at %s: %d bytes: %w", path, commit, size, ErrTooLarge)
	}
	return w.store.blob(entry.hash)
}

// blob returns the content of blob h, from the overlay or the clone.
func (s *store) blob(h plumbing.Hash) ([]byte, error) {
	if o, ok := s.overlay[h]; ok {
		return o.data, nil
	}
	return s.read(plumbing.BlobObject, h)
}

// has reports whether the clone or the overlay holds object h.
func (s *store) has(h plumbing.Hash) bool {
	_, err := s.size(h)
	return err == nil
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

// gitlinkMode is the mode of a submodule entry, whose hash names a commit of another repository.
const gitlinkMode = "160000"

// lookupFile returns the entry of the file at path below root, nil when there is none (or a
// directory is there).
func (s *store) lookupFile(root plumbing.Hash, p string) (*treeEntry, error) {
	dir, name := path.Split(p)
	entries, err := s.lookupDir(root, strings.TrimSuffix(dir, "/"))
	if err != nil {
		return nil, err
	}
	i, found := slices.BinarySearchFunc(entries, name, func(e treeEntry, name string) int {
		return compareKey(e.name, e.isDir(), name)
	})
	if !found || entries[i].isDir() {
		return nil, nil
	}
	return &entries[i], nil
}

// cleanFolder checks a base folder and returns it without a leading or trailing "/", "" for
// the whole repository.
func cleanFolder(folder string) (string, error) {
	f := strings.TrimPrefix(path.Clean(strings.TrimPrefix(folder, "/")), "./")
	if f == "." {
		f = ""
	}
	if f != "" && !validPath(f) {
		return "", fmt.Errorf("edits: invalid folder %q", folder)
	}
	return f, nil
}

// parseHash parses a full hexadecimal SHA-1.
func parseHash(s string) (plumbing.Hash, bool) {
	if len(s) != 40 {
		return plumbing.ZeroHash, false
	}
	for _, c := range s {
		if !strings.ContainsRune("0123456789abcdefABCDEF", c) {
			return plumbing.ZeroHash, false
		}
	}
	return plumbing.NewHash(s), true
}
