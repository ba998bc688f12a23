package testenv

import (
	"context"
	"os"
	"slices"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

var cp *ControlPlane

func TestMain(m *testing.M) {
	if mode := os.Getenv(fakeDaemonEnv); mode != "" {
		os.Exit(runFakeDaemon(mode)) // the test binary plays a daemon for the harness tests
	}
	os.Exit(RunMain(m, &cp))
}

func mustClient(t *testing.T, cfg *rest.Config) *kubernetes.Clientset {
	t.Helper()
	c, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatalf("client: %v", err)
	}
	return c
}

func TestClientsAuthenticateAsTheirUser(t *testing.T) {
	cases := []struct {
		name       string
		cfg        *rest.Config
		wantUser   string
		wantGroups []string
	}{
		{"admin", cp.AdminConfig(), AdminUser, []string{"system:masters"}},
		{"static token user", cp.UserConfig("alice"), "alice", []string{"developers"}},
		{"impersonated service account", cp.ImpersonatingConfig("system:serviceaccount:team-a:deployer", "system:serviceaccounts"),
			"system:serviceaccount:team-a:deployer", []string{"system:serviceaccounts"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			review, err := mustClient(t, tc.cfg).AuthenticationV1().SelfSubjectReviews().
				Create(context.Background(), &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
			if err != nil {
				t.Fatalf("self subject review: %v", err)
			}
			info := review.Status.UserInfo
			if info.Username != tc.wantUser {
				t.Errorf("username = %q, want %q", info.Username, tc.wantUser)
			}
			for _, g := range tc.wantGroups {
				if !slices.Contains(info.Groups, g) {
					t.Errorf("groups %v lack %q", info.Groups, g)
				}
			}
		})
	}
}

func TestRBACIsEnforcedForUsers(t *testing.T) {
	ctx := context.Background()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "rbac-check"}}
	if _, err := mustClient(t, cp.UserConfig("mallory")).CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); !apierrors.IsForbidden(err) {
		t.Fatalf("mallory creating a namespace: err = %v, want Forbidden", err)
	}
	if _, err := mustClient(t, cp.AdminConfig()).CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		t.Fatalf("admin creating a namespace: %v", err)
	}
}

func TestKubeconfigReachesTheAPIServer(t *testing.T) {
	path := t.TempDir() + "/kubeconfig"
	if err := cp.WriteKubeconfig(path); err != nil {
		t.Fatal(err)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		t.Fatalf("load kubeconfig: %v", err)
	}
	if _, err := mustClient(t, cfg).Discovery().ServerVersion(); err != nil {
		t.Fatalf("server version through kubeconfig: %v", err)
	}
}

func TestAPIServerRestartKeepsData(t *testing.T) {
	ctx := context.Background()
	client := mustClient(t, cp.AdminConfig())
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "survivor", Namespace: "default"}, Data: map[string]string{"k": "v"}}
	if _, err := client.CoreV1().ConfigMaps("default").Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := cp.RestartAPIServer(ctx, nil); err != nil {
		t.Fatalf("restart: %v", err)
	}
	got, err := client.CoreV1().ConfigMaps("default").Get(ctx, "survivor", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get after restart: %v", err)
	}
	if got.Data["k"] != "v" {
		t.Fatalf("data after restart = %v", got.Data)
	}
}
