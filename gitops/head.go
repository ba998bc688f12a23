package gitops

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/go-git/go-git/v5/plumbing"

	"github.com/configbutler/gitops-reverser/gitstore"
)

// headBound bounds the walks of a head branch's own commits and of its target's first parents.
const headBound = 1000

// errHeadNotOurs: the head branch holds a commit the daemon did not write, so it is not the
// daemon's to rebuild or delete.
var errHeadNotOurs = errors.New("the head branch holds commits the daemon did not write")

// commitInfo is what the head branch's handling reads of a commit.
type commitInfo struct {
	hash, tree, parent plumbing.Hash // parent: the first one
	author             Signature
	when               time.Time // author time
	message            string
}

// readCommit reads and parses commit h from the store: the commits built, or the clone.
func readCommit(s *gitstore.Store, h plumbing.Hash) (commitInfo, error) {
	raw, err := s.Commit(h)
	if err != nil {
		return commitInfo{}, err
	}
	parsed, err := gitstore.ParseCommit(raw)
	if err != nil {
		return commitInfo{}, fmt.Errorf("commit %s: %w", h, err)
	}
	c := commitInfo{hash: h, tree: parsed.Tree, message: parsed.Message, when: parsed.Author.When,
		author: Signature{Name: parsed.Author.Name, Email: parsed.Author.Email}}
	if len(parsed.Parents) > 0 && !s.Shallow(h) {
		c.parent = parsed.Parents[0]
	}
	return c, nil
}

// headChain returns the commits of the head branch at head that the target at target lacks,
// oldest first, and the commit of the target they were built on (zero when they share no
// history). The walk follows first parents from head until it meets target, which costs one
// read per commit of the chain; when the target moved, until it meets one of the target's
// first-parent ancestors. Each commit of the chain must be the daemon's (ours).
func (w *Worker) headChain(head, target plumbing.Hash) (chain []commitInfo, onto plumbing.Hash, err error) {
	if chain, onto, err = w.walkHead(head, func(h plumbing.Hash) bool { return h == target }, false); err == nil && onto == target {
		return chain, onto, nil
	}
	marks, err := w.firstParents(target)
	if err != nil {
		return nil, plumbing.ZeroHash, err
	}
	return w.walkHead(head, func(h plumbing.Hash) bool { return marks[h] }, true)
}

// walkHead follows first parents from head until stop says a commit belongs to the target, and
// returns the commits before it, oldest first, and that commit. A commit that is not the
// daemon's ends the walk: with an error when strict, else quietly (the caller walks again).
func (w *Worker) walkHead(head plumbing.Hash, stop func(plumbing.Hash) bool, strict bool) ([]commitInfo, plumbing.Hash, error) {
	var chain []commitInfo
	h := head
	for ; !h.IsZero() && !stop(h); h = chain[len(chain)-1].parent {
		c, err := readCommit(w.store, h)
		if err != nil {
			return nil, plumbing.ZeroHash, fmt.Errorf("read the head branch: %w", err)
		}
		if w.ours != nil && !w.ours(c.message) {
			if !strict {
				return nil, plumbing.ZeroHash, nil
			}
			return nil, plumbing.ZeroHash, fmt.Errorf("%w: %s by %s", errHeadNotOurs, h, c.author.Name)
		}
		if chain = append(chain, c); len(chain) > headBound {
			return nil, plumbing.ZeroHash, fmt.Errorf("the head branch has more than %d commits the target lacks", headBound)
		}
	}
	slices.Reverse(chain)
	return chain, h, nil
}

// firstParents marks the target's first-parent ancestors, itself included, up to headBound.
func (w *Worker) firstParents(target plumbing.Hash) (map[plumbing.Hash]bool, error) {
	marks := map[plumbing.Hash]bool{}
	for h, n := target, 0; !h.IsZero() && n < headBound; n++ {
		marks[h] = true
		c, err := readCommit(w.store, h)
		if err != nil {
			return nil, fmt.Errorf("read the target branch: %w", err)
		}
		h = c.parent
	}
	return marks, nil
}

// replay makes the changes of each commit of chain again on top of onto, oldest first, as
// file-level intents: a file the commit wrote gets the same content, a file it deleted is
// deleted, whatever the new base holds there. A commit whose changes the base already has
// makes none; the others keep their author, author time and message. It returns the new tip.
func (w *Worker) replay(onto plumbing.Hash, chain []commitInfo) (plumbing.Hash, error) {
	tip := onto
	for _, c := range chain {
		var before plumbing.Hash
		if !c.parent.IsZero() {
			var err error
			if before, err = w.store.CommitTree(c.parent); err != nil {
				return plumbing.ZeroHash, err
			}
		}
		var ops []gitstore.Op
		err := w.store.DiffFiles(before, c.tree, "", func(path string, _, now *gitstore.TreeEntry) {
			o := gitstore.Op{Path: path}
			if now != nil {
				o.Blob = now.Hash
			}
			ops = append(ops, o)
		})
		if err != nil {
			return plumbing.ZeroHash, fmt.Errorf("replay %s: %w", c.hash, err)
		}
		base, err := w.store.CommitTree(tip)
		if err != nil {
			return plumbing.ZeroHash, err
		}
		tree, err := w.store.UpdateTree(base, ops)
		if err != nil {
			return plumbing.ZeroHash, fmt.Errorf("replay %s: %w", c.hash, err)
		}
		if tree == base {
			continue
		}
		data := encodeCommit(commitFields{tree: tree, parent: tip, author: c.author, authored: c.when,
			committer: w.identity.Committer, at: time.Now()}, c.message)
		if w.signer != nil {
			if data, err = signCommit(data, w.signer); err != nil {
				return plumbing.ZeroHash, fmt.Errorf("sign commit: %w", err)
			}
		}
		tip = w.store.PutCommit(data)
	}
	return tip, nil
}
