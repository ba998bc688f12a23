package daemon

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/configbutler/gitops-reverser/testenv"
)

// TestTheWebhookIsRegisteredUnderItsServiceName: the daemon names its
// ValidatingWebhookConfiguration after its webhook Service (--webhook-service-name), so a second
// install in the cluster (another Helm release) registers its own instead of taking over the
// first one's, which would send the first install's admission requests to the second.
func TestTheWebhookIsRegisteredUnderItsServiceName(t *testing.T) {
	cp := planes.Lend(t)
	const name = "second-reverser"
	kube := kubernetes.NewForConfigOrDie(cp.AdminConfig())
	hooks := kube.AdmissionregistrationV1().ValidatingWebhookConfigurations()
	t.Cleanup(func() { _ = hooks.Delete(context.Background(), name, metav1.DeleteOptions{}) })
	d := startDaemon(t, t.TempDir(), "--webhook-service-name", name)
	testenv.Eventually(t, time.Minute, "the ValidatingWebhookConfiguration "+name, func() (bool, string) {
		vwc, err := hooks.Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		for _, h := range vwc.Webhooks {
			if u := h.ClientConfig.URL; u != nil && strings.HasPrefix(*u, "https://127.0.0.1:") && len(h.ClientConfig.CABundle) > 0 {
				return true, ""
			}
		}
		return false, fmt.Sprintf("%+v", vwc.Webhooks)
	}, d.FailFast())
}
