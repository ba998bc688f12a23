package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/configbutler/gitops-reverser/crds"
	"github.com/configbutler/gitops-reverser/testenv"
)

var (
	// planes lends each test that needs a cluster one of its own, so three run side by side: the
	// daemons they start watch every namespace and register cluster-wide webhooks, and would act
	// on each other's objects in a shared one. Most of a test's time is waiting on the daemon's
	// intervals, which overlaps.
	planes    = testenv.NewPlanes(3, forgetConfiguration)
	daemonBin string
)

// forgetConfiguration deletes, in every namespace, what tells a daemon what to do: proposals,
// receivers, rules, destinations and repositories. The next test on the plane starts without an
// earlier one's, whose remotes are gone (deleting a namespace does not do it: no controller
// empties it). The rest stays, as it did when the tests shared one plane in file order.
func forgetConfiguration(cp *testenv.ControlPlane) error {
	ctx := context.Background()
	dyn, err := dynamic.NewForConfig(cp.AdminConfig())
	if err != nil {
		return err
	}
	for _, gvr := range []schema.GroupVersionResource{crds.Proposals, crds.Receivers, crds.ClusterWatchRules, crds.WatchRules, crds.GitDestinations, crds.GitRepoConfigs, crds.RemoteClusters} {
		list, err := dyn.Resource(gvr).List(ctx, metav1.ListOptions{})
		if apierrors.IsNotFound(err) { // the test installed no CRDs
			continue
		}
		if err != nil {
			return fmt.Errorf("list %s: %w", gvr.Resource, err)
		}
		for _, u := range list.Items {
			err := dyn.Resource(gvr).Namespace(u.GetNamespace()).Delete(ctx, u.GetName(), metav1.DeleteOptions{})
			if err != nil && !apierrors.IsNotFound(err) {
				return fmt.Errorf("delete %s %s/%s: %w", gvr.Resource, u.GetNamespace(), u.GetName(), err)
			}
		}
	}
	return nil
}

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "daemon-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	daemonBin = filepath.Join(dir, "gitops-reverser")
	// Built as the image and make build build it: static and stripped, so the figures of make
	// bench are those of the binary users run.
	build := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-o", daemonBin, "..")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "build daemon: %v\n%s", err, out)
		os.Exit(1)
	}
	code := testenv.RunPlanesNoLeaks(m, planes, testenv.LeakIgnores()...)
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

func TestDaemonServesHealthReadyAndMetricsThenStopsOnSIGTERM(t *testing.T) {
	cp := planes.Lend(t)
	dir := t.TempDir()
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := cp.WriteKubeconfig(kubeconfig); err != nil {
		t.Fatal(err)
	}
	metricsAddr, healthAddr := testenv.FreeAddr(t), testenv.FreeAddr(t)
	configFile := filepath.Join(dir, "config.yaml")
	config := fmt.Sprintf("metrics-bind-address: %q\nlog-format: json\nwork-dir: %q\n", metricsAddr, dir)
	if err := os.WriteFile(configFile, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	webhookAddr := testenv.FreeAddr(t)
	ensureDaemonNamespace(t)
	d := testenv.StartDaemon(t, testenv.DaemonConfig{Binary: daemonBin, Args: []string{"--config", configFile, "--kubeconfig", kubeconfig,
		"--health-probe-bind-address", healthAddr, "--webhook-bind-address", webhookAddr, "--webhook-url", "https://" + webhookAddr}})

	d.WaitForStatus(t, "http://"+healthAddr+"/healthz", http.StatusOK)
	d.WaitForStatus(t, "http://"+healthAddr+"/readyz", http.StatusOK)
	body := d.WaitForStatus(t, "http://"+metricsAddr+"/metrics", http.StatusOK)
	for _, want := range []string{"gitops_reverser_build_info", "go_goroutines", "process_resident_memory_bytes"} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}

	// Ready means the daemon's own code path installed the CRDs and they are established.
	ext, err := apiextensionsclient.NewForConfig(cp.AdminConfig())
	if err != nil {
		t.Fatal(err)
	}
	for _, gvr := range []string{crds.GitRepoConfigs.Resource, crds.GitDestinations.Resource, crds.WatchRules.Resource, crds.ClusterWatchRules.Resource} {
		crd, err := ext.ApiextensionsV1().CustomResourceDefinitions().Get(context.Background(), gvr+"."+crds.Group, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("CRD %s after ready: %v", gvr, err)
		}
		if len(crd.ManagedFields) == 0 || crd.ManagedFields[0].Manager != crds.FieldManager {
			t.Errorf("CRD %s not applied by field manager %q: %+v", gvr, crds.FieldManager, crd.ManagedFields)
		}
		established := false
		for _, c := range crd.Status.Conditions {
			established = established || (c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue)
		}
		if !established {
			t.Errorf("CRD %s not established while the daemon reports ready", gvr)
		}
	}

	d.Stop(t)
	// log-format from the config file applied: every line is JSON.
	for _, line := range strings.Split(strings.TrimSpace(d.Output()), "\n") {
		if !json.Valid([]byte(line)) {
			t.Errorf("log line is not JSON: %s", line)
		}
	}
}

