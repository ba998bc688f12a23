package gitstore

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
)

// A clone keeps every object each push adds to it: some KiB a commit, gigabytes a week for a
// cluster that changes every few seconds. So it is renewed when its owner says (package gitops
// does once the clone has doubled): a shallow clone of the newest KeptCommits commits of the
// branch (git's "deepen") is fetched into a directory beside it (Renewal), on another goroutine
// while the clone is in use, and then swapped in (Swap). The first clone of a branch is shallow
// the same way. The remote keeps everything.
//
// What is kept, and why:
//   - the tip's tree and files, which every commit builds on, and their previous versions
//     since the boundary, which the deltas of later pushes may use;
//   - the newest KeptCommits commits: write-back walks the commits since its last look at the
//     branch and reads at most that many (gitedits.DefaultMaxCommits), and a pull request's walks
//     read at most a thousand (gitops' headBound).
//
// A commit at the boundary reads as having no parents, as in a shallow git clone (Shallow): a walk
// ends there, and one that needed more (write-back whose last look is older) sees an unknown
// revision, which it handles as a history rewritten. A file asked for at an older commit (a
// proposal that waited that long) makes the clone fetch the rest of the history first
// (Reader.Deepen); the next renewal drops it again.

// KeptCommits is how many commits of its branch a clone keeps.
const KeptCommits = 10000

// renewDir is where a renewal fetches the new clone, beside the clone in dir.
func renewDir(dir string) string { return dir + ".renew" }

// Renewal returns the making of a renewed clone beside this one, holding the newest keep
// commits (see Open) of the branch and of its head branch, if it has one, fetched with the
// newest credentials. It shares nothing with the Repo, so it runs on another goroutine while the
// clone is in use; Swap then puts it in place, or DropRenewal removes it.
func (r *Repo) Renewal() func(ctx context.Context) error {
	dir, remote, keep, log := renewDir(r.dir), r.remote, r.keep, r.log
	return func(ctx context.Context) error { return fetchShallow(ctx, dir, remote, keep, log) }
}

// fetchShallow makes a new clone of remote in dir holding the newest depth commits of its branch
// (and of its head branch, if it has one).
func fetchShallow(ctx context.Context, dir string, remote Remote, depth int, log *slog.Logger) error {
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("renew clone: %w", err)
	}
	rp, err := Open(dir, remote, depth, log)
	if err != nil {
		return fmt.Errorf("renew clone: %w", err)
	}
	defer rp.Close()
	if _, _, err := rp.FetchRefs(ctx); err != nil {
		return fmt.Errorf("renew clone: %w", err)
	}
	// Compaction leaves the fetched pack alone, as it does the tails: its merge would expand
	// every delta in it, the trees of all the commits kept.
	packs, err := rp.sto.ObjectPacks()
	if err != nil {
		return fmt.Errorf("renew clone: %w", err)
	}
	for _, h := range packs {
		if err := os.WriteFile(packPath(rp.packDir(), h, ".keep"), nil, 0o444); err != nil {
			return fmt.Errorf("renew clone: %w", err)
		}
	}
	return nil
}

// Swap replaces the clone by the renewed one that Renewal made; the Store is then one of the
// renewed clone, empty. On an error the old clone is open again (with a new Store of it, unless
// it could not be opened either).
func (r *Repo) Swap() error {
	next, old := renewDir(r.dir), r.dir+".old"
	r.Close()
	reopen := func(err error) error {
		if _, statErr := os.Stat(r.dir); statErr != nil {
			_ = os.Rename(old, r.dir)
		}
		if oerr := r.open(); oerr != nil {
			return errors.Join(err, oerr)
		}
		return err
	}
	if err := os.RemoveAll(old); err != nil {
		return reopen(fmt.Errorf("swap clone: %w", err))
	}
	if err := os.Rename(r.dir, old); err != nil {
		return reopen(fmt.Errorf("swap clone: %w", err))
	}
	if err := os.Rename(next, r.dir); err != nil {
		return reopen(fmt.Errorf("swap clone: %w", err))
	}
	if err := r.open(); err != nil {
		_ = os.RemoveAll(r.dir)
		return reopen(fmt.Errorf("open renewed clone: %w", err))
	}
	r.tail = nil
	_ = os.RemoveAll(old)
	return nil
}

// DropRenewal removes what a renewal left beside the clone: one that failed, or that stopped
// with the clone's owner.
func (r *Repo) DropRenewal() { _ = os.RemoveAll(renewDir(r.dir)) }

// removeStale removes what a renewal left behind when the daemon stopped in its middle.
func removeStale(dir string) {
	_ = os.RemoveAll(renewDir(dir))
	_ = os.RemoveAll(dir + ".old")
}

// Size is the bytes of the clone's files.
func (r *Repo) Size() (int64, error) { return dirSize(r.dir) }

// dirSize is the bytes of the files under dir.
func dirSize(dir string) (int64, error) {
	var n int64
	err := filepath.WalkDir(dir, func(_ string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		info, err := d.Info()
		if err == nil {
			n += info.Size()
		}
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("size of %s: %w", dir, err)
	}
	return n, nil
}

// deepen fetches the history of the branch a shallow clone lacks (Reader.Deepen asks only of
// one), and records that it has all of it now.
func (r *Repo) deepen(ctx context.Context) error {
	err := r.origin.FetchContext(ctx, &git.FetchOptions{RemoteName: "origin", RefSpecs: r.remoteConfig().Fetch, Auth: r.remote.Auth, Tags: git.NoTags, Depth: wholeHistory})
	if err != nil && !errors.Is(err, git.NoErrAlreadyUpToDate) {
		return fmt.Errorf("deepen %s: %w", r.branch, err)
	}
	// go-git adds the new boundaries and never removes the old ones: keep only the commits
	// whose parents are still missing.
	shallow, err := r.sto.Shallow()
	if err != nil {
		return fmt.Errorf("deepen %s: %w", r.branch, err)
	}
	shallow = slices.DeleteFunc(shallow, func(h plumbing.Hash) bool {
		raw, err := readObject(r.sto, plumbing.CommitObject, h)
		if err != nil {
			return false
		}
		for _, p := range commitParents(raw) {
			if _, err := r.sto.EncodedObjectSize(p); err != nil {
				return false
			}
		}
		return true
	})
	if err := r.sto.SetShallow(shallow); err != nil {
		return fmt.Errorf("deepen %s: %w", r.branch, err)
	}
	return nil
}

// wholeHistory is a depth no branch reaches.
const wholeHistory = 1 << 30

// commitParents reads the parents of a commit from its encoding.
func commitParents(raw []byte) []plumbing.Hash {
	var out []plumbing.Hash
	header, _, _ := bytes.Cut(raw, []byte("\n\n"))
	for line := range bytes.SplitSeq(header, []byte("\n")) {
		if v, ok := bytes.CutPrefix(line, []byte("parent ")); ok {
			var h plumbing.Hash
			if _, err := hex.Decode(h[:], v); err == nil {
				out = append(out, h)
			}
		}
	}
	return out
}
