package webhook

import (
	"context"
	"log/slog"
	"os"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	admissionregistrationv1client "k8s.io/client-go/kubernetes/typed/admissionregistration/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"

	"github.com/configbutler/gitops-reverser/testenv"
)

// cp is the package's shared control plane: one real etcd + kube-apiserver for all tests.
var cp *testenv.ControlPlane

// TestMain runs the tests against one control plane, then checks that no goroutine outlived
// them: every server, store, certificate source and registrar was stopped and joined, and every
// client's idle connection ended with the control plane. Nothing needs ignoring today; should a
// dependency ever keep a goroutine by design, ignore exactly its top function here and say whose.
func TestMain(m *testing.M) {
	os.Exit(testenv.RunMainNoLeaks(m, &cp))
}

// Helpers of the server, certificate and registration tests; "wh" keeps them apart from the
// helpers of the handler and store tests in the same package.

func whLogger() *slog.Logger { return slog.New(slog.NewTextHandler(os.Stderr, nil)) }

func whDynamic(t *testing.T) dynamic.Interface {
	t.Helper()
	return dynamic.NewForConfigOrDie(cp.AdminConfig())
}

func whCore(t *testing.T) corev1client.CoreV1Interface {
	t.Helper()
	c, err := corev1client.NewForConfig(cp.AdminConfig())
	if err != nil {
		t.Fatalf("core client: %v", err)
	}
	return c
}

func whAdmission(t *testing.T) admissionregistrationv1client.AdmissionregistrationV1Interface {
	t.Helper()
	c, err := admissionregistrationv1client.NewForConfig(cp.AdminConfig())
	if err != nil {
		t.Fatalf("admissionregistration client: %v", err)
	}
	return c
}

// whNamespace creates namespace name if it is missing and returns name.
func whNamespace(t *testing.T, name string) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	_, err := whCore(t).Namespaces().Create(context.Background(), ns, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("create namespace %s: %v", name, err)
	}
	return name
}
