package gitops

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-git/go-git/v5/plumbing"

	"github.com/configbutler/gitops-reverser/testenv"
)

// gitClone runs git on a worker's clone (a bare repository, shallow once renewed).
func gitClone(t *testing.T, dir string, args ...string) string {
	t.Helper()
	out, err := exec.Command("git", append([]string{"--git-dir=" + dir}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("git %v in the clone: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

// renewed waits until the worker's clone was renewed: it is shallow, and nothing of the renewal
// is left beside it.
func renewed(t *testing.T, w *testWorker) {
	t.Helper()
	testenv.Eventually(t, 30*time.Second, "the clone to be renewed", func() (bool, string) {
		_, shallowErr := os.Stat(filepath.Join(w.dir, "shallow"))
		_, renewErr := os.Stat(renewDir(w.dir))
		return shallowErr == nil && os.IsNotExist(renewErr), fmt.Sprintf("shallow: %v, renewal dir: %v", shallowErr, renewErr)
	})
}

// TestTheCloneKeepsItsNewestCommits: a clone past its size for a renewal is replaced, in the
// background, by one that keeps the newest commits of the branch only, and pushes go on. Git
// finds the renewed clone sound and it holds fewer commits than the branch; the remote keeps all
// of them; later pushes (thin, against the renewed clone's objects) land and pass git fsck
// --strict on the remote; a commit older than the boundary is read after fetching the rest of
// the history; and a renewal the daemon left half done is cleared at the next start.
func TestTheCloneKeepsItsNewestCommits(t *testing.T) {
	const keep, commits = 4, 24
	srv := MustGitServer(t)
	url := MustRepo(t, srv, "renew")
	workDir := t.TempDir()
	small := func(c *WorkerConfig) { c.KeepCommits, c.RenewFloor = keep, 1 }
	w := StartWorker(t, url, workDir, BatchLimits{}, small)
	write := func(i int) {
		MustEnqueue(t, w, Change{Path: cmPath("app"), Content: configMap("app", strconv.Itoa(i), 3000), Summary: "update app"},
			Change{Path: cmPath(fmt.Sprintf("cm-%02d", i)), Content: configMap("cm", strconv.Itoa(i), 800), Summary: "create cm"})
		MustFlush(t, w)
	}
	for i := range commits {
		write(i)
	}
	renewed(t, w)
	history := mustLog(t, srv, "renew")
	if len(history) != commits {
		t.Fatalf("the remote has %d commits, want all %d", len(history), commits)
	}
	gitClone(t, w.dir, "fsck", "--strict", "--no-dangling")
	kept, err := strconv.Atoi(gitClone(t, w.dir, "rev-list", "--count", "refs/remotes/origin/main"))
	if err != nil || kept >= commits {
		t.Fatalf("the renewed clone holds %d commits of %d (%v), want only the newest", kept, commits, err)
	}

	for i := commits; i < commits+3; i++ {
		write(i)
	}
	mustFsck(t, srv, "renew")
	hashes, err := srv.FileHashes("renew", "main")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := hashes[cmPath("app")], testenv.BlobHash(configMap("app", strconv.Itoa(commits+2), 3000)); got != want || len(hashes) != commits+4 {
		t.Fatalf("after the renewal the remote has app at %s and %d files, want %s and %d", got, len(hashes), want, commits+4)
	}

	oldest := plumbing.NewHash(history[len(history)-1].SHA)
	err = w.Read(t.Context(), func(r Reader) error {
		if _, err := r.Size(oldest); err == nil {
			return fmt.Errorf("the renewed clone still has the first commit %s", oldest)
		}
		if err := r.Deepen(); err != nil {
			return err
		}
		if _, err := r.Commit(oldest); err != nil {
			return fmt.Errorf("after Deepen: %w", err)
		}
		for h := range r.s.shallow {
			return fmt.Errorf("after Deepen the clone still has a boundary at %s", h)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}

	if err := w.stop(); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(renewDir(w.dir), "objects"), 0o755); err != nil {
		t.Fatal(err)
	}
	w = StartWorker(t, url, workDir, BatchLimits{}) // renewing only past 256 MiB: no renewal of its own
	write(commits + 3)
	if _, err := os.Stat(renewDir(w.dir)); !os.IsNotExist(err) {
		t.Errorf("a renewal left half done is still there after a start: %v", err)
	}
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
	// The renewed clone is swapped in between pushes, after its files are in place.
	testenv.Eventually(t, 30*time.Second, "the renewed clone in use", func() (bool, string) {
		var boundaries int
		err := w.Read(t.Context(), func(r Reader) error { boundaries = len(r.s.shallow); return nil })
		return err == nil && boundaries > 0, fmt.Sprintf("%d boundary commits, %v", boundaries, err)
	})
	err := w.Read(t.Context(), func(r Reader) error {
		for h := range r.s.shallow {
			if !r.Shallow(h) {
				return fmt.Errorf("Shallow(%s) is false for a boundary commit", h)
			}
			c, err := r.s.readCommit(h)
			if err != nil {
				return err
			}
			if !c.parent.IsZero() {
				return fmt.Errorf("the boundary commit %s reads with parent %s", h, c.parent)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
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
	gitClone(t, w.dir, "rev-parse", "--verify", "refs/remotes/origin/"+testHead)
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
