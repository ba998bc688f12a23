package gitops

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
)

// TestOwnPacksAreValidForGit: the packs and indexes a worker writes into its clone after its
// pushes land pass git fsck and git verify-pack, and a new worker on the same clone reads back
// every file it wrote, with the remote down so nothing comes from it.
func TestOwnPacksAreValidForGit(t *testing.T) {
	srv := MustGitServer(t)
	url := MustRepo(t, srv, "ownpacks")
	workDir := t.TempDir()
	w := StartWorker(t, url, workDir, BatchLimits{})
	for i := range 5 {
		MustEnqueue(t, w,
			Change{Path: cmPath(fmt.Sprintf("cm-%d", i)), Content: configMap(fmt.Sprintf("cm-%d", i), "1", 100)},
			Change{Path: cmPath("shared"), Content: configMap("shared", fmt.Sprint(i), 5000)})
		if i == 4 {
			MustEnqueue(t, w, Change{Path: cmPath("cm-0")}) // a delete
		}
		MustFlush(t, w)
	}
	if err := w.stop(); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(workDir, WorkerKey(url, "main"))
	if n := mustVerifyClone(t, dir); n < 5 {
		t.Fatalf("the clone has %d packs, want one per push", n)
	}

	tip := plumbing.NewHash(mustLog(t, srv, "ownpacks")[0].SHA)
	srv.SetAvailable(false)
	w = StartWorker(t, url, workDir, BatchLimits{})
	want := map[string][]byte{}
	for _, f := range mustFiles(t, srv, "ownpacks") {
		content, err := srv.ReadFile("ownpacks", "main", f)
		if err != nil {
			t.Fatal(err)
		}
		want[f] = content
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := w.Read(ctx, func(r Reader) error {
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
	})
	if err != nil {
		t.Fatalf("read back after a restart: %v", err)
	}
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
