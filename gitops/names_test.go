package gitops

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/configbutler/gitops-reverser/layout"
)

// TestLongAndColonNamesCloneWithRealGit writes a 253-character name and an RBAC-style name through
// a worker, then clones with the git binary: every clone must check out every file.
func TestLongAndColonNamesCloneWithRealGit(t *testing.T) {
	srv := MustGitServer(t)
	w := StartWorker(t, MustRepo(t, srv, "names"), "", BatchLimits{})
	long := strings.Repeat("a", 253)
	files := map[string]string{
		layout.Path("clusters/prod", "", "configmaps", "default", long):                            "name: " + long + "\n",
		layout.Path("clusters/prod", "rbac.authorization.k8s.io", "clusterroles", "", "system::x"): "name: system::x\n",
	}
	for p, content := range files {
		MustEnqueue(t, w, Change{Path: p, Content: []byte(content), Summary: "create " + p})
	}
	MustFlush(t, w)

	dir := filepath.Join(t.TempDir(), "clone")
	if out, err := exec.Command("git", "clone", "--quiet", "--branch", "main", srv.AuthURL("names"), dir).CombinedOutput(); err != nil {
		t.Fatalf("git clone: %v\n%s", err, out)
	}
	out, err := exec.Command("git", "-C", dir, "ls-files", "-z").Output()
	if err != nil {
		t.Fatalf("git ls-files: %v", err)
	}
	listed := strings.Split(strings.TrimSuffix(string(out), "\x00"), "\x00")
	for p, content := range files {
		if !slices.Contains(listed, p) {
			t.Errorf("git ls-files lacks %q: %q", p, listed)
		}
		got, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(p)))
		if err != nil || string(got) != content {
			t.Errorf("checked-out %q = %q, %v; want %q", p, got, err, content)
		}
		if !utf8.ValidString(p) {
			t.Errorf("path %q is not valid UTF-8", p)
		}
	}
}
