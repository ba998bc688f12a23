package testenv

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// FluxBinaries are Flux's source-controller and kustomize-controller at the version the module
// testenv/flux pins, and the CRDs of the same modules.
type FluxBinaries struct {
	SourceController, KustomizeController string
	// CRDs is a folder of the YAML files of every CRD the two controllers serve (GitRepository,
	// Kustomization, and the other sources source-controller watches), as their modules ship them
	// in config/crd/bases.
	CRDs string
}

// fluxControllers are the main packages of the module testenv/flux, each built to the file named
// after its last path element.
var fluxControllers = []string{
	"github.com/fluxcd/source-controller",
	"github.com/fluxcd/kustomize-controller",
}

// Flux returns the Flux controllers, building them once (a few minutes) if the tools cache lacks
// them; it fails tb when they cannot be built.
func Flux(tb testing.TB) FluxBinaries {
	tb.Helper()
	dir := toolOnce(tb, "flux", func() (string, error) {
		bins, err := EnsureFlux()
		return filepath.Dir(bins.SourceController), err
	})
	return fluxIn(dir)
}

func fluxIn(dir string) FluxBinaries {
	return FluxBinaries{
		SourceController:    filepath.Join(dir, "source-controller"),
		KustomizeController: filepath.Join(dir, "kustomize-controller"),
		CRDs:                filepath.Join(dir, "crds"),
	}
}

// EnsureFlux is Flux outside a test (the Makefile's later-tools): the controllers and their CRDs
// in the tools cache's flux-<key> folder, whose key changes with the module's go.mod and go.sum,
// the Go version and the compiler flags, built there when missing. One go build compiles both,
// unoptimised (Unoptimised), so the packages they share (controller-runtime, client-go, Flux's
// own) compile once; the CRDs are copied from the same modules in the module cache.
func EnsureFlux() (FluxBinaries, error) {
	module, err := moduleDir("flux")
	if err != nil {
		return FluxBinaries{}, err
	}
	key, err := moduleKey(module, Unoptimised...)
	if err != nil {
		return FluxBinaries{}, err
	}
	// The CRDs first, the controllers after: the last file's presence says the build finished.
	files := []string{"crds"}
	for _, pkg := range fluxControllers {
		files = append(files, binaryName(pkg))
	}
	dir, err := buildCached("flux-"+key, files, func(tmp string) error {
		ctx := context.Background()
		if err := goBuildIn(ctx, module, tmp+string(filepath.Separator), Unoptimised, fluxControllers...); err != nil {
			return err
		}
		return copyFluxCRDs(ctx, module, filepath.Join(tmp, "crds"))
	})
	if err != nil {
		return FluxBinaries{}, err
	}
	return fluxIn(dir), nil
}

// copyFluxCRDs copies the CRD files of the controllers' modules, as the module testenv/flux in
// folder module requires them, into the folder to.
func copyFluxCRDs(ctx context.Context, module, to string) error {
	args := append([]string{"list", "-m", "-f", "{{.Dir}}"}, fluxControllers...)
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = module
	out, err := cmd.Output()
	if err != nil {
		return fmt.Errorf("find the Flux modules (go list -m): %w", err)
	}
	if err := os.MkdirAll(to, 0o755); err != nil {
		return fmt.Errorf("create the CRD folder: %w", err)
	}
	for _, dir := range strings.Fields(string(out)) {
		files, err := filepath.Glob(filepath.Join(dir, "config", "crd", "bases", "*.yaml"))
		if err == nil && len(files) == 0 {
			err = fmt.Errorf("no CRDs in %s", dir)
		}
		if err != nil {
			return fmt.Errorf("find the Flux CRDs: %w", err)
		}
		for _, file := range files {
			b, err := os.ReadFile(file)
			if err == nil {
				err = os.WriteFile(filepath.Join(to, filepath.Base(file)), b, 0o644)
			}
			if err != nil {
				return fmt.Errorf("copy a Flux CRD: %w", err)
			}
		}
	}
	return nil
}
