package writeback

import (
	"slices"
	"strings"
	"time"

	"github.com/configbutler/gitops-reverser/crds"
	"github.com/configbutler/gitops-reverser/gitedits"
	"github.com/configbutler/gitops-reverser/placement"
)

// idleRunSpacing is the least time between two recorded runs of a destination that found no
// edit: a mirror that pushes every few minutes would otherwise leave tens of thousands of empty
// SyncRuns per destination within their retention.
const idleRunSpacing = time.Hour

// considered says whether write-back reads a file of the destination's folder: in a canonical
// folder the mirror writes only .yaml files; an adopted one holds objects in .yaml and .yml
// files, kustomizations aside.
func considered(d *dest, path string) bool {
	if d.obj.Adopted() {
		return placement.ManifestFile(path)
	}
	return strings.HasSuffix(path, ".yaml")
}

// edited says whether people changed a file write-back reads. In an adopted folder that may be
// any file: the destination's overlay reads its kustomizations, patches and generators' files,
// whatever their names (evaluateOverlay tells which).
func edited(d *dest, edits []gitedits.Edit) bool {
	return d.obj.Adopted() && len(edits) > 0 || slices.ContainsFunc(edits, func(e gitedits.Edit) bool { return considered(d, e.Path) })
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
