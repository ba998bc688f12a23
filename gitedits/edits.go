// Package gitedits is write-back's view of Git history: which files people, not the daemon,
// changed on a branch since a revision, and what a file held at a commit. It reads a clone
// through the worker that owns it (gitops.Reader, run on the worker's goroutine), so each
// repository is still touched by exactly one goroutine.
package gitedits

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/go-git/go-git/v5/plumbing"

	"github.com/configbutler/gitops-reverser/gitops"
	"github.com/configbutler/gitops-reverser/gitstore"
)

// Errors of Edits and File; each comes wrapped with what was asked. Without a worker for the
// branch they return gitops.ErrNoWorker.
var (
	// ErrUnknownRevision: the revision is not in the fetched history of the branch (force-pushed
	// away, or it never existed).
	ErrUnknownRevision = errors.New("unknown revision")
	// ErrHistoryTooLong: more commits than Query.MaxCommits separate Since from the tip.
	ErrHistoryTooLong = errors.New("history too long")
	// ErrNotFound: no file at that path in that commit.
	ErrNotFound = errors.New("file not found")
	// ErrTooLarge: the file is larger than gitops.MaxFileBytes and is not read.
	ErrTooLarge = errors.New("file too large")
)

// DefaultMaxCommits bounds the walk of Edits when Query.MaxCommits is not set: the commits a
// worker's clone keeps, so that a walk within the bound never meets the clone's boundary.
const DefaultMaxCommits = gitstore.KeptCommits

// Query asks which files under Folder commits not written by the daemon changed since a
// revision.
type Query struct {
	Folder string // base folder (clean relative path, "" = whole repo)
	// Since is the last reconciled commit. "" = none yet: the baseline is the newest commit Ours
	// claims, the last one the daemon wrote, or the tip when it wrote none among the newest
	// MaxCommits.
	Since string
	// Whole asks for every file under Folder at the tip that a person changed last, instead of
	// the changes since a revision, each credited to that commit; and, when the clone still has
	// Since, a deletion of each file Since held that the tip lacks (what a force-push took
	// away), credited to the tip. A file whose state is the mirror's (its newest commit is the
	// daemon's, or the mirror holds a change to it not pushed yet) is left out. For a history
	// that lost its baseline.
	Whole bool
	// Ours is true for a commit the daemon wrote (by its trailers); such commits are skipped.
	// nil: every commit is someone else's.
	Ours       func(message string) bool
	MaxBytes   int64 // content of a file larger than this is not read (Edit.Size tells); 0 = gitops.MaxFileBytes
	MaxCommits int   // bound on the walk (0 = DefaultMaxCommits); past it: ErrHistoryTooLong
}

// Edit is one file a person changed.
type Edit struct {
	Path    string // from the root of the repository, like gitops.Change.Path
	Content []byte // the file at the tip; nil when deleted there (or when Size > MaxBytes: check Size)
	Deleted bool   // no file at Path at the tip
	Size    int64  // blob size at the tip
	// Link is true when the entry at the tip is not a file but a symbolic link or a submodule:
	// there is no content to read.
	Link   bool
	Commit string           // newest commit not written by the daemon that changed this path
	Author gitops.Signature // that commit's author
	When   time.Time        // that commit's author time
}

// Result is the remote tip and the files changed since the query's revision.
type Result struct {
	Tip   string // "" when the remote has no such branch
	Base  string // the commit the edits are counted from: Since or the baseline found ("" for Whole)
	Edits []Edit // sorted by Path
}

// Git is where the clones are, by remote and branch (gitops.Pool).
type Git interface {
	Fetch(ctx context.Context, url, branch string) (gitops.FetchResult, error)
	Read(ctx context.Context, url, branch string, fn func(gitops.Reader) error) error
}

