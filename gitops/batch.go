package gitops

import (
	"slices"
	"strings"
	"time"
)

// Bounds of the intents kept while the remote does not accept them; past them the pending runs
// are merged into one (see coalesce).
const (
	maxPendingItems = 1000
	maxPendingBytes = 64 << 20
)

// pendingBound is a number of pending intents and bytes of their content.
type pendingBound struct {
	items int
	bytes int64
}

// batch collects intents until one of the limits says it is time to commit.
type batch struct {
	items             []item
	files             int
	bytes             int64
	first, quietUntil time.Time
}

// add appends an intent that arrived at; the batch may be committed once quietUntil passes
// without a new one.
func (b *batch) add(it item, at, quietUntil time.Time) {
	if len(b.items) == 0 {
		b.first = at
	}
	b.quietUntil = quietUntil
	b.items = append(b.items, it)
	if it.sync == nil {
		b.files++
		b.bytes += int64(len(it.change.Content))
	}
}

func (b *batch) empty() bool { return len(b.items) == 0 }

// full reports whether the batch reached its size limits.
func (b *batch) full(l BatchLimits) bool { return b.files >= l.MaxFiles || b.bytes >= l.MaxBytes }

// deadline is when the batch must be committed even without new changes: after its quiet
// period, and never later than MaxWait after its first change.
func (b *batch) deadline(l BatchLimits) time.Time {
	if latest := b.first.Add(l.MaxWait); latest.Before(b.quietUntil) {
		return latest
	}
	return b.quietUntil
}

// take empties the batch and splits it into runs of contiguous items by the same author with
// the same trailers, in order. Syncs belong to the bot and have no trailers. A release marker is
// a run of its own: its commit is credited once it is known what it commits.
func (b *batch) take(bot Signature) []run {
	var runs []run
	for _, it := range b.items {
		author, trailers := bot, [][2]string(nil)
		if it.sync == nil && it.release == nil {
			author, trailers = it.change.credited(bot), it.change.Trailers
		}
		if n := len(runs); n > 0 && it.release == nil && runs[n-1].items[0].release == nil &&
			runs[n-1].author == author && slices.Equal(runs[n-1].trailers, trailers) {
			runs[n-1].items = append(runs[n-1].items, it)
			runs[n-1].bytes += int64(len(it.change.Content))
			continue
		}
		runs = append(runs, run{author: author, trailers: trailers, items: []item{it}, bytes: int64(len(it.change.Content))})
	}
	*b = batch{}
	return runs
}

// joinBotRuns joins each run by the bot without trailers to the one before it when that one is
// by the bot without trailers too: batches that wait together for a push, all by the bot (a
// seed, a resync), become one commit instead of one per batch. A release marker's run is never
// joined: its commit is credited once it is known what it commits.
func joinBotRuns(runs []run, bot Signature) []run {
	botRun := func(r run) bool { return r.author == bot && len(r.trailers) == 0 && r.items[0].release == nil }
	var out []run
	for _, r := range runs {
		if n := len(out); n > 0 && botRun(out[n-1]) && botRun(r) {
			out[n-1] = run{author: bot, items: slices.Concat(out[n-1].items, r.items), bytes: out[n-1].bytes + r.bytes}
			continue
		}
		out = append(out, r)
	}
	return out
}

// pendingSize counts the changes and content bytes of runs. It reads each run's totals, not its
// items: the worker asks at every batch, and a seed that outruns the remote has many pending.
func pendingSize(runs []run) (items int, bytes int64) {
	for _, r := range runs {
		items += len(r.items)
		bytes += r.bytes
	}
	return items, bytes
}

// coalesce merges runs into one run by the bot, without trailers, with the latest content per
// path, keeping the memory of a long outage bounded. Syncs are kept and go first; a later
// change to a path overrides them, and a change a sync orphaned becomes a delete, so the result
// is the same tree as replaying every run in order. A release marker keeps its place among the changes of
// its path: the latest change before it, then the marker, then the latest change after it.
//
// Past the bound every new batch is coalesced with the pending runs again, so a run coalesce
// returned keeps what it merged: when runs start with it, only the runs after it are merged in,
// and a seed that outruns the remote costs each change once instead of once per batch.
func coalesce(runs []run, bot Signature) []run {
	m := &merged{index: map[string]int{}}
	if len(runs) > 0 && runs[0].merged != nil {
		m, runs = runs[0].merged, runs[1:]
	}
	for _, r := range runs {
		for _, it := range r.items {
			m.add(it)
		}
	}
	items := make([]item, 0, len(m.syncs)+len(m.changes))
	items = append(append(items, m.syncs...), m.changes...)
	var bytes int64
	for _, it := range m.changes {
		bytes += int64(len(it.change.Content))
	}
	return []run{{author: bot, items: items, bytes: bytes, merged: m}}
}

// merged is what coalesce made of the items it merged so far.
type merged struct {
	syncs, changes []item
	index          map[string]int // path → its latest change in changes, since the last marker
}

// add merges one more item in.
func (m *merged) add(it item) {
	switch {
	case it.release != nil:
		it.change.Author, it.change.Trailers, it.at = Signature{}, nil, time.Time{}
		delete(m.index, it.change.Path)
		m.changes = append(m.changes, it)
	case it.sync != nil:
		for i := range m.changes {
			if c := &m.changes[i]; c.release == nil && c.change.Content != nil && orphaned(c.change.Path, it.sync) {
				c.change = Change{Path: c.change.Path, Summary: "delete orphan " + c.change.Path}
			}
		}
		m.syncs = append(m.syncs, it)
	default:
		c := it.change
		c.Author, c.Trailers = Signature{}, nil
		if i, ok := m.index[c.Path]; ok {
			m.changes[i].change = c
			return
		}
		m.index[c.Path] = len(m.changes)
		m.changes = append(m.changes, item{change: c})
	}
}

// creditsAt reports whether coalescing runs would lose a credit: some change is by someone
// other than the bot, or carries trailers. A seed, all by the bot, merges without losing anything,
// so a large one is no sign of a remote that is not keeping up.
func creditsAt(runs []run, bot Signature) bool {
	for _, r := range runs {
		for _, it := range r.items {
			if it.sync != nil || it.release != nil {
				continue
			}
			if it.change.credited(bot) != bot || len(it.change.Trailers) > 0 {
				return true
			}
		}
	}
	return false
}

// ValidPath accepts clean, relative, slash-separated paths that stay out of .git.
func ValidPath(p string) bool {
	if p == "" || strings.HasPrefix(p, "/") || strings.HasSuffix(p, "/") {
		return false
	}
	for _, part := range strings.Split(p, "/") {
		if part == "" || part == "." || part == ".." || part == ".git" {
			return false
		}
	}
	return true
}
