package gitedits

import (
	"container/heap"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/go-git/go-git/v5/plumbing"
)

// newestFirst visits the commits reachable from tip, newest committer time first, until visit
// says stop. A commit's parents are loaded before it is visited. Past h.max commits it gives up
// with ErrHistoryTooLong.
func (h *history) newestFirst(tip plumbing.Hash, visit func(*commitNode) (stop bool, err error)) error {
	h.nodes = map[plumbing.Hash]*commitNode{}
	if err := h.mark(tip, false); err != nil {
		return err
	}
	for h.queue.Len() > 0 {
		if err := h.ctx.Err(); err != nil {
			return err
		}
		n := heap.Pop(&h.queue).(*commitNode)
		n.queued = false
		if h.read++; h.read > h.max {
			return fmt.Errorf("more than %d commits to read: %w", h.max, ErrHistoryTooLong)
		}
		for _, p := range n.parents {
			if err := h.mark(p, false); err != nil {
				return err
			}
		}
		if stop, err := visit(n); stop || err != nil {
			return err
		}
	}
	return nil
}

// baseline is the newest commit reachable from tip that ours claims, the last one the daemon
// wrote; tip itself when the daemon wrote none among the newest h.max: edits are counted from it.
func baseline(h *history, tip plumbing.Hash, ours func(string) bool) (plumbing.Hash, error) {
	base := tip
	err := h.newestFirst(tip, func(n *commitNode) (bool, error) {
		if ours(n.message) {
			base = n.hash
			return true, nil
		}
		return false, nil
	})
	if errors.Is(err, ErrHistoryTooLong) {
		return tip, nil
	}
	return base, err
}

// whole is Edits of Query.Whole on the worker's goroutine: every file under the folder at tip
// that a person changed last, credited to that commit, among the newest q.MaxCommits, and every
// file q.Since held that the tip lacks (removedSince). A file whose newest commit is the
// daemon's, or to which the mirror holds a change it has not pushed, is the mirror's and is left
// out, unread.
func whole(h *history, tip plumbing.Hash, q Query) ([]Edit, error) {
	root, err := commitTree(h.r, tip)
	if err != nil {
		return nil, fmt.Errorf("whole folder: %w", err)
	}
	folder, err := h.folderTree(root)
	if err != nil {
		return nil, fmt.Errorf("whole folder: %w", err)
	}
	uncredited := map[string]struct{}{}
	if err := diffTrees(h.r, plumbing.ZeroHash, folder, []byte(folderPrefix(q.Folder)), uncredited); err != nil {
		return nil, fmt.Errorf("whole folder: %w", err)
	}
	pending := h.r.Pending()
	requested, err := h.r.Requested()
	if err != nil {
		return nil, fmt.Errorf("whole folder: the files of the pull request: %w", err)
	}
	maps.Copy(pending, requested)
	out := make([]Edit, 0, len(uncredited))
	err = h.newestFirst(tip, func(n *commitNode) (bool, error) {
		paths, err := h.changed(n)
		if err != nil {
			return false, err
		}
		for p := range paths {
			if _, ok := uncredited[p]; !ok {
				continue
			}
			delete(uncredited, p)
			if _, isPending := pending[p]; isPending || q.Ours(n.message) {
				continue
			}
			e := Edit{Path: p, Commit: n.hash.String(), Author: n.author, When: n.when}
			if err := readTip(h.r, root, &e, q.MaxBytes); err != nil {
				return false, fmt.Errorf("read %s at the tip: %w", p, err)
			}
			out = append(out, e)
		}
		return len(uncredited) == 0, nil
	})
	if err != nil && !errors.Is(err, ErrHistoryTooLong) {
		// Past the bound, the files no newer commit changed are left out: they are older than
		// any edit write-back credits.
		return nil, fmt.Errorf("whole folder: %w", err)
	}
	gone, err := removedSince(h, tip, root, folder, q, pending)
	if err != nil {
		return nil, fmt.Errorf("whole folder: %w", err)
	}
	out = append(out, gone...)
	slices.SortFunc(out, func(a, b Edit) int { return strings.Compare(a.Path, b.Path) })
	return out, nil
}

// removedSince returns a deletion for each file under the folder that q.Since held and the tip
// (root, folder) does not, unless the mirror holds a change to it: the files a force-push took
// away, which no commit of the new history deleted, so the walk of whole credits none. Each is
// credited to the tip's commit, as a removal by whoever pushed it. Nothing when the clone does
// not have Since (it never fetched it).
func removedSince(h *history, tip, root, folder plumbing.Hash, q Query, pending map[string]struct{}) ([]Edit, error) {
	since, ok := parseHash(q.Since)
	if !ok || since == tip || !has(h.r, since) {
		return nil, nil
	}
	sinceRoot, err := commitTree(h.r, since)
	if err != nil {
		return nil, err
	}
	sinceFolder, err := h.folderTree(sinceRoot)
	if err != nil {
		return nil, err
	}
	changed := map[string]struct{}{}
	if err := diffTrees(h.r, sinceFolder, folder, []byte(folderPrefix(q.Folder)), changed); err != nil {
		return nil, err
	}
	data, err := h.r.Commit(tip)
	if err != nil {
		return nil, err
	}
	by, err := parseCommit(data)
	if err != nil {
		return nil, fmt.Errorf("commit %s: %w", tip, err)
	}
	var out []Edit
	for p := range changed {
		if _, isPending := pending[p]; isPending {
			continue
		}
		if e, err := lookupFile(h.r, root, p); err != nil || e != nil {
			if err != nil {
				return nil, err
			}
			continue // still there: changed, and credited by the walk if a person did
		}
		out = append(out, Edit{Path: p, Deleted: true, Commit: tip.String(), Author: by.author, When: by.when})
	}
	return out, nil
}
