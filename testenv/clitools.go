package testenv

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// CLITools are the command-line programs the tests judge the product's output with, at the
// versions the module testenv/clitools pins: the real sops CLI, cosign 3 and cosign 2, and crane.
type CLITools struct {
	Sops, Cosign, Cosign2, Crane string
}

// The packages of the CLI tools, and the file each is built to.
var cliTools = []struct{ pkg, file string }{
	{"github.com/getsops/sops/v3/cmd/sops", "sops"},
	{"github.com/google/go-containerregistry/cmd/crane", "crane"},
	{"github.com/sigstore/cosign/v3/cmd/cosign", "cosign"},
	{"github.com/sigstore/cosign/v2/cmd/cosign", "cosign2"}, // built last: its file says all are built
}

// CLI returns the CLI tools, building them once (a few minutes) if the tools cache lacks them;
// it fails tb when they cannot be built.
func CLI(tb testing.TB) CLITools {
	tb.Helper()
	dir := toolOnce(tb, "clitools", func() (string, error) {
		tools, err := EnsureCLITools()
		return filepath.Dir(tools.Sops), err
	})
	return cliToolsIn(dir)
}

func cliToolsIn(dir string) CLITools {
	return CLITools{Sops: filepath.Join(dir, "sops"), Cosign: filepath.Join(dir, "cosign"),
		Cosign2: filepath.Join(dir, "cosign2"), Crane: filepath.Join(dir, "crane")}
}

// EnsureCLITools is CLI outside a test (the Makefile's later-tools): the tools in the tools cache's
// clitools-<key> folder, whose key changes with the module's go.mod and go.sum, the Go version and
// the compiler flags, built there when missing. One go build compiles sops, crane and cosign 3,
// unoptimised (Unoptimised): they share their packages; a second, cosign 2, whose binary has the
// same name, from the packages the first compiled, which are most of its own.
func EnsureCLITools() (CLITools, error) {
	module, err := moduleDir("clitools")
	if err != nil {
		return CLITools{}, err
	}
	key, err := moduleKey(module, Unoptimised...)
	if err != nil {
		return CLITools{}, err
	}
	files := make([]string, len(cliTools))
	for i, t := range cliTools {
		files[i] = t.file
	}
	dir, err := buildCached("clitools-"+key, files, func(tmp string) error {
		var together []string
		for _, t := range cliTools[:len(cliTools)-1] {
			together = append(together, t.pkg)
		}
		last := cliTools[len(cliTools)-1]
		if err := goBuildIn(context.Background(), module, tmp+string(filepath.Separator), Unoptimised, together...); err != nil {
			return err
		}
		return goBuildIn(context.Background(), module, filepath.Join(tmp, last.file), Unoptimised, last.pkg)
	})
	if err != nil {
		return CLITools{}, err
	}
	return cliToolsIn(dir), nil
}

// goBuildIn builds pkgs of the module in dir to out (a file, or a folder ending in a separator),
// as every tool of a testenv module is built: no cgo, no local paths, no symbol tables, toolGCFlags,
// then flags (a build tag, Unoptimised).
func goBuildIn(ctx context.Context, dir, out string, flags []string, pkgs ...string) error {
	args := slices.Concat([]string{"build", "-trimpath", "-ldflags=-s -w"}, toolGCFlags, flags, []string{"-o", out}, pkgs)
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("build %s: %w\n%s", strings.Join(pkgs, " "), err, b)
	}
	return nil
}

// moduleDir is the folder of testenv's module name (tools, clitools) beside this package's
// sources, found as toolsDir finds the control plane's.
func moduleDir(name string) (string, error) {
	tools, err := toolsDir()
	if err != nil {
		return "", err
	}
	dir := filepath.Join(filepath.Dir(tools), name)
	if _, err := os.Stat(filepath.Join(dir, "go.mod")); err != nil {
		return "", fmt.Errorf("locate testenv's %s module: %w", name, err)
	}
	return dir, nil
}

// moduleKey is the first 16 hex digits of the sha256 of the module's go.mod and go.sum, the Go
// version and flags: what a build of the module depends on.
func moduleKey(module string, flags ...string) (string, error) {
	h := sha256.New()
	for _, name := range []string{"go.mod", "go.sum"} {
		b, err := os.ReadFile(filepath.Join(module, name))
		if err != nil {
			return "", fmt.Errorf("read %s: %w", name, err)
		}
		h.Write(b)
	}
	h.Write([]byte(runtime.Version() + strings.Join(slices.Concat(toolGCFlags, flags), " ")))
	return hex.EncodeToString(h.Sum(nil))[:16], nil
}

// CLIToolsPin fails tb unless the module testenv/clitools requires each "module version" of
// pins: the versions the tests and docs name are the ones the tests run.
func CLIToolsPin(tb testing.TB, pins ...string) {
	tb.Helper()
	module, err := moduleDir("clitools")
	if err != nil {
		tb.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(module, "go.mod"))
	if err != nil {
		tb.Fatal(err)
	}
	var required []string
	for _, line := range strings.Split(string(raw), "\n") {
		if f := strings.Fields(line); len(f) >= 2 {
			required = append(required, f[0]+" "+f[1])
		}
	}
	for _, pin := range pins {
		if !slices.Contains(required, pin) {
			tb.Errorf("%s does not require %s: keep the version the tests name and the one they run equal", filepath.Join(module, "go.mod"), pin)
		}
	}
}
