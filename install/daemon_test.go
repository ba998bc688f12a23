package install

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/configbutler/gitops-reverser/testenv"
)

// converge bounds each wait for the shipped daemon: generous, as the machine may be shared.
const converge = 2 * time.Minute

// shippedDaemon is the daemon binary running with deploy/config.yaml's config file.
type shippedDaemon struct {
	*testenv.Daemon
	healthAddr string
	webhookURL string
}

// shippedPod is the Pod the shipped daemon stands for: deploy/deployment.yaml gives the daemon its
// Pod's name through the environment, and the leader labels that Pod.
const shippedPod = "gitops-reverser-shipped"

// startShippedDaemon runs the daemon as the shipped ServiceAccount, through api, with the config
// file of deploy/config.yaml, as Pod shippedPod; flags move its listeners to free loopback ports (flags override the
// file) and point the apiserver at the webhook on loopback, since it runs outside the cluster.
// Every wait on it fails at once when the apiserver refuses one of its requests: the daemon may
// not say so itself.
func startShippedDaemon(t testing.TB, api *apiRecorder) *shippedDaemon {
	t.Helper()
	return startShippedDaemonWith(t, api, api.kubeconfig(t))
}

// startShippedDaemonWith is startShippedDaemon with the daemon's own kubeconfig, which must lead
// through api.
func startShippedDaemonWith(t testing.TB, api *apiRecorder, kubeconfig string) *shippedDaemon {
	t.Helper()
	var config corev1.ConfigMap
	object(t, readObjects(t, "config.yaml"), "ConfigMap", "gitops-reverser-config", &config)
	configFile := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(configFile, []byte(config.Data["config.yaml"]), 0o600); err != nil {
		t.Fatal(err)
	}
	webhookAddr, metricsAddr := testenv.FreeAddr(t), testenv.FreeAddr(t)
	d := &shippedDaemon{healthAddr: testenv.FreeAddr(t), webhookURL: "https://" + webhookAddr}
	d.Daemon = testenv.StartDaemon(t, testenv.DaemonConfig{
		Binary: daemonBin,
		Args: []string{"--config", configFile, "--kubeconfig", kubeconfig,
			"--namespace", systemNamespace, "--install-crds=true", "--work-dir", t.TempDir(),
			"--webhook-bind-address", webhookAddr, "--webhook-url", d.webhookURL,
			"--metrics-bind-address", metricsAddr, "--health-probe-bind-address", d.healthAddr,
			"--git-batch-quiet-ms", "200", "--discovery-refresh", "10s"},
		Env:         []string{"GITOPS_REVERSER_POD_NAME=" + shippedPod},
		MetricsAddr: metricsAddr,
		Abort: func() error {
			if refused := api.refused(); len(refused) > 0 {
				return fmt.Errorf("the apiserver refused %v", refused)
			}
			return nil
		},
	})
	return d
}

// waitWebhookCalled writes ConfigMaps as the admin until the daemon's webhook has recorded one:
// the apiserver takes a moment to use a new ValidatingWebhookConfiguration.
func waitWebhookCalled(t testing.TB, d *shippedDaemon, kube kubernetes.Interface) {
	t.Helper()
	i := 0
	testenv.Eventually(t, converge, "the apiserver calling the webhook", func() (bool, string) {
		i++
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("probe-%d", i), Namespace: workloadNamespace}}
		if _, err := kube.CoreV1().ConfigMaps(workloadNamespace).Create(context.Background(), cm, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
		return d.Metric(t, `gitops_reverser_admission_reviews_total{result="recorded"}`) > 0, fmt.Sprintf("%d probes written", i)
	}, d.FailFast())
}
