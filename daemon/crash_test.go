package daemon

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/configbutler/gitops-reverser/crds"
	"github.com/configbutler/gitops-reverser/testenv"
)

// mirrorSetup creates a Git repository and, in namespace ns, the credentials Secret, GitRepoConfig,
// GitDestination (baseFolder "live") and a WatchRule for ConfigMaps pointing at it.
func mirrorSetup(t testing.TB, ns string) (*testenv.GitServer, *kubernetes.Clientset) {
	t.Helper()
	ctx := context.Background()
	srv := testenv.MustGitServer(t, "daemon", "pw", "state")
	kube := kubernetes.NewForConfigOrDie(cp.AdminConfig())
	dyn := dynamic.NewForConfigOrDie(cp.AdminConfig())
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "git", Namespace: ns},
		StringData: map[string]string{"username": "daemon", "password": "pw"}}
	if _, err := kube.CoreV1().Secrets(ns).Create(ctx, secret, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The CRDs must exist before their objects; the daemon would install them itself.
	if err := crds.Install(ctx, cp.AdminConfig(), discardLogger()); err != nil {
		t.Fatal(err)
	}
	objects := []struct {
		gvr schema.GroupVersionResource
		obj any
	}{
		{crds.GitRepoConfigs, &crds.GitRepoConfig{ObjectMeta: metav1.ObjectMeta{Name: "repo", Namespace: ns},
			Spec: crds.GitRepoConfigSpec{RepoURL: srv.RepoURL("state"), AllowedBranches: []string{"main"}, SecretRef: &crds.LocalReference{Name: "git"}}}},
		{crds.GitDestinations, &crds.GitDestination{ObjectMeta: metav1.ObjectMeta{Name: "dest", Namespace: ns},
			Spec: crds.GitDestinationSpec{RepoRef: crds.NamespacedReference{Name: "repo"}, Branch: "main", BaseFolder: "live"}}},
		{crds.WatchRules, &crds.WatchRule{ObjectMeta: metav1.ObjectMeta{Name: "cms", Namespace: ns},
			Spec: crds.WatchRuleSpec{DestinationRef: crds.NamespacedReference{Name: "dest"}, Rules: []crds.ResourceRule{{Resources: []string{"configmaps"}}}}}},
	}
	for _, o := range objects {
		u, err := crds.ToUnstructured(o.obj)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := dyn.Resource(o.gvr).Namespace(ns).Create(ctx, u, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		for _, gvr := range []schema.GroupVersionResource{crds.WatchRules, crds.GitDestinations, crds.GitRepoConfigs} {
			_ = dyn.Resource(gvr).Namespace(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})
		}
	})
	return srv, kube
}

// daemonProcess is the built daemon running against the test control plane.
type daemonProcess struct {
	cmd         *exec.Cmd
	metricsAddr string
	exited      chan struct{}
	stderr      bytes.Buffer
}

// ensureDaemonNamespace creates the daemon's own namespace, as an install would; the webhook keeps
// its certificate Secret there.
func ensureDaemonNamespace(t testing.TB) {
	t.Helper()
	kube := kubernetes.NewForConfigOrDie(cp.AdminConfig())
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "gitops-reverser-system"}}
	if _, err := kube.CoreV1().Namespaces().Create(context.Background(), ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}

func startDaemon(t testing.TB, workDir string, extra ...string) *daemonProcess {
	t.Helper()
	ensureDaemonNamespace(t)
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := cp.WriteKubeconfig(kubeconfig); err != nil {
		t.Fatal(err)
	}
	d := &daemonProcess{metricsAddr: freeAddr(t), exited: make(chan struct{})}
	webhookAddr := freeAddr(t)
	args := append([]string{"--kubeconfig", kubeconfig, "--work-dir", workDir, "--metrics-bind-address", d.metricsAddr,
		"--health-probe-bind-address", freeAddr(t), "--discovery-refresh", "10s",
		"--webhook-bind-address", webhookAddr, "--webhook-url", "https://" + webhookAddr}, extra...)
	d.cmd = exec.Command(daemonBin, args...)
	d.cmd.Stderr = &d.stderr
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = d.cmd.Wait(); close(d.exited) }()
	t.Cleanup(func() {
		_ = d.cmd.Process.Kill()
		<-d.exited
		if t.Failed() {
			t.Logf("daemon log:\n%s", d.stderr.String())
		}
	})
	return d
}

// metric scrapes one counter or gauge from the daemon's /metrics.
func (d *daemonProcess) metric(t testing.TB, name string) float64 {
	t.Helper()
	body := pollStatus(t, "http://"+d.metricsAddr+"/metrics", 200, d.exited)
	for _, line := range strings.Split(body, "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			f, _ := strconv.ParseFloat(v, 64)
			return f
		}
	}
	return 0
}

func waitUntil(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within a minute", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestKilledBeforePushConvergesAfterRestart kills the daemon with SIGKILL after it has taken a
// change in but before it pushed it (the batch waits an hour), restarts it, and expects the remote
// to catch up from the cluster, the source of truth.
func TestKilledBeforePushConvergesAfterRestart(t *testing.T) {
	ns := "crash-test"
	srv, kube := mirrorSetup(t, ns)
	workDir := t.TempDir()
	slow := startDaemon(t, workDir, "--git-batch-max-wait-sec", "3600", "--git-batch-quiet-ms", "3600000")
	waitUntil(t, "daemon watching", func() bool { return slow.metric(t, "gitops_reverser_watches") >= 1 })

	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "survivor", Namespace: ns}, Data: map[string]string{"k": "v"}}
	if _, err := kube.CoreV1().ConfigMaps(ns).Create(context.Background(), cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "change taken in", func() bool { return slow.metric(t, "gitops_reverser_objects_scanned_total") >= 1 })
	if err := slow.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-slow.exited
	want := "live/" + ns + "/configmaps/survivor.yaml"
	if files, _ := srv.Files("state", "main"); slices.Contains(files, want) {
		t.Fatalf("the change was pushed before the kill; the test proves nothing: %v", files)
	}

	startDaemon(t, workDir, "--git-batch-quiet-ms", "100")
	waitUntil(t, "remote converges after restart", func() bool {
		files, _ := srv.Files("state", "main")
		return slices.Contains(files, want)
	})
	content, err := srv.ReadFile("state", "main", want)
	if err != nil || !strings.Contains(string(content), "name: survivor") {
		t.Fatalf("file content %q, err %v", content, err)
	}
}

func discardLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }
