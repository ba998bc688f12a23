package gitstore

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-git/go-git/v5/plumbing"

	"github.com/configbutler/gitops-reverser/testenv"
)

// TestOwnPacksAreValidForGit: the packs and indexes a clone writes after its pushes land pass
// git fsck and git verify-pack, and the clone opened again reads back every file it wrote, with
// the remote down so nothing comes from it.
func TestOwnPacksAreValidForGit(t *testing.T) {
	srv := mustGitServer(t)
	url := mustRepo(t, srv, "ownpacks")
	dir := filepath.Join(t.TempDir(), "clone")
	c := openClone(t, url, dir, 0)
	for i := range 5 {
		changes := map[string][]byte{
			cmPath(fmt.Sprintf("cm-%d", i)): configMap(fmt.Sprintf("cm-%d", i), "1", 100),
			cmPath("shared"):                configMap("shared", fmt.Sprint(i), 5000),
		}
		if i == 4 {
			changes[cmPath("cm-0")] = nil // a delete
		}
		c.write(changes)
	}
	c.close()
	if n := mustVerifyClone(t, dir); n < 5 {
		t.Fatalf("the clone has %d packs, want one per push", n)
	}
	mustReadBackOffline(t, srv, "ownpacks", url, dir)
}

// mustReadBackOffline takes the remote down, opens the clone in dir of repo at url again and
// checks that it reads every file of the remote's tip, all in one folder, from the clone.
func mustReadBackOffline(t *testing.T, srv *testenv.GitServer, repo, url, dir string) {
	t.Helper()
	want := map[string][]byte{}
	for _, f := range testenv.MustFiles(t, srv, repo) {
		content, err := srv.ReadFile(repo, "main", f)
		if err != nil {
			t.Fatal(err)
		}
		want[f] = content
	}
	mustReadFilesOffline(t, srv, repo, url, dir, want)
}

// mustReadFilesOffline is mustReadBackOffline with the files of the remote's tip known: want.
func mustReadFilesOffline(t *testing.T, srv *testenv.GitServer, repo, url, dir string, want map[string][]byte) {
	t.Helper()
	tip := plumbing.NewHash(testenv.MustLog(t, srv, repo)[0].SHA)
	srv.SetAvailable(false)
	defer srv.SetAvailable(true)
	c := openOffline(t, url, dir, 0)
	defer c.close()
	if err := readFolder(c.Reader(context.Background()), tip, want); err != nil {
		t.Fatalf("read back after a restart: %v", err)
	}
}

// readFolder checks that r reads the files of want, all in one folder, at commit tip.
func readFolder(r Reader, tip plumbing.Hash, want map[string][]byte) error {
	commit, err := r.Commit(tip)
	if err != nil {
		return err
	}
	root := plumbing.NewHash(string(commit[5:45])) // "tree <hex>"
	folder := path.Dir(cmPath("x"))
	entries, err := r.Dir(root, folder)
	if err != nil {
		return err
	}
	if len(entries) != len(want) {
		return fmt.Errorf("%d files in %s, want %d", len(entries), folder, len(want))
	}
	for _, e := range entries {
		got, err := r.Blob(e.Hash)
		if err != nil {
			return err
		}
		if p := folder + "/" + e.Name; !bytes.Equal(got, want[p]) {
			return fmt.Errorf("%s reads %q, want %q", p, got, want[p])
		}
	}
	return nil
}

