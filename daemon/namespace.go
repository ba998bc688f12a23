package daemon

import (
	"context"
	"log/slog"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"

	"github.com/configbutler/gitops-reverser/kube"
)

// namespaceCheckTimeout bounds the look at the daemon's own namespace at start.
const namespaceCheckTimeout = 5 * time.Second

// ensureNamespace makes sure the daemon's own namespace exists before the parts that keep things
// there start (the webhook's certificate, the proposals' seal key, the record of the admission
// policies, the leader Lease): installed, it does; in a local run against a cluster of one's own
// it may not, and the daemon creates it when it may. When it may not, it says at once what to
// do, and those parts degrade with the same advice; the mirror needs nothing there and goes on.
func ensureNamespace(ctx context.Context, dyn dynamic.Interface, name string, log *slog.Logger) {
	ctx, cancel := context.WithTimeout(ctx, namespaceCheckTimeout)
	defer cancel()
	namespaces := kube.For(dyn, kube.Namespaces, "")
	_, err := namespaces.Get(ctx, name, metav1.GetOptions{})
	if err == nil || !apierrors.IsNotFound(err) {
		return // there, or not ours to tell (a Forbidden get is the RBAC's, and the parts say what they miss)
	}
	_, err = namespaces.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	switch {
	case err == nil:
		log.Info("created the daemon's namespace", "namespace", name)
	case apierrors.IsAlreadyExists(err):
	default:
		log.Warn("the daemon's namespace does not exist, and the daemon may not create it: create namespace "+name+
			" (kubectl create namespace "+name+"), or set --namespace to one that exists; until then the webhook, "+
			"write-back and the admission policies wait, and the mirror runs on", "namespace", name, "err", err)
	}
}
