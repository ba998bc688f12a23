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
			continue
		}
		runs = append(runs, run{author: author, trailers: trailers, items: []item{it}})
	}
	*b = batch{}
	return runs
}

// pendingSize counts the changes and content bytes of runs.
func pendingSize(runs []run) (items int, bytes int64) {
	for _, r := range runs {
		items += len(r.items)
		for _, it := range r.items {
			bytes += int64(len(it.change.Content))
		}
	}
	return items, bytes
}

// coalesce merges runs into one run by the bot, without trailers, with the latest content per
// path, keeping the memory of a long outage bounded. Syncs are kept and go first; a later
// change to a path overrides them, and a change a sync orphaned becomes a delete, so the result
// is the same tree as replaying every run in order. A release marker keeps its place among the changes of
// its path: the latest change before it, then the marker, then the latest change after it.
func coalesce(runs []run, bot Signature) []run {
	var syncs []item
	index := map[string]int{}
	var changes []item
	for _, r := range runs {
		for _, it := range r.items {
			if it.release != nil {
				it.change.Author, it.change.Trailers, it.at = Signature{}, nil, time.Time{}
				delete(index, it.change.Path)
				changes = append(changes, it)
				continue
			}
			if it.sync != nil {
				for i := range changes {
					if changes[i].release == nil && changes[i].change.Content != nil && orphaned(changes[i].change.Path, it.sync) {
						changes[i].change = Change{Path: changes[i].change.Path,
							Summary: "delete orphan " + changes[i].change.Path}
					}
				}
				syncs = append(syncs, it)
				continue
			}
			c := it.change
			c.Author, c.Trailers = Signature{}, nil
			if i, ok := index[c.Path]; ok {
				changes[i].change = c
				continue
			}
			index[c.Path] = len(changes)
			changes = append(changes, item{change: c})
		}
	}
	return []run{{author: bot, items: append(syncs, changes...)}}
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
