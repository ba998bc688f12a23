package testenv

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"
)

// Binaries are the paths of the pinned control-plane programs, and of helm and promtool, which
// are built with them because they share most of their packages (Kubernetes' client among them).
type Binaries struct {
	Etcd          string
	KubeAPIServer string
	Kubectl       string
	Helm          string
	Promtool      string
}

// toolsDir is the separate Go module that pins the versions of the control plane, helm and
// promtool.
func toolsDir() (string, error) {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return "", errors.New("locate testenv sources: runtime.Caller failed")
	}
	dir := filepath.Join(filepath.Dir(file), "tools")
	if !filepath.IsAbs(file) {
		// Built with -trimpath (make test builds so): the file is named by its import path. The
		// module on disk is the one of the working directory, which go test sets to the tested
		// package's directory.
		out, err := exec.Command("go", "env", "GOMOD").Output()
		if err != nil {
			return "", fmt.Errorf("locate the module (go env GOMOD): %w", err)
		}
		dir = filepath.Join(filepath.Dir(strings.TrimSpace(string(out))), "testenv", "tools")
	}
	if _, err := os.Stat(filepath.Join(dir, "go.mod")); err != nil {
		return "", fmt.Errorf("locate testenv tools module: %w", err)
	}
	return dir, nil
}

// cacheDir is where the built binaries live, keyed by the tools module's go.mod/go.sum, the Go
// version and the compiler flags (moduleKey), so a version bump rebuilds and everything else
// reuses the first build.
// TESTENV_CACHE_DIR overrides the root.
func cacheDir(tools string) (string, error) {
	root := os.Getenv("TESTENV_CACHE_DIR")
	if root == "" {
		userCache, err := os.UserCacheDir()
		if err != nil {
			return "", fmt.Errorf("find user cache dir: %w", err)
		}
		root = filepath.Join(userCache, "gitops-reverser", "testenv")
	}
	key, err := moduleKey(tools)
	if err != nil {
		return "", err
	}
	return filepath.Join(root, key), nil
}

// EnsureBinaries returns the pinned etcd, kube-apiserver, kubectl, helm and promtool, building them
// from the Go module proxy on first use (a few minutes) and caching them. Concurrent callers
// (parallel test packages) wait on a file lock instead of building twice.
func EnsureBinaries(ctx context.Context) (Binaries, error) {
	tools, err := toolsDir()
	if err != nil {
		return Binaries{}, err
	}
	dir, err := cacheDir(tools)
	if err != nil {
		return Binaries{}, err
	}
	bins := Binaries{
		Etcd:          filepath.Join(dir, "etcd"),
		KubeAPIServer: filepath.Join(dir, "kube-apiserver"),
		Kubectl:       filepath.Join(dir, "kubectl"),
		Helm:          filepath.Join(dir, "helm"),
		Promtool:      filepath.Join(dir, "promtool"),
	}
	if allExist(bins) {
		return bins, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return Binaries{}, fmt.Errorf("create binary cache: %w", err)
	}
	unlock, err := lockFile(filepath.Join(dir, ".lock"))
	if err != nil {
		return Binaries{}, err
	}
	defer unlock()
	if allExist(bins) { // built by another process while we waited
		return bins, nil
	}
	// One go build for the five: they share most packages, and their links (kube-apiserver's
	// alone takes a core for a while) run side by side instead of one after the other. On a fresh
	// machine helm took 247 CPU-s built on its own from its own go.mod (unoptimised, beside
	// promtool and sops); built here after the control plane it takes 26.
	targets := map[string]string{
		bins.Etcd:          "go.etcd.io/etcd/server/v3",
		bins.KubeAPIServer: "k8s.io/kubernetes/cmd/kube-apiserver",
		bins.Kubectl:       "k8s.io/kubernetes/cmd/kubectl",
		bins.Helm:          "helm.sh/helm/v3/cmd/helm",
		bins.Promtool:      "github.com/prometheus/prometheus/cmd/promtool",
	}
	if err := goBuild(ctx, tools, targets); err != nil {
		return Binaries{}, err
	}
	return bins, nil
}

func allExist(b Binaries) bool {
	for _, p := range []string{b.Etcd, b.KubeAPIServer, b.Kubectl, b.Helm, b.Promtool} {
		if _, err := os.Stat(p); err != nil {
			return false
		}
	}
	return true
}

// goBuild builds each main package of targets (output path → package) in one go build, into a
// temporary directory next to the outputs, and renames each into place, so a killed build never
// leaves a half-written binary behind.
func goBuild(ctx context.Context, tools string, targets map[string]string) error {
	var dir string
	pkgs := make([]string, 0, len(targets))
	for out, pkg := range targets {
		dir = filepath.Dir(out)
		pkgs = append(pkgs, pkg)
	}
	tmp, err := os.MkdirTemp(dir, "build-")
	if err != nil {
		return fmt.Errorf("create build dir: %w", err)
	}
	defer func() { _ = os.RemoveAll(tmp) }()
	// remove_all_sd leaves Prometheus' service discoveries out of promtool (checking rules uses
	// none); no other program has the tag.
	if err := goBuildIn(ctx, tools, tmp+string(filepath.Separator), []string{"-tags", "remove_all_sd"}, pkgs...); err != nil {
		return err
	}
	for out := range targets {
		// go build -o dir/ names each binary after the last element of its package path that
		// is not a major version suffix (etcd's is "server", from go.etcd.io/etcd/server/v3).
		built := filepath.Join(tmp, binaryName(targets[out]))
		if err := os.Rename(built, out); err != nil {
			return fmt.Errorf("install %s: %w", out, err)
		}
	}
	return nil
}

// binaryName is the file name go build gives the main package pkg.
func binaryName(pkg string) string {
	elems := strings.Split(pkg, "/")
	last := elems[len(elems)-1]
	if len(elems) > 1 && len(last) > 1 && last[0] == 'v' && strings.Trim(last[1:], "0123456789") == "" {
		last = elems[len(elems)-2]
	}
	return last
}

func lockFile(path string) (func(), error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open build lock: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("take build lock: %w", err)
	}
	return func() {
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		_ = f.Close()
	}, nil
}

// MakefileSays fails tb unless the repository's Makefile (found from the test's folder upwards)
// has each line as it is: the tool versions the Makefile pins and the tests build are one each.
func MakefileSays(tb testing.TB, lines ...string) {
	tb.Helper()
	dir, err := os.Getwd()
	if err != nil {
		tb.Fatal(err)
	}
	for ; ; dir = filepath.Dir(dir) {
		raw, err := os.ReadFile(filepath.Join(dir, "Makefile"))
		if err == nil {
			have := strings.Split(string(raw), "\n")
			for _, want := range lines {
				if !slices.Contains(have, want) {
					tb.Errorf("%s has no line %q: keep the version the tests build and the Makefile's equal", filepath.Join(dir, "Makefile"), want)
				}
			}
			return
		}
		if filepath.Dir(dir) == dir {
			tb.Fatal("no Makefile above the test's folder")
		}
	}
}
