package gitops

import (
	"bytes"
	"cmp"
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
// cluster that changes every few seconds. So the worker renews it. Once the clone has doubled
// since it was last made, and is past renewFloor, a shallow clone of the newest KeptCommits
// commits of the branch (git's "deepen") is fetched into a directory beside it in the background,
// and swapped in between two pushes, which go on meanwhile. The first clone of a branch is
// shallow the same way. The remote keeps everything.
//
// What is kept, and why:
//   - the tip's tree and files, which every commit builds on, and their previous versions
//     since the boundary, which the deltas of later pushes may use;
//   - the newest KeptCommits commits: write-back walks the commits since its last look at the
//     branch and reads at most that many (gitedits.DefaultMaxCommits), and a pull request's walks
//     read at most headBound.
//
// A commit at the boundary reads as having no parents, as in a shallow git clone: a walk ends
// there, and one that needed more (write-back whose last look is older) sees an unknown revision,
// which it handles as a history rewritten. A file asked for at an older commit (a proposal that
// waited that long) makes the worker fetch the rest of the history first (Reader.Deepen); the
// next renewal drops it again.

// KeptCommits is how many commits of its branch a clone keeps.
const KeptCommits = 10000

// renewFloor: a clone smaller than this is never renewed.
const renewFloor = 256 << 20

// renewal is the state of a worker's renewals of its clone; owned by the Run goroutine.
type renewal struct {
	keep    int   // commits a renewed clone keeps: KeptCommits
	floor   int64 // renewFloor
	at      int64 // the clone's size that starts the next renewal
	running bool
	done    chan error // the background fetch's result
}

func newRenewal(keep int, floor int64) renewal {
	keep, floor = cmp.Or(keep, KeptCommits), cmp.Or(floor, renewFloor)
	return renewal{keep: keep, floor: floor, at: floor, done: make(chan error, 1)}
}

// renewDir is where a renewal fetches the new clone, beside the clone in dir.
func renewDir(dir string) string { return dir + ".renew" }

// maybeRenew starts a renewal in the background when the clone reached its size for one.
func (w *Worker) maybeRenew(ctx context.Context) {
	if w.renew.running {
		return
	}
	size, err := dirSize(w.dir)
	if err != nil {
		w.log.Warn("measure the clone", "err", err)
		return
	}
	if size < w.renew.at {
		return
	}
	w.renew.running = true
	remote := w.remote
	remote.Auth = w.repo.auth // the newest credentials
	keep, dir, log := w.renew.keep, renewDir(w.dir), w.log
	w.log.Info("renewing the clone", "bytes", size, "commits", keep)
	go func() { w.renew.done <- fetchShallow(ctx, dir, remote, keep, log) }()
}

// fetchShallow makes a new clone of remote in dir holding the newest depth commits of its branch
// (and of its head branch, if it has one).
func fetchShallow(ctx context.Context, dir string, remote Remote, depth int, log *slog.Logger) error {
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("renew clone: %w", err)
	}
	rp, err := openRepo(dir, remote, depth, log)
	if err != nil {
		return fmt.Errorf("renew clone: %w", err)
	}
	defer rp.close()
	if _, _, err := rp.fetchRefs(ctx); err != nil {
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

// onRenewed swaps the renewed clone in, then fetches what was pushed while it was made. The
// commits built and not pushed are built again on it. A renewal that failed leaves the clone as
// it is until it doubles again.
func (w *Worker) onRenewed(ctx context.Context, err error) {
	w.renew.running = false
	next := renewDir(w.dir)
	before, _ := dirSize(w.dir)
	if err == nil {
		err = w.swapClone(next)
		w.built = build{} // on a new store, whatever happened
	}
	if err != nil {
		_ = os.RemoveAll(next)
		w.renew.at = max(w.renew.floor, 2*before)
		w.log.Warn("renew the clone; keeping it as it is", "err", err)
		return
	}
	w.fetch(ctx)
	after, _ := dirSize(w.dir)
	w.renew.at = max(w.renew.floor, 2*after)
	w.log.Info("renewed the clone", "before", before, "after", after, "commits", w.renew.keep)
}

// swapClone replaces the clone by the one in next, keeping the connection's state. On an error
// the old clone is open again.
func (w *Worker) swapClone(next string) error {
	old := w.dir + ".old"
	rp := w.repo
	rp.close()
	reopen := func(err error) error {
		if _, statErr := os.Stat(w.dir); statErr != nil {
			_ = os.Rename(old, w.dir)
		}
		if oerr := rp.open(); oerr != nil {
			return errors.Join(err, oerr)
		}
		w.store = rp.newStore()
		return err
	}
	if err := os.RemoveAll(old); err != nil {
		return reopen(fmt.Errorf("swap clone: %w", err))
	}
	if err := os.Rename(w.dir, old); err != nil {
		return reopen(fmt.Errorf("swap clone: %w", err))
	}
	if err := os.Rename(next, w.dir); err != nil {
		return reopen(fmt.Errorf("swap clone: %w", err))
	}
	if err := rp.open(); err != nil {
		_ = os.RemoveAll(w.dir)
		return reopen(fmt.Errorf("open renewed clone: %w", err))
	}
	rp.tail = nil
	w.store = rp.newStore()
	_ = os.RemoveAll(old)
	return nil
}

// stopRenewal waits for a renewal under way (its fetch ends with ctx) and removes what it left.
func (w *Worker) stopRenewal() {
	if w.renew.running {
		if err := <-w.renew.done; err != nil {
			w.log.Debug("renewal stopped with the worker", "err", err)
		}
		w.renew.running = false
	}
	_ = os.RemoveAll(renewDir(w.dir))
}

// removeStale removes what a renewal left behind when the daemon stopped in its middle.
func removeStale(dir string) {
	_ = os.RemoveAll(renewDir(dir))
	_ = os.RemoveAll(dir + ".old")
}

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
func (r *repo) deepen(ctx context.Context) error {
	err := r.remote.FetchContext(ctx, &git.FetchOptions{RemoteName: "origin", RefSpecs: r.remoteConfig().Fetch, Auth: r.auth, Tags: git.NoTags, Depth: wholeHistory})
	if err != nil && !errors.Is(err, git.NoErrAlreadyUpToDate) {
		return fmt.Errorf("deepen %s: %w", r.branch, err)
	}
	// go-git adds the new boundaries and never removes the old ones: keep only the commits
	// whose parents are still missing.
	shallow, err := r.sto.Shallow()
	if err != nil {
		return fmt.Errorf("deepen %s: %w", r.branch, err)
	}
	s := newStore(r.sto)
	shallow = slices.DeleteFunc(shallow, func(h plumbing.Hash) bool {
		raw, err := s.read(plumbing.CommitObject, h)
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
