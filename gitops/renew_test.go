package gitops

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/go-git/go-git/v5/plumbing"

	"github.com/configbutler/gitops-reverser/testenv"
)

// renewed waits until the worker's clone was renewed: it is shallow, and nothing of the renewal
// (the renewed clone, or the old one while they are swapped) is left beside it.
func renewed(t *testing.T, w *testWorker) {
	t.Helper()
	testenv.Eventually(t, 30*time.Second, "the clone to be renewed", func() (bool, string) {
		_, shallowErr := os.Stat(filepath.Join(w.dir, "shallow"))
		beside, globErr := filepath.Glob(w.dir + ".*")
		return shallowErr == nil && globErr == nil && len(beside) == 0, fmt.Sprintf("shallow: %v, beside the clone: %v %v", shallowErr, beside, globErr)
	})
}

// TestABoundaryCommitReadsAsARoot: in a renewed clone the oldest commit kept has no parents for
// the walks, as in a shallow git clone, so a walk ends there instead of failing on a parent the
// clone does not have.
func TestABoundaryCommitReadsAsARoot(t *testing.T) {
	srv := MustGitServer(t)
	w := StartWorker(t, MustRepo(t, srv, "boundary"), "", BatchLimits{}, func(c *WorkerConfig) { c.KeepCommits, c.RenewFloor = 2, 1 })
	for i := range 6 {
		MustEnqueue(t, w, Change{Path: cmPath("app"), Content: configMap("app", strconv.Itoa(i), 500)})
		MustFlush(t, w)
	}
	renewed(t, w)
	// The renewed clone is swapped in between pushes, after its files are in place: then the walk
	// of the branch's first parents ends at its boundary.
	var boundary plumbing.Hash
	testenv.Eventually(t, 30*time.Second, "the renewed clone in use", func() (bool, string) {
		inUse := false
		err := w.Read(t.Context(), func(r Reader) error {
			var err error
			boundary, err = walkFirstParents(w)
			inUse = r.Shallow(boundary)
			return err
		})
		return err == nil && inUse, fmt.Sprintf("the walk ended at %s (a boundary: %v), %v", boundary, inUse, err)
	})
	err := w.Read(t.Context(), func(r Reader) error {
		if !r.Shallow(boundary) {
			return fmt.Errorf("Shallow(%s) is false for a boundary commit", boundary)
		}
		c, err := readCommit(w.store, boundary)
		if err != nil {
			return err
		}
		if !c.parent.IsZero() {
			return fmt.Errorf("the boundary commit %s reads with parent %s", boundary, c.parent)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// walkFirstParents follows the first parents of the worker's branch from its tip, as the walks
// of a head branch do, and returns the commit where it ends. It runs on the worker's goroutine.
func walkFirstParents(w *testWorker) (plumbing.Hash, error) {
	h, err := w.repo.Tip()
	var c commitInfo
	for ; err == nil && !h.IsZero(); h = c.parent {
		c, err = readCommit(w.store, h)
	}
	return c.hash, err
}

// TestAPullRequestsCloneIsRenewedToo: a worker that delivers by pull request renews its clone with
// both branches, the target and its own head, and goes on building the head branch on the target
// afterwards, never touching the target.
func TestAPullRequestsCloneIsRenewedToo(t *testing.T) {
	srv, url := startedRepo(t)
	for i := range 5 {
		if _, err := srv.PushCommit("pr", "main", testenvSig("alice"), "edit", map[string]string{"README.md": strconv.Itoa(i) + "\n"}, nil); err != nil {
			t.Fatal(err)
		}
	}
	main := mustRef(t, srv, "pr", "main")
	host := &hostDouble{}
	w := startHeadWorker(t, url, host, func(c *WorkerConfig) { c.KeepCommits, c.RenewFloor = 2, 1 })
	for i := range 4 {
		MustEnqueue(t, w, Change{Path: cmPath(fmt.Sprintf("cm-%d", i)), Content: configMap("cm", strconv.Itoa(i), 400)})
		MustFlush(t, w)
	}
	renewed(t, w)
	testenv.MustGit(t, "--git-dir="+w.dir, "rev-parse", "--verify", "refs/remotes/origin/"+testHead)
	MustEnqueue(t, w, Change{Path: cmPath("after"), Content: configMap("after", "1", 400)})
	MustFlush(t, w)

	if got := mustRef(t, srv, "pr", "main"); got != main {
		t.Fatalf("main moved to %s", got)
	}
	files, err := srv.Files("pr", testHead)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(files); n != 6 || !slices.Contains(files, cmPath("after")) {
		t.Errorf("the head branch holds %v, want README.md, cm-0 to cm-3 and after", files)
	}
	log := mustHeadLog(t, srv)
	onMain := slices.IndexFunc(log, func(c testenv.Commit) bool { return c.SHA == main })
	if onMain < 1 || slices.ContainsFunc(log[:onMain], func(c testenv.Commit) bool { return c.AuthorName != testBot.Name }) {
		t.Errorf("the head branch is not the worker's commits on main %s: %+v", main, log)
	}
}
