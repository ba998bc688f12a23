package daemon

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/configbutler/gitops-reverser/gitops"
	"github.com/configbutler/gitops-reverser/testenv"
)

// localDaemon is the daemon as a user runs it on a laptop: default flags except the kubeconfig,
// loopback listeners, the webhook URL and namespace, and an environment outside any cluster
// whose home and cache directory are under home.
type localDaemon struct {
	*testenv.Daemon
	healthAddr string
}

func startLocalDaemon(t *testing.T, home, namespace string, withWebhookURL bool) *localDaemon {
	t.Helper()
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := planes.Of(t).WriteKubeconfig(kubeconfig); err != nil {
		t.Fatal(err)
	}
	metricsAddr, healthAddr, webhookAddr := testenv.FreeAddr(t), testenv.FreeAddr(t), testenv.FreeAddr(t)
	args := []string{"--kubeconfig", kubeconfig, "--namespace", namespace,
		"--metrics-bind-address", metricsAddr, "--health-probe-bind-address", healthAddr, "--webhook-bind-address", webhookAddr}
	if withWebhookURL {
		args = append(args, "--webhook-url", "https://"+webhookAddr)
	}
	env := []string{"HOME=" + home, "XDG_CACHE_HOME=" + filepath.Join(home, "cache"), "KUBERNETES_SERVICE_HOST=", "KUBERNETES_SERVICE_PORT="}
	d := testenv.StartDaemon(t, testenv.DaemonConfig{Binary: daemonBin, Args: args, Env: env, MetricsAddr: metricsAddr})
	return &localDaemon{Daemon: d, healthAddr: healthAddr}
}

// readyz returns /readyz's body, failing unless it answers 200.
func (d *localDaemon) readyz(t *testing.T) string {
	t.Helper()
	return d.WaitForStatus(t, "http://"+d.healthAddr+"/readyz", http.StatusOK)
}

// logged counts s in the daemon's output.
func (d *localDaemon) logged(s string) int { return strings.Count(d.Output(), s) }

var failedAttempts = regexp.MustCompile(`attribution degraded \((\d+) failed attempts`)

// TestMissingNamespaceDegradesAttributionAndTheMirrorRuns: the daemon's namespace does not exist,
// and the daemon may not create it, so attribution cannot keep its certificate Secret. The mirror must run anyway (changes credited
// to the bot), /readyz stays 200 and says what to do, the metric says degraded, and the warning is
// logged once however often the daemon retries. Once the namespace exists, attribution recovers
// by itself and a user's change is credited to that user.
func TestMissingNamespaceDegradesAttributionAndTheMirrorRuns(t *testing.T) {
	cp := planes.Lend(t)
	// A fresh namespace: other tests of this package share the control plane and create
	// gitops-reverser-system, so the default namespace may exist already.
	const daemonNS, ns = "degraded-daemon", "degraded-mirror"
	// The daemon creates its namespace when it may: here it may not, as with a kubeconfig that
	// may not create namespaces.
	lift := deny(t, "no-"+daemonNS, "", "namespaces", admissionregistrationv1.Create, fmt.Sprintf("object.metadata.name != %q", daemonNS),
		namespaceProbe(t, daemonNS))
	srv, kube := mirrorSetup(t, ns)
	home := t.TempDir()
	d := startLocalDaemon(t, home, daemonNS, true)
	ctx := context.Background()

	before := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "while-degraded", Namespace: ns}, Data: map[string]string{"k": "v"}}
	if _, err := kube.CoreV1().ConfigMaps(ns).Create(ctx, before, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, time.Minute, "the change mirrored while attribution is degraded", func() (bool, string) {
		got := authorOf(t, srv, "while-degraded")
		return got == gitops.Bot.Name, got
	}, d.FailFast())
	fix := "create the namespace " + daemonNS + " or set --namespace"
	testenv.Eventually(t, 2*time.Minute, "/readyz reporting three failed attempts", func() (bool, string) {
		body := d.readyz(t)
		m := failedAttempts.FindStringSubmatch(body)
		if m == nil {
			return false, body
		}
		n, _ := strconv.Atoi(m[1])
		return n >= 3, body
	}, d.FailFast())
	if body := d.readyz(t); !strings.HasPrefix(body, "ok\n") || !strings.Contains(body, fix) {
		t.Errorf("/readyz body %q, want ok and the fix %q", body, fix)
	}
	if got := d.Metric(t, `gitops_reverser_degraded{part="attribution"}`); got != 1 {
		t.Errorf("degraded{part=attribution} = %v, want 1", got)
	}
	if n := d.logged("attribution degraded"); n != 1 {
		t.Errorf("the degraded warning was logged %d times, want once", n)
	}
	if !strings.Contains(d.Output(), fix) {
		t.Error("the log does not say how to fix it")
	}

	lift()
	testenv.Eventually(t, time.Minute, "the namespace created, once the policy is lifted", func() (bool, string) {
		_, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: daemonNS}}, metav1.CreateOptions{})
		return err == nil || apierrors.IsAlreadyExists(err), fmt.Sprint(err)
	})
	testenv.Eventually(t, 2*time.Minute, "attribution recovered", func() (bool, string) {
		got := d.Metric(t, `gitops_reverser_degraded{part="attribution"}`)
		return got == 0, fmt.Sprint(got)
	}, d.FailFast())
	// Write-back keeps its Proposals' seal key in the same namespace, so it was degraded too and
	// recovers on its own backoff, a moment before or after attribution.
	testenv.Eventually(t, 2*time.Minute, "/readyz without a degraded part", func() (bool, string) {
		body := d.readyz(t)
		return !strings.Contains(body, "degraded"), body
	}, d.FailFast())
	if n := d.logged("attribution recovered"); n != 1 {
		t.Errorf("the recovery was logged %d times, want once", n)
	}

	grant(t, kube, ns, "alice")
	waitRegistered(t, d.Daemon, kube, ns)
	alice := userClient(cp.ImpersonatingConfig("alice"))
	byAlice := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "by-alice", Namespace: ns}, Data: map[string]string{"k": "v"}}
	if _, err := alice.CoreV1().ConfigMaps(ns).Create(ctx, byAlice, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, time.Minute, "alice credited for her change", func() (bool, string) {
		got := authorOf(t, srv, "by-alice")
		return got == "alice", got
	}, d.FailFast())

	workDir := filepath.Join(home, "cache", "gitops-reverser")
	entries, err := os.ReadDir(workDir)
	if err != nil || !slices.ContainsFunc(entries, func(e os.DirEntry) bool { return e.IsDir() }) {
		t.Errorf("the default work dir %s holds no clone (err %v): outside a cluster it must be the user's cache directory", workDir, err)
	}
}

