package gitops

import (
	"bytes"
	"sync"
	"sync/atomic"
)

// Hold keeps the mirror off one file of a branch while a person's edit of it waits for review:
// from now on, the mirror's writes and deletes of path (changes and orphan deletes of a Sync) are
// not committed; the latest one is remembered instead. Holds live in the pool, whether or not
// the branch's worker runs: a hold set before the worker starts applies to its first batch, and
// a push that was rejected and is replayed on a new tip honours the holds of that moment. Hold
// on a path whose Release is still queued cancels that Release: the hold goes on, with what it
// remembered.
func (p *Pool) Hold(url, branch, path string) {
	p.holds.forKey(url, branch).hold(path)
}

// Release ends the hold. The latest remembered change is then committed; when none was
// remembered, restore is (nil restore: nothing). Both are queued like any change (never blocks):
// the hold ends in the worker, at this point of the queue, so a mirror change enqueued before
// Release is still held and remembered, and one enqueued after it is committed as usual. A path
// that is not held only gets restore.
//
// When no worker runs for the branch, the hold is dropped and the restore is lost: the worker's
// next seed rewrites the file from the live object.
func (p *Pool) Release(url, branch, path string, restore *Change) {
	kh := p.holds.forKey(url, branch)
	w := p.worker(url, branch)
	if w == nil || !ValidPath(path) {
		kh.drop(path, nil)
		return
	}
	it, ok := kh.releaseItem(path, restore)
	if !ok {
		return
	}
	if err := w.put(it); err != nil && it.release != nil { // the worker stopped meanwhile
		kh.drop(path, it.release.hold)
	}
}

// Held reports whether path is held and whether a mirror change arrived while it was. A path
// whose Release is queued is no longer held.
func (p *Pool) Held(url, branch, path string) (held, changed bool) {
	kh := p.holds.lookup(url, branch)
	if kh == nil {
		return false, false
	}
	kh.mu.Lock()
	defer kh.mu.Unlock()
	h := kh.paths[path]
	if h == nil {
		return false, false
	}
	return !h.releasing, h.changed
}

// holdTable holds the holds of every branch, by WorkerKey; a branch's entry, once made, lives as
// long as the pool, so a worker and the pool's callers share it.
type holdTable struct {
	mu     sync.Mutex
	byKey  map[string]*keyHolds
	onHeld func(url, branch, path string)
}

func newHoldTable() *holdTable {
	return &holdTable{byKey: map[string]*keyHolds{}, onHeld: func(string, string, string) {}}
}

// OnHeldChange sets who is told, without blocking (it is called from the worker's goroutine),
// that the mirror change remembered for a held path (see Hold) differs from the one remembered
// before it. The owner of the holds is built after the pool, so it is connected here, before
// anything is held and before Run.
func (p *Pool) OnHeldChange(f func(url, branch, path string)) {
	p.holds.mu.Lock()
	defer p.holds.mu.Unlock()
	p.holds.onHeld = f
}

// forKey returns the holds of a branch, creating them when needed.
func (t *holdTable) forKey(url, branch string) *keyHolds {
	k := WorkerKey(url, branch)
	t.mu.Lock()
	defer t.mu.Unlock()
	kh := t.byKey[k]
	if kh == nil {
		kh = &keyHolds{url: url, branch: branch, onHeld: t.onHeld, paths: map[string]*hold{}}
		t.byKey[k] = kh
	}
	return kh
}

// lookup returns the holds of a branch, nil when there never were any.
func (t *holdTable) lookup(url, branch string) *keyHolds {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.byKey[WorkerKey(url, branch)]
}

// keyHolds are the held paths of one branch. The worker reads n without the lock, so a branch
// without holds costs its batches one atomic load.
type keyHolds struct {
	url, branch string
	onHeld      func(url, branch, path string)
	n           atomic.Int64 // len(paths)

	mu    sync.Mutex
	paths map[string]*hold
}

// hold is the state of one held path.
type hold struct {
	changed   bool    // a mirror change was remembered since Hold
	latest    *Change // the latest remembered change; nil when none
	releasing bool    // Release queued a marker of generation gen
	gen       uint64
}

// releaseMark is the queued end of a hold. The first time the worker resolves it, it ends the
// hold and records what it committed, so a replay commits the same.
type releaseMark struct {
	hold     *hold
	gen      uint64
	restore  bool // the item's change is the restore
	resolved bool
	out      *Change // what the release commits; nil: nothing
}

// releaseItem marks the hold of path as releasing and returns the marker that ends it in the
// queue, or, when path is not held, the restore as a plain change; false when there is nothing
// to queue.
func (kh *keyHolds) releaseItem(path string, restore *Change) (item, bool) {
	it := item{change: Change{Path: path}}
	if restore != nil {
		it.change = *restore
		it.change.Path = path
	}
	kh.mu.Lock()
	defer kh.mu.Unlock()
	h := kh.paths[path]
	if h == nil {
		return it, restore != nil
	}
	h.gen++
	h.releasing = true
	it.release = &releaseMark{hold: h, gen: h.gen, restore: restore != nil}
	return it, true
}

// drop ends the hold of path at once: any hold when only is nil, else only that one.
func (kh *keyHolds) drop(path string, only *hold) {
	kh.mu.Lock()
	defer kh.mu.Unlock()
	if h := kh.paths[path]; h != nil && (only == nil || h == only) {
		delete(kh.paths, path)
		kh.n.Add(-1)
	}
}

// hold holds path; a hold whose release is queued goes on instead.
func (kh *keyHolds) hold(path string) {
	kh.mu.Lock()
	defer kh.mu.Unlock()
	if h := kh.paths[path]; h != nil {
		h.releasing = false
		return
	}
	kh.paths[path] = &hold{}
	kh.n.Add(1)
}

// active reports whether the branch has any hold: the hot path's one check. kh may be nil.
func (kh *keyHolds) active() bool { return kh != nil && kh.n.Load() > 0 }

// remember keeps c instead of committing it when its path is held; false when it is not. The
// owner is told when the remembered change differs from the one before.
func (kh *keyHolds) remember(c *Change) bool {
	kh.mu.Lock()
	h := kh.paths[c.Path]
	if h == nil {
		kh.mu.Unlock()
		return false
	}
	differs := h.latest == nil || !sameContent(h.latest, c)
	kept := *c
	h.latest, h.changed = &kept, true
	kh.mu.Unlock()
	if differs {
		kh.onHeld(kh.url, kh.branch, c.Path)
	}
	return true
}

// orphanRemembered turns the remembered writes that a Sync declares orphans into deletes.
func (kh *keyHolds) orphanRemembered(s *Sync) {
	var told []string
	kh.mu.Lock()
	for p, h := range kh.paths {
		if h.latest != nil && h.latest.Content != nil && orphaned(p, s) {
			h.latest = &Change{Path: p, Summary: "delete orphan " + p}
			told = append(told, p)
		}
	}
	kh.mu.Unlock()
	for _, p := range told {
		kh.onHeld(kh.url, kh.branch, p)
	}
}

// release resolves a release marker for it.change.Path: the first time, it ends the hold (unless
// Hold took it back, or a later Release replaced the marker) and picks the latest remembered
// change, else the restore. It returns what to commit, nil for nothing.
func (kh *keyHolds) release(it *item) *Change {
	m := it.release
	if m.resolved {
		return m.out
	}
	m.resolved = true
	path := it.change.Path
	if kh == nil {
		return nil
	}
	kh.mu.Lock()
	defer kh.mu.Unlock()
	h := m.hold
	if kh.paths[path] != h || !h.releasing || h.gen != m.gen {
		return nil
	}
	delete(kh.paths, path)
	kh.n.Add(-1)
	switch {
	case h.latest != nil:
		m.out = h.latest
	case m.restore:
		c := it.change
		m.out = &c
	}
	return m.out
}

// sameContent reports whether two changes leave the file the same.
func sameContent(a, b *Change) bool {
	return (a.Content == nil) == (b.Content == nil) && bytes.Equal(a.Content, b.Content)
}
