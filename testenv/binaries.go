package testenv

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"syscall"
)

// Binaries are the paths of the pinned control-plane programs.
type Binaries struct {
	Etcd          string
	KubeAPIServer string
	Kubectl       string
}

// toolsDir is the separate Go module that pins the control-plane versions.
func toolsDir() (string, error) {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return "", errors.New("locate testenv sources: runtime.Caller failed")
	}
	dir := filepath.Join(filepath.Dir(file), "tools")
	if _, err := os.Stat(filepath.Join(dir, "go.mod")); err != nil {
		return "", fmt.Errorf("locate testenv tools module: %w", err)
	}
	return dir, nil
}

// cacheDir is where the built binaries live, keyed by the tools module's go.mod/go.sum and the Go
// version, so a version bump rebuilds and everything else reuses the first build.
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
	h := sha256.New()
	for _, name := range []string{"go.mod", "go.sum"} {
		b, err := os.ReadFile(filepath.Join(tools, name))
		if err != nil {
			return "", fmt.Errorf("read tools %s: %w", name, err)
		}
		h.Write(b)
	}
	h.Write([]byte(runtime.Version()))
	return filepath.Join(root, hex.EncodeToString(h.Sum(nil))[:16]), nil
}

// EnsureBinaries returns the pinned etcd, kube-apiserver and kubectl, building them from the Go module
// proxy on first use (a few minutes) and caching them. Concurrent callers (parallel test packages)
// wait on a file lock instead of building twice.
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
	targets := []struct{ out, pkg string }{
		{bins.Etcd, "go.etcd.io/etcd/server/v3"},
		{bins.KubeAPIServer, "k8s.io/kubernetes/cmd/kube-apiserver"},
		{bins.Kubectl, "k8s.io/kubernetes/cmd/kubectl"},
	}
	for _, t := range targets {
		if err := goBuild(ctx, tools, t.out, t.pkg); err != nil {
			return Binaries{}, err
		}
	}
	return bins, nil
}

func allExist(b Binaries) bool {
	for _, p := range []string{b.Etcd, b.KubeAPIServer, b.Kubectl} {
		if _, err := os.Stat(p); err != nil {
			return false
		}
	}
	return true
}

// goBuild builds pkg into a temporary file and renames it into place, so a killed build never
// leaves a half-written binary behind.
func goBuild(ctx context.Context, tools, out, pkg string) error {
	tmp := out + ".tmp"
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags=-s -w", "-o", tmp, pkg)
	cmd.Dir = tools
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("build %s: %w\n%s", pkg, err, b)
	}
	if err := os.Rename(tmp, out); err != nil {
		return fmt.Errorf("install %s: %w", out, err)
	}
	return nil
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