// TestCompactionRepacksFetchedDeltas: compaction copies the whole objects of the packs it
// merges as they are packed, and packs the deltas of a fetched pack again as whole objects.
// The merged clone passes git fsck and verify-pack, and opened again reads every file back with
// the remote down.
func TestCompactionRepacksFetchedDeltas(t *testing.T) {
	srv := mustGitServer(t)
	url := mustRepo(t, srv, "deltas")
	dir := filepath.Join(t.TempDir(), "clone")
	c := openClone(t, url, dir, 0)
	noise := make([]byte, 200<<10)
	_, _ = rand.Read(noise)
	// The first pack is the largest, which compaction leaves alone.
	c.write(map[string][]byte{cmPath("large"): []byte(hex.EncodeToString(noise))})
	// Another writer edits a long file a little, three times; the server keeps its history with
	// deltas, and the clone fetches them before its next push (as the worker does when its push
	// is refused).
	long := strings.Repeat("a line of a long file\n", 1000)
	for i := range 3 {
		write := map[string]string{cmPath("long"): long + fmt.Sprintf("edit %d\n", i)}
		if _, err := srv.PushCommit("deltas", "main", testenv.Signature{Name: "Ann", Email: "ann@example.com"}, "edit", write, nil); err != nil {
			t.Fatal(err)
		}
	}
	if out, err := exec.Command("git", "--git-dir="+filepath.Join(srv.Root, "deltas.git"), "repack", "-a", "-d", "-f").CombinedOutput(); err != nil {
		t.Fatalf("repack the remote: %v\n%s", err, out)
	}
	c.fetch()
	c.write(map[string][]byte{cmPath("after-fetch"): configMap("after-fetch", "1", 100)})
	if !clonePacksHaveDeltas(t, dir) {
		t.Fatal("the fetched pack holds no delta: the test does not test what it says")
	}
	for i := range maxPacks {
		c.write(map[string][]byte{cmPath(fmt.Sprint(i % 3)): configMap("x", fmt.Sprint(i), 100)})
	}
	c.close()
	if n := mustVerifyClone(t, dir); n > maxPacks {
		t.Fatalf("the clone has %d packs, want at most %d", n, maxPacks)
	}
	if clonePacksHaveDeltas(t, dir) {
		t.Fatal("a delta is left: compaction did not merge the fetched pack")
	}
	mustReadBackOffline(t, srv, "deltas", url, dir)
}

// TestManyPushesKeepClonePacksBounded: a clone that keeps a pack of every push merges them, so
// that it holds at most maxPacks; the merged clone is still valid, opened again, for git and for
// the next push.
func TestManyPushesKeepClonePacksBounded(t *testing.T) {
	srv := mustGitServer(t)
	url := mustRepo(t, srv, "packs")
	dir := filepath.Join(t.TempDir(), "clone")
	c := openClone(t, url, dir, 0)
	for i := range maxPacks + 8 {
		c.write(map[string][]byte{cmPath(fmt.Sprint(i % 5)): configMap("x", fmt.Sprint(i), 100)})
	}
	packs, err := filepath.Glob(filepath.Join(dir, "objects", "pack", "*.pack"))
	if err != nil {
		t.Fatal(err)
	}
	if len(packs) > maxPacks {
		t.Fatalf("clone has %d packs, want at most %d", len(packs), maxPacks)
	}
	c.close()
	mustVerifyClone(t, dir)
	c = openClone(t, url, dir, 0) // the compacted clone is still valid
	c.write(map[string][]byte{cmPath("after"): configMap("after", "1", 100)})
	if got := len(testenv.MustFiles(t, srv, "packs")); got != 6 {
		t.Fatalf("files = %d, want 6", got)
	}
	if got := len(testenv.MustLog(t, srv, "packs")); got != maxPacks+9 {
		t.Fatalf("commits = %d, want %d", got, maxPacks+9)
	}
}

// clonePacksHaveDeltas reports whether a pack of the clone in dir holds a delta, as git
// verify-pack lists them: with a chain depth and a base.
func clonePacksHaveDeltas(tb testing.TB, dir string) bool {
	tb.Helper()
	idxs, err := filepath.Glob(filepath.Join(dir, "objects", "pack", "*.idx"))
	if err != nil {
		tb.Fatal(err)
	}
	for _, idx := range idxs {
		out, err := exec.Command("git", "--git-dir="+dir, "verify-pack", "-v", idx).Output()
		if err != nil {
			tb.Fatalf("verify-pack %s: %v", idx, err)
		}
		for _, line := range strings.Split(string(out), "\n") {
			if f := strings.Fields(line); len(f) == 7 && len(f[0]) == 40 {
				return true
			}
		}
	}
	return false
}

// mustVerifyClone runs git fsck on a worker's clone and git verify-pack on each of its packs,
// and returns how many packs it has.
func mustVerifyClone(tb testing.TB, dir string) int {
	tb.Helper()
	git := func(args ...string) {
		tb.Helper()
		out, err := exec.Command("git", append([]string{"--git-dir=" + dir}, args...)...).CombinedOutput()
		var exit *exec.ExitError
		if err != nil && !errors.As(err, &exit) {
			tb.Fatal(err)
		}
		if err != nil {
			tb.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	git("fsck", "--strict", "--no-dangling", "--full")
	idxs, err := filepath.Glob(filepath.Join(dir, "objects", "pack", "*.idx"))
	if err != nil {
		tb.Fatal(err)
	}
	for _, idx := range idxs {
		git("verify-pack", "-v", idx)
	}
	return len(idxs)
}
