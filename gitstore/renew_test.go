package gitstore

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/go-git/go-git/v5/plumbing"

	"github.com/configbutler/gitops-reverser/testenv"
)

// gitClone runs git on a clone (a bare repository, shallow once renewed).
func gitClone(t *testing.T, dir string, args ...string) string {
	t.Helper()
	out, err := exec.Command("git", append([]string{"--git-dir=" + dir}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("git %v in the clone: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

// TestTheCloneKeepsItsNewestCommits: a clone is replaced by a renewed one that keeps the newest
// commits of the branch only. Git finds the renewed clone sound and it holds fewer commits than
// the branch; the remote keeps all of them; later pushes (thin, against the renewed clone's
// objects) land and pass git fsck --strict on the remote; a commit older than the boundary is
// read after fetching the rest of the history; and a renewal the daemon left half done is
// cleared when the clone is opened again.
func TestTheCloneKeepsItsNewestCommits(t *testing.T) {
	const keep, commits = 4, 24
	srv := mustGitServer(t)
	url := mustRepo(t, srv, "renew")
	dir := filepath.Join(t.TempDir(), "clone")
	c := openClone(t, url, dir, keep)
	write := func(i int) {
		c.write(map[string][]byte{
			cmPath("app"):                     configMap("app", strconv.Itoa(i), 3000),
			cmPath(fmt.Sprintf("cm-%02d", i)): configMap("cm", strconv.Itoa(i), 800),
		})
	}
	for i := range commits {
		write(i)
	}
	c.renew()
	history := testenv.MustLog(t, srv, "renew")
	if len(history) != commits {
		t.Fatalf("the remote has %d commits, want all %d", len(history), commits)
	}
	gitClone(t, dir, "fsck", "--strict", "--no-dangling")
	kept, err := strconv.Atoi(gitClone(t, dir, "rev-list", "--count", "refs/remotes/origin/main"))
	if err != nil || kept >= commits {
		t.Fatalf("the renewed clone holds %d commits of %d (%v), want only the newest", kept, commits, err)
	}

	for i := commits; i < commits+3; i++ {
		write(i)
	}
	testenv.MustFsck(t, srv, "renew")
	hashes, err := srv.FileHashes("renew", "main")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := hashes[cmPath("app")], testenv.BlobHash(configMap("app", strconv.Itoa(commits+2), 3000)); got != want || len(hashes) != commits+4 {
		t.Fatalf("after the renewal the remote has app at %s and %d files, want %s and %d", got, len(hashes), want, commits+4)
	}

	oldest := plumbing.NewHash(history[len(history)-1].SHA)
	r := c.Reader(context.Background())
	if _, err := r.Size(oldest); err == nil {
		t.Fatalf("the renewed clone still has the first commit %s", oldest)
	}
	if err := r.Deepen(); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Commit(oldest); err != nil {
		t.Fatalf("after Deepen: %v", err)
	}
	for h := range c.Store().shallow {
		t.Fatalf("after Deepen the clone still has a boundary at %s", h)
	}

	c.close()
	if err := os.MkdirAll(filepath.Join(renewDir(dir), "objects"), 0o755); err != nil {
		t.Fatal(err)
	}
	c = openClone(t, url, dir, 0)
	write(commits + 3)
	if _, err := os.Stat(renewDir(dir)); !os.IsNotExist(err) {
		t.Errorf("a renewal left half done is still there after the clone was opened: %v", err)
	}
}
