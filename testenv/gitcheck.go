package testenv

import (
	"io/fs"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// MustFiles lists the files of branch main of repo, or ends the test.
func MustFiles(tb testing.TB, srv *GitServer, repo string) []string {
	tb.Helper()
	files, err := srv.Files(repo, "main")
	if err != nil {
		tb.Fatal(err)
	}
	return files
}

// MustLog lists the commits of branch main of repo, newest first, or ends the test.
func MustLog(tb testing.TB, srv *GitServer, repo string) []Commit {
	tb.Helper()
	log, err := srv.Log(repo, "main")
	if err != nil {
		tb.Fatal(err)
	}
	return log
}

// MustFsck ends the test unless every object and tree of repo is well formed (git fsck --strict:
// sorted tree entries, valid modes…).
func MustFsck(tb testing.TB, srv *GitServer, repo string) {
	tb.Helper()
	MustGit(tb, "--git-dir="+filepath.Join(srv.Root, repo+".git"), "fsck", "--strict", "--no-dangling")
}

// MustGit runs the git CLI with args and returns its output, trimmed, or ends the test with it.
func MustGit(tb testing.TB, args ...string) string {
	tb.Helper()
	out, err := exec.Command("git", args...).CombinedOutput()
	if err != nil {
		tb.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

// DirSize is the bytes of the files under dir, or the end of the test.
func DirSize(tb testing.TB, dir string) int64 {
	tb.Helper()
	var n int64
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
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
		tb.Fatal(err)
	}
	return n
}

// GCSize is the bytes git packs the objects of the repository at dir into, measured on a copy
// repacked with deltas found afresh (git gc, but not reusing the packs it finds): what git itself
// needs for its history.
func GCSize(tb testing.TB, dir string) int64 {
	tb.Helper()
	cp := filepath.Join(tb.TempDir(), "copy.git")
	if out, err := exec.Command("cp", "-a", dir, cp).CombinedOutput(); err != nil {
		tb.Fatalf("copy %s: %v\n%s", dir, err, out)
	}
	MustGit(tb, "--git-dir="+cp, "repack", "-a", "-d", "-f", "-q")
	MustGit(tb, "--git-dir="+cp, "prune", "--expire=now")
	return DirSize(tb, filepath.Join(cp, "objects"))
}
