package writeback

import (
	"context"
	"fmt"
	"slices"

	"github.com/configbutler/gitops-reverser/gitedits"
	"github.com/configbutler/gitops-reverser/placement"
)

// maxOverlayRounds bounds the visits to the Git worker that reading one overlay's files takes:
// each round reads one more level of its kustomizations (an overlay, its bases, their
// components…), so a graph deeper than this is not a kustomization anyone keeps.
const maxOverlayRounds = 32

// overlayFiles is every file the kustomization in dir reaches at commit (placement.FilesOf),
// read through the branch's worker: empty when commit has no kustomization in dir. The error
// wraps gitedits.ErrUnknownRevision when the clone has no such commit.
//
// FilesOf asks for files one at a time, while the worker is best visited once per batch of
// paths (gitedits.Branch.Files). So FilesOf runs over what was read so far, and the paths it
// asked for and did not get are read in one visit before it runs again; it is done when it asks
// for nothing new. Each round reaches one level deeper into the kustomization graph.
func (c *Controller) overlayFiles(ctx context.Context, d *dest, commit, dir string) (map[string][]byte, error) {
	git := gitedits.Branch{Git: c.cfg.Git, URL: d.url, Name: d.branch}
	t := &roundTree{read: map[string][]byte{}, absent: map[string]bool{}}
	for range maxOverlayRounds {
		t.missed = t.missed[:0]
		found := placement.FilesOf(t, dir)
		if len(t.missed) == 0 {
			return found, nil
		}
		asked := slices.Clone(t.missed)
		got, err := git.Files(ctx, commit, asked)
		if err != nil {
			return nil, fmt.Errorf("read the files of the kustomization in %s at %s: %w", dir, short(commit), err)
		}
		for _, p := range asked {
			if data, ok := got[p]; ok {
				t.read[p] = data
			} else {
				t.absent[p] = true
			}
		}
	}
	return nil, fmt.Errorf("read the files of the kustomization in %s at %s: more than %d levels of kustomizations", dir, short(commit), maxOverlayRounds)
}

// roundTree is a placement.Tree of the files read so far of one commit; it notes the paths
// asked for that are not read yet (missed), to be read before the next round.
type roundTree struct {
	read   map[string][]byte // files read, by repository path
	absent map[string]bool   // paths read and found to be no file (or one too large)
	missed []string          // paths asked for this round that are neither
}

// File is the file at p when read; a path not read yet is noted and, for now, no file.
func (t *roundTree) File(p string) ([]byte, bool) {
	if data, ok := t.read[p]; ok {
		return data, true
	}
	if !t.absent[p] && !slices.Contains(t.missed, p) {
		t.missed = append(t.missed, p)
	}
	return nil, false
}

// IsDir is true for every path: FilesOf asks it only of a path that is no file, to look for a
// kustomization in it, and in a path that is no folder it finds none, which is what it does with
// a path that is not a folder. So no folder needs listing.
func (t *roundTree) IsDir(string) bool { return true }