// Branch is one branch of a repository, read through the worker of Git that owns its clone.
type Branch struct {
	Git       Git
	URL, Name string
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
// The walk runs on the worker's goroutine. The result is relative to the remote tip, what
// people pushed: changes the worker has not pushed yet are not in it, and are replayed on the
// fetched tip at the next push.
func (b Branch) Edits(ctx context.Context, q Query) (Result, error) {
	folder, err := cleanFolder(q.Folder)
	if err != nil {
		return Result{}, err
	}
	q.Folder = folder
	if q.MaxBytes <= 0 {
		q.MaxBytes = gitops.MaxFileBytes
	}
	if q.MaxCommits <= 0 {
		q.MaxCommits = DefaultMaxCommits
	}
	if q.Ours == nil {
		q.Ours = func(string) bool { return false }
	}
	if err := ctx.Err(); err != nil {
		return Result{}, err
	}
	fr, err := b.Git.Fetch(ctx, b.URL, b.Name)
	switch {
	case errors.Is(err, gitops.ErrNoWorker):
		return Result{}, fmt.Errorf("edits of %s: %w", b.Name, err)
	case fr.Err != nil:
		return Result{}, fmt.Errorf("edits: %w", fr.Err)
	case err != nil:
		return Result{}, err
	}
	res := Result{Tip: fr.Tip}
	if fr.Tip == "" && (q.Since == "" || q.Whole) {
		return res, nil
	}
	err = b.Git.Read(ctx, b.URL, b.Name, func(r gitops.Reader) error {
		h := &history{r: r, ctx: ctx, max: q.MaxCommits, folder: q.Folder}
		var err error
		switch {
		case q.Whole:
			res.Edits, err = whole(h, plumbing.NewHash(fr.Tip), q)
			return err
		case q.Since == "":
			base, err := baseline(h, plumbing.NewHash(fr.Tip), q.Ours)
			if err != nil {
				return fmt.Errorf("the baseline of %s: %w", fr.Tip, err)
			}
			q.Since = base.String()
		}
		res.Base = q.Since
		res.Edits, err = edits(ctx, r, fr.Tip, q)
		return err
	})
	if errors.Is(err, gitops.ErrNoWorker) {
		err = fmt.Errorf("edits of %s: %w", b.Name, err)
	}
	return res, err
}

// edits is the walk of Edits since q.Since up to tip, on the worker's goroutine.
func edits(ctx context.Context, r gitops.Reader, tip string, q Query) ([]Edit, error) {
	since, ok := parseHash(q.Since)
	if !ok || tip == "" || !has(r, since) {
		return nil, fmt.Errorf("edits since %q: %w", q.Since, ErrUnknownRevision)
	}
	tipHash := plumbing.NewHash(tip)
	if tipHash == since {
		return nil, nil
	}
	h := &history{r: r, ctx: ctx, max: q.MaxCommits, folder: q.Folder}
	changed, err := h.edits(tipHash, since, q.Ours)
	if err != nil {
		return nil, fmt.Errorf("edits since %s: %w", q.Since, err)
	}
	root, err := commitTree(r, tipHash)
	if err != nil {
		return nil, fmt.Errorf("edits: %w", err)
	}
	requested, err := r.Requested()
	if err != nil {
		return nil, fmt.Errorf("edits: the files of the pull request: %w", err)
	}
	var out []Edit
	for p, e := range changed {
		if _, mirrored := requested[p]; mirrored {
			continue // the mirror's change to it waits in the pull request: the cluster wins
		}
		e.Path = p
		if err := readTip(r, root, &e, q.MaxBytes); err != nil {
			return nil, fmt.Errorf("edits: read %s at the tip: %w", p, err)
		}
		out = append(out, e)
	}
	slices.SortFunc(out, func(a, b Edit) int { return strings.Compare(a.Path, b.Path) })
	return out, nil
}

// readTip fills in e's content at the tip whose root tree is root.
func readTip(r gitops.Reader, root plumbing.Hash, e *Edit, maxBytes int64) error {
	entry, err := lookupFile(r, root, e.Path)
	if err != nil {
		return err
	}
	if entry == nil {
		e.Deleted = true
		return nil
	}
	if entry.Mode == gitlinkMode || entry.Mode == symlinkMode { // a submodule, or a link's target
		e.Link = true
		return nil
	}
	if e.Size, err = r.Size(entry.Hash); err != nil {
		return fmt.Errorf("size of blob %s: %w", entry.Hash, err)
	}
	if e.Size <= maxBytes {
		e.Content, err = r.Blob(entry.Hash)
	}
	return err
}

// File reads path at commit (a full SHA) from the clone of the branch, without fetching: a
// commit that Edits reported is there. It is for checking that a file is exactly what Git
// holds. The error wraps ErrUnknownRevision when the clone has no such commit, ErrNotFound when
// the commit has no file at path, ErrTooLarge past gitops.MaxFileBytes.
func (b Branch) File(ctx context.Context, commit, path string) ([]byte, error) {
	var data []byte
	err := b.Git.Read(ctx, b.URL, b.Name, func(r gitops.Reader) error {
		var err error
		data, err = readFile(r, commit, path)
		return err
	})
	if errors.Is(err, gitops.ErrNoWorker) {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	return data, err
}

// readFile is File on the worker's goroutine.
func readFile(r gitops.Reader, commit, path string) ([]byte, error) {
	h, ok := parseHash(commit)
	if !ok {
		return nil, fmt.Errorf("read %s at %q: %w", path, commit, ErrUnknownRevision)
	}
	if !has(r, h) {
		// Older than the history the clone keeps, or not a commit of the branch at all.
		if err := r.Deepen(); err != nil {
			return nil, fmt.Errorf("read %s at %s: %w", path, commit, err)
		}
		if !has(r, h) {
			return nil, fmt.Errorf("read %s at %s: %w", path, commit, ErrUnknownRevision)
		}
	}
	root, err := commitTree(r, h)
	if err != nil {
		return nil, fmt.Errorf("read %s at %s: %w", path, commit, err)
	}
	entry, err := lookupFile(r, root, path)
	if err != nil {
		return nil, fmt.Errorf("read %s at %s: %w", path, commit, err)
	}
	if entry == nil || entry.Mode == gitlinkMode {
		return nil, fmt.Errorf("read %s at %s: %w", path, commit, ErrNotFound)
	}
	size, err := r.Size(entry.Hash)
	if err != nil {
		return nil, fmt.Errorf("read %s at %s: %w", path, commit, err)
	}
	if size > gitops.MaxFileBytes {
		return nil, fmt.Errorf("read %s at %s: %d bytes: %w", path, commit, size, ErrTooLarge)
	}
	return r.Blob(entry.Hash)
}
