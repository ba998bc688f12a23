package crds_test

import (
	"context"
	"flag"
	"io"
	"log/slog"
	"os"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/configbutler/gitops-reverser/crds"
	"github.com/configbutler/gitops-reverser/testenv"
)

// cp is the package's shared control plane; nil under -short, where only the tests that need
// no apiserver run.
var cp *testenv.ControlPlane

func TestMain(m *testing.M) {
	flag.Parse()
	if testing.Short() {
		os.Exit(m.Run())
	}
	// Install applies and waits for the CRDs side by side: every goroutine must be joined.
	os.Exit(testenv.RunMainNoLeaks(m, &cp, testenv.LeakIgnores()...))
}

// mustControlPlane skips the test under -short and returns the shared control plane.
func mustControlPlane(tb testing.TB) *testenv.ControlPlane {
	tb.Helper()
	if cp == nil {
		tb.Skip("needs a kube-apiserver; not started under -short")
	}
	return cp
}

func testContext(tb testing.TB) context.Context {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	tb.Cleanup(cancel)
	return ctx
}

func discardLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// mustInstall installs the CRDs (a no-op when already there) and returns a dynamic client.
func mustInstall(tb testing.TB) dynamic.Interface {
	tb.Helper()
	cfg := mustControlPlane(tb).AdminConfig()
	if err := crds.Install(testContext(tb), cfg, discardLogger()); err != nil {
		tb.Fatalf("install CRDs: %v", err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		tb.Fatalf("dynamic client: %v", err)
	}
	return dyn
}

// mustNamespace creates the namespace if it does not exist yet.
func mustNamespace(tb testing.TB, name string) {
	tb.Helper()
	client, err := kubernetes.NewForConfig(mustControlPlane(tb).AdminConfig())
	if err != nil {
		tb.Fatalf("kubernetes client: %v", err)
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	_, err = client.CoreV1().Namespaces().Create(testContext(tb), ns, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		tb.Fatalf("create namespace %s: %v", name, err)
	}
}