// TestOutsideTheClusterWithoutWebhookURLIsDegradedForGood: a local daemon without --webhook-url
// cannot be reached by the apiserver, and no retry changes that. It says so once, with the flag to
// set, registers no webhook pointing at a Service that does not lead to it, and mirrors anyway.
func TestOutsideTheClusterWithoutWebhookURLIsDegradedForGood(t *testing.T) {
	planes.Lend(t)
	const daemonNS, ns = "no-webhook-url-daemon", "no-webhook-url-mirror"
	_, kube := mirrorSetup(t, ns)
	ctx := context.Background()
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: daemonNS}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	d := startLocalDaemon(t, t.TempDir(), daemonNS, false)
	testenv.Eventually(t, time.Minute, "the mirror watching", metricAtLeast(t, d.Daemon, "gitops_reverser_watches", 1), d.FailFast())

	body := d.readyz(t)
	for _, want := range []string{"attribution degraded (not retried)", "without --webhook-url", "set --webhook-url=https://<address the apiserver can reach>:"} {
		if !strings.Contains(body, want) {
			t.Errorf("/readyz body %q lacks %q", body, want)
		}
	}
	if got := d.Metric(t, `gitops_reverser_degraded{part="attribution"}`); got != 1 {
		t.Errorf("degraded{part=attribution} = %v, want 1", got)
	}
	if n := d.logged("attribution degraded"); n != 1 {
		t.Errorf("the degraded warning was logged %d times, want once", n)
	}
	secrets, err := kube.CoreV1().Secrets(daemonNS).List(ctx, metav1.ListOptions{FieldSelector: "type=" + string(corev1.SecretTypeTLS)})
	if err != nil || len(secrets.Items) != 0 {
		t.Errorf("the daemon made certificates nobody can use: %d TLS Secrets in %s (err %v)", len(secrets.Items), daemonNS, err)
	}
	vwc, err := kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, controllerName, metav1.GetOptions{})
	if err == nil {
		for _, hook := range vwc.Webhooks {
			if svc := hook.ClientConfig.Service; svc != nil && svc.Namespace == daemonNS {
				t.Errorf("registered a webhook at the Service %s/%s, which does not lead to this process", svc.Namespace, svc.Name)
			}
		}
	}
}
