package gitedits

import (
	"container/heap"
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/go-git/go-git/v5/plumbing"

	"github.com/configbutler/gitops-reverser/gitops"
	"github.com/configbutler/gitops-reverser/gitstore"
)

// history walks the commits between two revisions of a clone and diffs their trees.
type history struct {
	r      gitops.Reader
	ctx    context.Context
	max    int    // commits read before giving up
	folder string // only paths below it count ("" = all)

	nodes map[plumbing.Hash]*commitNode
	queue commitQueue
	live  int // queued nodes that are not excluded: the walk ends when none is left
	read  int // commits popped
	seq   int
}

// commitNode is one commit met by the walk.
type commitNode struct {
	hash      plumbing.Hash
	tree      plumbing.Hash
	parents   []plumbing.Hash
	author    gitops.Signature
	when      time.Time // author time
	committed int64     // committer time (Unix), the walk's order
	message   string
	seq       int  // order of discovery, to break ties
	reached   bool // reachable from the tip
	excluded  bool // reachable from since
	queued    bool
	index     int // in the queue
}

// edits walks the commits reachable from tip and not from since, newest first, and returns the
// paths under the folder that the ones ours rejects changed, each with its newest such commit.
// ErrUnknownRevision when since is not an ancestor of tip.
func (h *history) edits(tip, since plumbing.Hash, ours func(string) bool) (map[string]Edit, error) {
	h.nodes = map[plumbing.Hash]*commitNode{}
	if err := h.mark(since, true); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrUnknownRevision, err)
	}
	if err := h.mark(tip, false); err != nil {
		return nil, err
	}
	var order []*commitNode // popped from the tip's side, newest first
	sinceReached := false
	for h.live > 0 {
		if err := h.ctx.Err(); err != nil {
			return nil, err
		}
		n := heap.Pop(&h.queue).(*commitNode)
		n.queued = false
		if !n.excluded {
			h.live--
		}
		if !n.excluded {
			order = append(order, n)
		}
		// The bound counts the commits between since and the tip; the ones below since that the
		// walk reads as well (when committer times are equal or out of order) may be as many.
		if h.read++; len(order) > h.max || h.read > 2*h.max {
			return nil, fmt.Errorf("more than %d commits to read: %w", h.max, ErrHistoryTooLong)
		}
		for _, p := range n.parents {
			sinceReached = sinceReached || (!n.excluded && p == since)
			if err := h.mark(p, n.excluded); err != nil {
				return nil, err
			}
		}
	}
	if !sinceReached {
		return nil, fmt.Errorf("%s is not an ancestor of %s: %w", since, tip, ErrUnknownRevision)
	}
	out := map[string]Edit{}
	for _, n := range order {
		if n.excluded || ours(n.message) { // excluded: found below since after it was popped
			continue
		}
		paths, err := h.changed(n)
		if err != nil {
			return nil, err
		}
		for p := range paths {
			if _, newer := out[p]; !newer {
				out[p] = Edit{Commit: n.hash.String(), Author: n.author, When: n.when}
			}
		}
	}
	return out, nil
}

// mark records that commit hash is reachable from the tip, or from since when excluded, and
// queues it when that is news. An excluded commit passes the exclusion on to its parents when
// popped, even if it was popped before as reachable from the tip.
func (h *history) mark(hash plumbing.Hash, excluded bool) error {
	n := h.nodes[hash]
	if n == nil {
		var err error
		if n, err = h.load(hash); err != nil {
			return err
		}
		h.nodes[hash] = n
	}
	switch {
	case excluded && n.excluded, !excluded && (n.reached || n.excluded):
		return nil
	case excluded:
		n.excluded = true
		if n.queued {
			h.live--
			return nil
		}
	default:
		n.reached = true
		h.live++
	}
	n.queued = true
	heap.Push(&h.queue, n)
	return nil
}

// load reads and parses a commit.
func (h *history) load(hash plumbing.Hash) (*commitNode, error) {
	data, err := h.r.Commit(hash)
	if err != nil {
		return nil, err
	}
	n, err := parseCommit(data)
	if err != nil {
		return nil, fmt.Errorf("commit %s: %w", hash, err)
	}
	if h.r.Shallow(hash) { // the clone keeps no older history: the walk ends here
		n.parents = nil
	}
	n.hash = hash
	h.seq++
	n.seq = h.seq
	return n, nil
}

// changed lists the paths under the folder that commit n changed: against its first parent (the
// empty tree for a root commit), and for a merge only those that differ from every parent.
func (h *history) changed(n *commitNode) (map[string]struct{}, error) {
	mine, err := h.folderTree(n.tree)
	if err != nil {
		return nil, err
	}
	var out map[string]struct{}
	for i, p := range n.parents {
		theirs, err := h.folderTree(h.nodes[p].tree)
		if err != nil {
			return nil, err
		}
		diff := map[string]struct{}{}
		if err := diffTrees(h.r, theirs, mine, []byte(folderPrefix(h.folder)), diff); err != nil {
			return nil, err
		}
		if i == 0 {
			out = diff
			continue
		}
		for p := range out {
			if _, ok := diff[p]; !ok {
				delete(out, p)
			}
		}
	}
	if len(n.parents) == 0 {
		out = map[string]struct{}{}
		err = diffTrees(h.r, plumbing.ZeroHash, mine, []byte(folderPrefix(h.folder)), out)
	}
	return out, err
}

// folderTree is the tree of the folder below root, zero when there is none.
func (h *history) folderTree(root plumbing.Hash) (plumbing.Hash, error) {
	dir := h.folder
	for dir != "" && !root.IsZero() {
		entries, err := h.r.Tree(root)
		if err != nil {
			return plumbing.ZeroHash, err
		}
		name, rest, _ := strings.Cut(dir, "/")
		e := gitstore.FindDir(entries, name)
		if e == nil {
			return plumbing.ZeroHash, nil
		}
		root, dir = e.Hash, rest
	}
	return root, nil
}

func folderPrefix(folder string) string {
	if folder == "" {
		return ""
	}
	return folder + "/"
}

// diffTrees adds to out the path (below prefix) of every file that differs between the trees a
// and b (zero: empty): added, removed or changed. Subtrees with the same hash are skipped
// unread.
func diffTrees(r gitops.Reader, a, b plumbing.Hash, prefix []byte, out map[string]struct{}) error {
	return r.Diff(a, b, string(prefix), func(path string) { out[path] = struct{}{} })
}

// parseCommit reads the tree, parents, author, committer time and message of a commit as git
// reads them; a committer line without a date orders the commit as git does, as of time 0.
func parseCommit(data []byte) (*commitNode, error) {
	c, err := gitstore.ParseCommit(data)
	if err != nil {
		return nil, err
	}
	n := &commitNode{tree: c.Tree, parents: c.Parents, author: signatureOf(c.Author), when: c.Author.When, message: c.Message}
	if !c.Committer.When.IsZero() {
		n.committed = c.Committer.When.Unix()
	}
	return n, nil
}

// commitQueue is a priority queue of commits, newest committer time first.
type commitQueue []*commitNode

func (q commitQueue) Len() int { return len(q) }
func (q commitQueue) Less(i, j int) bool {
	if q[i].committed != q[j].committed {
		return q[i].committed > q[j].committed
	}
	return q[i].seq < q[j].seq
}
func (q commitQueue) Swap(i, j int) {
	q[i], q[j] = q[j], q[i]
	q[i].index, q[j].index = i, j
}
func (q *commitQueue) Push(x any) {
	n := x.(*commitNode)
	n.index = len(*q)
	*q = append(*q, n)
}
func (q *commitQueue) Pop() any {
	old := *q
	n := old[len(old)-1]
	old[len(old)-1] = nil
	*q = old[:len(old)-1]
	return n
}
