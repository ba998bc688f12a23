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

var sopsBuild struct {
	once sync.Once
	path string
	err  error
}

// SopsBinary returns the pinned sops CLI, building it from the Go module proxy on first use (a
// few minutes) into the Makefile's tools cache ($TOOLS_CACHE, default
// ~/.cache/gitops-reverser/tools), where make sops puts it too.
func SopsBinary(tb testing.TB) string {
	tb.Helper()
	sopsBuild.once.Do(func() {
		root := os.Getenv("TOOLS_CACHE")
		if root == "" {
			home, err := os.UserHomeDir()
			if err != nil {
				sopsBuild.err = fmt.Errorf("find the tools cache: %w", err)
				return
			}
			root = filepath.Join(home, ".cache", "gitops-reverser", "tools")
		}
		dir := filepath.Join(root, "sops-"+SopsVersion)
		sopsBuild.path = filepath.Join(dir, "sops")
		if _, err := os.Stat(sopsBuild.path); err == nil {
			return
		}
		cmd := exec.Command("go", "install", "github.com/getsops/sops/v3/cmd/sops@"+SopsVersion)
		cmd.Env = append(os.Environ(), "GOBIN="+dir)
		if out, err := cmd.CombinedOutput(); err != nil {
			sopsBuild.err = fmt.Errorf("build sops %s: %w\n%s", SopsVersion, err, out)
		}
	})
	if sopsBuild.err != nil {
		tb.Fatal(sopsBuild.err)
	}
	return sopsBuild.path
}
