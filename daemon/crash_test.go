package daemon

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"slices"
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
	cp := planes.Of(t)
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

// ensureDaemonNamespace creates the daemon's own namespace, as an install would; the webhook keeps
// its certificate Secret there.
func ensureDaemonNamespace(t testing.TB) {
	t.Helper()
	kube := kubernetes.NewForConfigOrDie(planes.Of(t).AdminConfig())
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "gitops-reverser-system"}}
	if _, err := kube.CoreV1().Namespaces().Create(context.Background(), ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}

// startDaemon runs the built daemon against the test control plane with its listeners on free
// loopback ports; extra flags come last, so they override.
func startDaemon(t testing.TB, workDir string, extra ...string) *testenv.Daemon {
	t.Helper()
	ensureDaemonNamespace(t)
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := planes.Of(t).WriteKubeconfig(kubeconfig); err != nil {
		t.Fatal(err)
	}
	metricsAddr, webhookAddr := testenv.FreeAddr(t), testenv.FreeAddr(t)
	args := append([]string{"--kubeconfig", kubeconfig, "--work-dir", workDir, "--metrics-bind-address", metricsAddr,
		"--health-probe-bind-address", testenv.FreeAddr(t), "--discovery-refresh", "10s",
		"--webhook-bind-address", webhookAddr, "--webhook-url", "https://" + webhookAddr,
		"--peer-address", webhookAddr}, extra...) // the peer address matters only with --shards=auto
	return testenv.StartDaemon(t, testenv.DaemonConfig{Binary: daemonBin, Args: args, MetricsAddr: metricsAddr})
}

// metricAtLeast is a condition for testenv.Eventually: the daemon's sample name has reached want.
func metricAtLeast(t testing.TB, d *testenv.Daemon, name string, want float64) func() (bool, string) {
	return func() (bool, string) {
		v := d.Metric(t, name)
		return v >= want, fmt.Sprintf("%s = %v", name, v)
	}
}

// remoteHas is a condition for testenv.Eventually: the branch main of repository "state" holds file.
func remoteHas(srv *testenv.GitServer, file string) func() (bool, string) {
	return func() (bool, string) {
		files, err := srv.Files("state", "main")
		if err != nil {
			return false, err.Error()
		}
		return slices.Contains(files, file), fmt.Sprintf("%d files, not %s", len(files), file)
	}
}

// TestKilledBeforePushConvergesAfterRestart kills the daemon with SIGKILL after it has taken a
// change in but before it pushed it (the batch waits an hour), restarts it, and expects the remote
// to catch up from the cluster, the source of truth.
func TestKilledBeforePushConvergesAfterRestart(t *testing.T) {
	planes.Lend(t)
	ns := "crash-test"
	srv, kube := mirrorSetup(t, ns)
	workDir := t.TempDir()
	slow := startDaemon(t, workDir, "--git-batch-max-wait-sec", "3600", "--git-batch-quiet-ms", "3600000")
	testenv.Eventually(t, time.Minute, "daemon watching", metricAtLeast(t, slow, "gitops_reverser_watches", 1), slow.FailFast())

	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "survivor", Namespace: ns}, Data: map[string]string{"k": "v"}}
	if _, err := kube.CoreV1().ConfigMaps(ns).Create(context.Background(), cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, time.Minute, "change taken in", metricAtLeast(t, slow, "gitops_reverser_objects_scanned_total", 1), slow.FailFast())
	slow.Kill(t)
	want := "live/" + ns + "/configmaps/survivor.yaml"
	if files, _ := srv.Files("state", "main"); slices.Contains(files, want) {
		t.Fatalf("the change was pushed before the kill; the test proves nothing: %v", files)
	}

	restarted := startDaemon(t, workDir, "--git-batch-quiet-ms", "100")
	testenv.Eventually(t, time.Minute, "remote converges after restart", remoteHas(srv, want), restarted.FailFast())
	content, err := srv.ReadFile("state", "main", want)
	if err != nil || !strings.Contains(string(content), "name: survivor") {
		t.Fatalf("file content %q, err %v", content, err)
	}
}

func discardLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }
