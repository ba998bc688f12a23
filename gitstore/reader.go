package gitstore

import (
	"context"

	"github.com/go-git/go-git/v5/plumbing"
)

// Reader reads the objects of a clone, and of the commits its Store built and has not persisted
// yet: read-only access for what is built on Git history elsewhere. It is valid only on the
// goroutine that owns the Repo.
type Reader struct {
	repo *Repo
	ctx  context.Context // of the Repo's owner, for Deepen
}

// Reader is a Reader of the clone; ctx bounds the fetch of Deepen.
func (r *Repo) Reader(ctx context.Context) Reader { return Reader{repo: r, ctx: ctx} }

// Shallow reports whether commit h is at the boundary of the history the clone keeps (see
// KeptCommits): its parents are not in the clone, and a walk ends there as at a root commit.
func (r Reader) Shallow(h plumbing.Hash) bool { return r.repo.store.Shallow(h) }

// Deepen fetches the history of the branch that the clone does not keep (see KeptCommits), for
// a commit older than its boundary; the next renewal of the clone drops it again. When the clone
// has all of it, it does nothing.
func (r Reader) Deepen() error {
	if r.repo == nil || len(r.repo.store.shallow) == 0 {
		return nil
	}
	if err := r.repo.deepen(r.ctx); err != nil {
		return err
	}
	r.repo.store.readShallow()
	return nil
}

// Commit returns the encoding of commit h (its headers, a blank line, its message).
func (r Reader) Commit(h plumbing.Hash) ([]byte, error) { return r.repo.store.Commit(h) }

// Tree returns the entries of tree h, in Git order. They must not be changed.
func (r Reader) Tree(h plumbing.Hash) ([]TreeEntry, error) { return r.repo.store.tree(h) }

// Blob returns the content of blob h.
func (r Reader) Blob(h plumbing.Hash) ([]byte, error) { return r.repo.store.Blob(h) }

// Size is the size of object h without reading it; an error when the clone has no such object.
func (r Reader) Size(h plumbing.Hash) (int64, error) { return r.repo.store.size(h) }

// Diff calls fn with the path (after prefix) of every file that differs between trees a and b
// (zero: empty): added, removed or changed. Subtrees with the same hash are skipped unread.
func (r Reader) Diff(a, b plumbing.Hash, prefix string, fn func(path string)) error {
	return r.repo.store.DiffFiles(a, b, prefix, func(path string, _, _ *TreeEntry) { fn(path) })
}

// Dir returns the entries of the directory at dir ("a/b", "" for the root) below the tree root,
// nil when there is none.
func (r Reader) Dir(root plumbing.Hash, dir string) ([]TreeEntry, error) {
	return r.repo.store.Dir(root, dir)
}

// WalkFiles calls fn with the path of every file below the directory entries, whose path (with
// a trailing "/", or empty for the root) is prefix. The path buffer is reused: fn must copy it.
func (r Reader) WalkFiles(entries []TreeEntry, prefix []byte, fn func(path []byte)) error {
	return r.repo.store.WalkFiles(entries, prefix, fn)
}
