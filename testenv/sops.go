package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"testing"
)

// SopsBinary returns the sops CLI that tests use as the judge of the SOPS format, at the version
// the module testenv/clitools pins (see CLI); the first build takes a few minutes.
func SopsBinary(tb testing.TB) string {
	tb.Helper()
	return CLI(tb).Sops
}

// tools are the tools built (or found) once per test process, by key.
var tools struct {
	mu    sync.Mutex
	built map[string]*tool
}

type tool struct {
	once sync.Once
	path string
	err  error
}

// toolOnce returns what ensure returns for key, asking it once per test process, and fails tb
// with its error.
func toolOnce(tb testing.TB, key string, ensure func() (string, error)) string {
	tb.Helper()
	tools.mu.Lock()
	if tools.built == nil {
		tools.built = map[string]*tool{}
	}
	t := tools.built[key]
	if t == nil {
		t = &tool{}
		tools.built[key] = t
	}
	tools.mu.Unlock()
	t.once.Do(func() { t.path, t.err = ensure() })
	if t.err != nil {
		tb.Fatal(t.err)
	}
	return t.path
}

// GoTool returns the command name of package pkg at version, building it from the Go module proxy
// on first use into the Makefile's tools cache ($TOOLS_CACHE, default
// ~/.cache/gitops-reverser/tools)/name-version/, where the Makefile's targets put it too, built
// with toolGCFlags and without symbol tables. flags are extra go install flags (e.g. -tags, or
// Unoptimised), the same as the Makefile's.
func GoTool(tb testing.TB, name, pkg, version string, flags ...string) string {
	tb.Helper()
	return toolOnce(tb, pkg+"@"+version, func() (string, error) { return EnsureGoTool(name, pkg, version, flags...) })
}

// toolGCFlags are the compiler flags of every tool the tests build: no debugging information
// (-dwarf=false), which the links strip anyway (-s -w) and which cost a tenth of the compiler's
// time. The standard library keeps the default flags, so it is compiled once for the tools and the
// tests alike. The Makefile's TOOL_GCFLAGS must say the same (TestToolVersionsMatchMakefile).
var toolGCFlags = []string{"-gcflags=all=-dwarf=false", "-gcflags=std="}

// Unoptimised are the go build flags of every tool built apart from the control plane (sops,
// cosign, crane, krew, Gitea): its own packages are also built without optimisations or inlining
// (-N -l). A cold build takes an eighth to a third less CPU, and their tests hardly notice. etcd
// and kube-apiserver, which every test leans on, are optimised, and so are helm and promtool,
// built with them (see EnsureBinaries) from packages they have compiled already.
var Unoptimised = []string{"-gcflags=all=-N -l -dwarf=false", "-gcflags=std="}

// EnsureGoTool is GoTool outside a test (e.g. in TestMain, to build a tool while something else
// builds): it returns the path of name-version/name in the tools cache, building it there if it
// is missing (see buildCached), so no process ever runs a half-written binary.
func EnsureGoTool(name, pkg, version string, flags ...string) (string, error) {
	dir, err := buildCached(name+"-"+version, []string{name}, func(tmp string) error {
		args := slices.Concat([]string{"install", "-ldflags=-s -w"}, toolGCFlags, flags, []string{pkg + "@" + version})
		cmd := exec.Command("go", args...)
		cmd.Env = append(os.Environ(), "GOBIN="+tmp)
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("build %s %s: %w\n%s", name, version, err, out)
		}
		return os.Rename(filepath.Join(tmp, binaryName(pkg)), filepath.Join(tmp, name))
	})
	return filepath.Join(dir, name), err
}

// buildCached returns the folder of the tools cache (see toolsCache) named folder, building it
// first when its last file is missing: build writes files into a scratch folder, and they move
// into place in order, the last one last, so its presence means a finished build. Test packages
// run in parallel processes: a file lock makes the second wait for the first one's build
// instead of building the same thing again.
func buildCached(folder string, files []string, build func(tmp string) error) (string, error) {
	root, err := toolsCache()
	if err != nil {
		return "", err
	}
	dir := filepath.Join(root, folder)
	last := filepath.Join(dir, files[len(files)-1])
	if _, err := os.Stat(last); err == nil {
		return dir, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("create the tools cache: %w", err)
	}
	unlock, err := lockFile(filepath.Join(dir, ".lock"))
	if err != nil {
		return "", err
	}
	defer unlock()
	if _, err := os.Stat(last); err == nil { // built by another process while we waited
		return dir, nil
	}
	tmp, err := os.MkdirTemp(dir, "build-")
	if err != nil {
		return "", fmt.Errorf("create build dir: %w", err)
	}
	defer func() { _ = os.RemoveAll(tmp) }()
	if err := build(tmp); err != nil {
		return "", err
	}
	for _, name := range files {
		_ = os.RemoveAll(filepath.Join(dir, name)) // left by a build killed before its last file moved
		if err := os.Rename(filepath.Join(tmp, name), filepath.Join(dir, name)); err != nil {
			return "", fmt.Errorf("install %s: %w", folder, err)
		}
	}
	return dir, nil
}
