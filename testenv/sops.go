package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

// SopsVersion is the sops CLI that tests use as the judge of the SOPS format. The Makefile's
// SOPS_VERSION (make sops) must name the same one; TestSopsVersionMatchesMakefile checks that.
const SopsVersion = "v3.13.3"

// SopsBinary returns the pinned sops CLI (see GoTool); the first build takes a few minutes.
func SopsBinary(tb testing.TB) string {
	tb.Helper()
	return GoTool(tb, "sops", "github.com/getsops/sops/v3/cmd/sops", SopsVersion)
}

var goTools struct {
	mu    sync.Mutex
	built map[string]*goTool
}

type goTool struct {
	once sync.Once
	path string
	err  error
}

// GoTool returns the command name of package pkg at version, building it from the Go module proxy
// on first use into the Makefile's tools cache ($TOOLS_CACHE, default
// ~/.cache/gitops-reverser/tools)/name-version/, where the Makefile's targets put it too.
func GoTool(tb testing.TB, name, pkg, version string) string {
	tb.Helper()
	goTools.mu.Lock()
	if goTools.built == nil {
		goTools.built = map[string]*goTool{}
	}
	t := goTools.built[pkg+"@"+version]
	if t == nil {
		t = &goTool{}
		goTools.built[pkg+"@"+version] = t
	}
	goTools.mu.Unlock()
	t.once.Do(func() {
		root := os.Getenv("TOOLS_CACHE")
		if root == "" {
			home, err := os.UserHomeDir()
			if err != nil {
				t.err = fmt.Errorf("find the tools cache: %w", err)
				return
			}
			root = filepath.Join(home, ".cache", "gitops-reverser", "tools")
		}
		dir := filepath.Join(root, name+"-"+version)
		t.path = filepath.Join(dir, name)
		if _, err := os.Stat(t.path); err == nil {
			return
		}
		cmd := exec.Command("go", "install", pkg+"@"+version)
		cmd.Env = append(os.Environ(), "GOBIN="+dir)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.err = fmt.Errorf("build %s %s: %w\n%s", name, version, err, out)
		}
	})
	if t.err != nil {
		tb.Fatal(t.err)
	}
	return t.path
}
