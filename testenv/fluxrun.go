package testenv

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// kubectlTimeout bounds one kubectl command of the Flux harness.
const kubectlTimeout = 2 * time.Minute

// FluxControllers are Flux's source-controller and kustomize-controller running as processes of
// the test against a control plane, as the admin, watching every namespace, without leader
// election, every address on loopback.
type FluxControllers struct {
	Source, Kustomize *Daemon
	// ArtifactURL is http://127.0.0.1:port, where source-controller serves the artifacts
	// (tarballs of a GitRepository's files) that kustomize-controller fetches.
	ArtifactURL string
	// Kubeconfig is the admin's kubeconfig the controllers (and Kubectl) use.
	Kubeconfig string

	kubectl string
}

// StartFlux installs Flux's CRDs on cp, waits until they are established, starts both
// controllers and waits until they answer their readiness probes. They are killed when tb ends;
// if tb failed, their output and Flux's objects are logged first.
func StartFlux(tb testing.TB, cp *ControlPlane) *FluxControllers {
	tb.Helper()
	bins := Flux(tb)
	kube, err := EnsureBinaries(context.Background())
	if err != nil {
		tb.Fatal(err)
	}
	dir := tb.TempDir()
	f := &FluxControllers{Kubeconfig: filepath.Join(dir, "kubeconfig"), kubectl: kube.Kubectl}
	if err := cp.WriteKubeconfig(f.Kubeconfig); err != nil {
		tb.Fatal(err)
	}
	f.Kubectl(tb, "apply", "--server-side", "-f", bins.CRDs)
	f.Kubectl(tb, "wait", "--for=condition=Established", "--timeout=1m", "-f", bins.CRDs)

	storageDir := filepath.Join(dir, "storage") // source-controller wants it to exist
	if err := os.Mkdir(storageDir, 0o755); err != nil {
		tb.Fatal(err)
	}
	storage := FreeAddr(tb)
	f.ArtifactURL = "http://" + storage
	env := []string{"KUBECONFIG=" + f.Kubeconfig}
	sourceHealth, kustomizeHealth := FreeAddr(tb), FreeAddr(tb)
	f.Source = StartDaemon(tb, DaemonConfig{Binary: bins.SourceController, Env: env,
		Args: append(fluxArgs(FreeAddr(tb), sourceHealth),
			"--storage-path="+storageDir,
			"--storage-addr="+storage, "--storage-adv-addr="+storage)})
	f.Kustomize = StartDaemon(tb, DaemonConfig{Binary: bins.KustomizeController, Env: env,
		Args: fluxArgs(FreeAddr(tb), kustomizeHealth)})
	tb.Cleanup(func() { // before the controllers are killed
		if tb.Failed() {
			out, err := f.kubectlOutput(nil, "get", "gitrepositories,kustomizations", "--all-namespaces", "-o", "yaml")
			tb.Logf("Flux's objects when the test ended (%v):\n%s", err, out)
		}
	})
	f.Source.WaitForStatus(tb, "http://"+sourceHealth+"/readyz", 200)
	f.Kustomize.WaitForStatus(tb, "http://"+kustomizeHealth+"/readyz", 200)
	return f
}

// fluxArgs are the flags both controllers take: metrics and probes on loopback, no leader
// election. Every namespace is watched (--watch-all-namespaces defaults to true).
func fluxArgs(metrics, health string) []string {
	return []string{"--metrics-addr=" + metrics, "--health-addr=" + health, "--enable-leader-election=false"}
}

// FailFast is the PollOption that ends a wait at once when either controller has exited.
func (f *FluxControllers) FailFast() PollOption {
	return FailFast(func() error { return errors.Join(f.Source.trouble(), f.Kustomize.trouble()) })
}

// Kubectl runs kubectl with the controllers' kubeconfig and returns its standard output; it
// fails tb when kubectl fails.
func (f *FluxControllers) Kubectl(tb testing.TB, args ...string) string {
	tb.Helper()
	out, err := f.kubectlOutput(nil, args...)
	if err != nil {
		tb.Fatal(err)
	}
	return out
}

// Apply applies the YAML documents manifests as kubectl apply --server-side does (field manager
// kubectl), failing tb when the apiserver refuses one.
func (f *FluxControllers) Apply(tb testing.TB, manifests string) {
	tb.Helper()
	if _, err := f.kubectlOutput([]byte(manifests), "apply", "--server-side", "-f", "-"); err != nil {
		tb.Fatal(err)
	}
}

// kubectlOutput runs kubectl with stdin (when not nil) and returns its standard output.
func (f *FluxControllers) kubectlOutput(stdin []byte, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), kubectlTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, f.kubectl, append([]string{"--kubeconfig=" + f.Kubeconfig}, args...)...)
	cmd.Env = append(os.Environ(), "HOME="+filepath.Dir(f.Kubeconfig)) // no cache in the user's home
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return string(out), fmt.Errorf("kubectl %s: %w\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return string(out), nil
}
