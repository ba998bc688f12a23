package install

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/configbutler/gitops-reverser/testenv"
)

// shippedDaemon is the daemon binary running with deploy/config.yaml's config file.
type shippedDaemon struct {
	api                     *apiRecorder
	cmd                     *exec.Cmd
	exited                  chan struct{}
	exitErr                 error
	log                     *syncBuffer
	metricsAddr, healthAddr string
	webhookURL              string
}

// startShippedDaemon runs the daemon as the shipped ServiceAccount, through api, with the config
// file of deploy/config.yaml; flags move its listeners to free loopback ports (flags override the
// file) and point the apiserver at the webhook on loopback, since it runs outside the cluster.
func startShippedDaemon(t testing.TB, api *apiRecorder) *shippedDaemon {
	t.Helper()
	var config corev1.ConfigMap
	object(t, readObjects(t, "config.yaml"), "ConfigMap", "gitops-reverser-config", &config)
	configFile := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(configFile, []byte(config.Data["config.yaml"]), 0o600); err != nil {
		t.Fatal(err)
	}
	webhookAddr := freeAddr(t)
	d := &shippedDaemon{api: api, exited: make(chan struct{}), log: &syncBuffer{}, metricsAddr: freeAddr(t), healthAddr: freeAddr(t),
		webhookURL: "https://" + webhookAddr}
	d.cmd = exec.Command(daemonBin, "--config", configFile, "--kubeconfig", api.kubeconfig(t),
		"--namespace", systemNamespace, "--install-crds=true", "--work-dir", t.TempDir(),
		"--webhook-bind-address", webhookAddr, "--webhook-url", d.webhookURL,
		"--metrics-bind-address", d.metricsAddr, "--health-probe-bind-address", d.healthAddr,
		"--git-batch-quiet-ms", "200", "--discovery-refresh", "10s")
	d.cmd.Stdout, d.cmd.Stderr = d.log, d.log
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { d.exitErr = d.cmd.Wait(); close(d.exited) }()
	t.Cleanup(func() {
		_ = d.cmd.Process.Kill()
		<-d.exited
		if t.Failed() {
			t.Logf("daemon log:\n%s", d.log.String())
		}
	})
	return d
}

// stop sends SIGTERM and expects a clean exit within a minute.
func (d *shippedDaemon) stop(t testing.TB) {
	t.Helper()
	if err := d.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-d.exited:
	case <-time.After(time.Minute):
		t.Fatal("the daemon did not stop within a minute of SIGTERM")
	}
	if d.exitErr != nil {
		t.Errorf("daemon exit after SIGTERM: %v", d.exitErr)
	}
}

// metric scrapes one sample from the daemon's /metrics; a missing sample is 0.
func (d *shippedDaemon) metric(t testing.TB, name string) float64 {
	t.Helper()
	resp, err := http.Get("http://" + d.metricsAddr + "/metrics")
	if err != nil {
		return 0
	}
	defer func() { _ = resp.Body.Close() }()
	body, _ := io.ReadAll(resp.Body)
	for _, line := range strings.Split(string(body), "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			f, _ := strconv.ParseFloat(v, 64)
			return f
		}
	}
	return 0
}

// waitFor polls cond until it holds, failing after two minutes, when the daemon exits, or at once
// when the apiserver refuses one of its requests (the daemon may not say so itself).
func waitFor(t testing.TB, d *shippedDaemon, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for !cond() {
		select {
		case <-d.exited:
			t.Fatalf("waiting for %s: the daemon exited: %v", what, d.exitErr)
		default:
		}
		if refused := d.api.refused(); len(refused) > 0 {
			t.Fatalf("waiting for %s: the apiserver refused %v", what, refused)
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within two minutes", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func pollHTTP(t testing.TB, d *shippedDaemon, url string) {
	t.Helper()
	waitFor(t, d, url+" answering 200", func() bool {
		resp, err := http.Get(url)
		if err != nil {
			return false
		}
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
}

// waitWebhookCalled writes ConfigMaps as the admin until the daemon's webhook has recorded one:
// the apiserver takes a moment to use a new ValidatingWebhookConfiguration.
func waitWebhookCalled(t testing.TB, d *shippedDaemon, kube kubernetes.Interface) {
	t.Helper()
	i := 0
	waitFor(t, d, "the apiserver calling the webhook", func() bool {
		i++
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("probe-%d", i), Namespace: workloadNamespace}}
		if _, err := kube.CoreV1().ConfigMaps(workloadNamespace).Create(context.Background(), cm, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
		return d.metric(t, `gitops_reverser_admission_reviews_total{result="recorded"}`) > 0
	})
}

func freeAddr(t testing.TB) string { return testenv.FreeAddr(t) }

// syncBuffer is a bytes.Buffer safe to read while the daemon process writes its log into it.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
