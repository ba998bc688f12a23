package writeback

import (
	"slices"
	"strings"
	"time"

	"github.com/configbutler/gitops-reverser/crds"
	"github.com/configbutler/gitops-reverser/gitedits"
)

// idleRunSpacing is the least time between two recorded runs of a destination that found no
// edit: a mirror that pushes every few minutes would otherwise leave tens of thousands of empty
// SyncRuns per destination within their retention.
const idleRunSpacing = time.Hour

// considered says whether write-back reads a file of the destination's folder: the mirror writes
// only .yaml files.
func considered(path string) bool { return strings.HasSuffix(path, ".yaml") }

// edited says whether people changed a file write-back reads.
func edited(edits []gitedits.Edit) bool {
	return slices.ContainsFunc(edits, func(e gitedits.Edit) bool { return considered(e.Path) })
}

// recordIdle says whether a run of the destination ("namespace/name") that found no edit is
// recorded as a SyncRun: always when a person asked for it (sync-now), else when none was recorded
// for idleRunSpacing.
func (c *Controller) recordIdle(key string, t trigger) bool {
	if t.kind == crds.TriggerSyncNow {
		return true
	}
	now := c.clock()
	c.mu.Lock()
	defer c.mu.Unlock()
	if last, ok := c.idle[key]; ok && now.Sub(last) < idleRunSpacing {
		return false
	}
	c.idle[key] = now
	return true
}