func TestDaemonBinaryRejectsBadConfigWithExitCode2(t *testing.T) {
	dir := t.TempDir()
	cases := []struct {
		name, file string
		args       []string
		wantText   string
	}{
		{name: "unknown key", file: "work-dirr: /tmp\n", wantText: `unknown key "work-dirr"`},
		{name: "invalid value", file: "git-batch-max-bytes-mib: 0\n", wantText: "git-batch-max-bytes-mib"},
		{name: "invalid flag", args: []string{"--log-level", "chatty"}, wantText: "log-level"},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			args := tc.args
			if tc.file != "" {
				path := filepath.Join(dir, fmt.Sprintf("bad-%d.yaml", i))
				if err := os.WriteFile(path, []byte(tc.file), 0o600); err != nil {
					t.Fatal(err)
				}
				args = append(args, "--config", path)
			}
			d := testenv.StartDaemon(t, testenv.DaemonConfig{Binary: daemonBin, Args: args})
			err := d.Wait(t, time.Minute)
			var exitErr *exec.ExitError
			if !errors.As(err, &exitErr) || exitErr.ExitCode() != 2 {
				t.Fatalf("err = %v, want exit code 2; output:\n%s", err, d.Output())
			}
			if !strings.Contains(d.Output(), tc.wantText) {
				t.Errorf("output does not name %q:\n%s", tc.wantText, d.Output())
			}
		})
	}
}

// TestDaemonWaitsForCRDsItDoesNotInstall: with --install-crds=false (Helm owns the CRDs) the
// daemon does not apply them; it becomes ready once they exist.
func TestDaemonWaitsForCRDsItDoesNotInstall(t *testing.T) {
	cp := planes.Lend(t)
	if err := crds.Install(context.Background(), cp.AdminConfig(), discardLogger()); err != nil {
		t.Fatal(err)
	}
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := cp.WriteKubeconfig(kubeconfig); err != nil {
		t.Fatal(err)
	}
	ensureDaemonNamespace(t)
	healthAddr, webhookAddr := testenv.FreeAddr(t), testenv.FreeAddr(t)
	// At debug level an apply logs "crd created", "crd updated" or "crd unchanged" for each CRD.
	d := testenv.StartDaemon(t, testenv.DaemonConfig{Binary: daemonBin, Args: []string{"--kubeconfig", kubeconfig, "--work-dir", t.TempDir(),
		"--install-crds=false", "--log-level=debug", "--metrics-bind-address", testenv.FreeAddr(t), "--health-probe-bind-address", healthAddr,
		"--webhook-bind-address", webhookAddr, "--webhook-url", "https://" + webhookAddr}})
	d.WaitForStatus(t, "http://"+healthAddr+"/readyz", http.StatusOK)
	d.Stop(t) // the log is complete, and no longer written to
	for _, applied := range []string{"crd created", "crd updated", "crd unchanged"} {
		if strings.Contains(d.Output(), applied) {
			t.Errorf("the daemon applied CRDs although told not to (%q):\n%s", applied, d.Output())
		}
	}
	if !strings.Contains(d.Output(), "crd established") {
		t.Errorf("the daemon did not wait for the CRDs:\n%s", d.Output())
	}
}
