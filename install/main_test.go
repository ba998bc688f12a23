package install

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	"github.com/configbutler/gitops-reverser/testenv"
)

// The identity the shipped manifests give the daemon.
const (
	systemNamespace = "gitops-reverser-system"
	serviceAccount  = "system:serviceaccount:" + systemNamespace + ":gitops-reverser"
)

// serviceAccountGroups are the groups a real token of the daemon's ServiceAccount carries.
var serviceAccountGroups = []string{"system:serviceaccounts", "system:serviceaccounts:" + systemNamespace, "system:authenticated"}

var (
	cp          *testenv.ControlPlane
	daemonBin   string
	kubectlBin  string
	helmBin     string // helm and promtool are built with the control plane (testenv.Binaries)
	promtoolBin string
)

func TestMain(m *testing.M) { os.Exit(runMain(m)) }

func runMain(m *testing.M) int {
	bins, err := testenv.EnsureBinaries(context.Background())
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	kubectlBin, helmBin, promtoolBin = bins.Kubectl, bins.Helm, bins.Promtool
	dir, err := os.MkdirTemp("", "install-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() { _ = os.RemoveAll(dir) }()
	// Built as make build and make image build it: static, no cgo, trimmed.
	daemonBin = filepath.Join(dir, "gitops-reverser")
	build := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-o", daemonBin, "..")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	out, err := build.CombinedOutput()
	if err != nil {
		fmt.Fprintf(os.Stderr, "build daemon: %v\n%s", err, out)
		return 1
	}
	return testenv.RunMain(m, &cp)
}

// deployPath is a path under the repository's deploy/ directory.
func deployPath(elem ...string) string {
	return filepath.Join(append([]string{"..", "deploy"}, elem...)...)
}

// adminKubeconfig writes a kubeconfig of the control plane's admin and returns its path.
func adminKubeconfig(t testing.TB) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := cp.WriteKubeconfig(path); err != nil {
		t.Fatal(err)
	}
	return path
}

// kubectl runs the pinned kubectl with kubeconfig and stdin, and returns stdout and stderr. It
// fails the test when kubectl fails.
func kubectl(t testing.TB, kubeconfig string, stdin io.Reader, args ...string) (string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(kubectlBin, append([]string{"--kubeconfig", kubeconfig}, args...)...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdin, &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("kubectl %s: %v\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	return stdout.String(), stderr.String()
}

// decodeObjects splits a multi-document YAML stream into objects, skipping empty documents.
func decodeObjects(t testing.TB, data []byte) []*unstructured.Unstructured {
	t.Helper()
	reader := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var objs []*unstructured.Unstructured
	for {
		doc, err := reader.Read()
		if err == io.EOF {
			return objs
		}
		if err != nil {
			t.Fatalf("split YAML: %v", err)
		}
		obj := map[string]any{}
		if err := yaml.Unmarshal(doc, &obj); err != nil {
			t.Fatalf("parse YAML document: %v\n%s", err, doc)
		}
		if len(obj) > 0 {
			objs = append(objs, &unstructured.Unstructured{Object: obj})
		}
	}
}

// readObjects reads the objects of one manifest file under deploy/.
func readObjects(t testing.TB, name string) []*unstructured.Unstructured {
	t.Helper()
	data, err := os.ReadFile(deployPath(name))
	if err != nil {
		t.Fatal(err)
	}
	return decodeObjects(t, data)
}

// object finds kind/name among objs and converts it into out (strictly: an unknown field is an
// error, so a misspelt field in a manifest fails here).
func object(t testing.TB, objs []*unstructured.Unstructured, kind, name string, out any) {
	t.Helper()
	for _, o := range objs {
		if o.GetKind() != kind || o.GetName() != name {
			continue
		}
		raw, err := yaml.Marshal(o.Object)
		if err != nil {
			t.Fatal(err)
		}
		if err := yaml.UnmarshalStrict(raw, out); err != nil {
			t.Fatalf("%s %s: %v", kind, name, err)
		}
		return
	}
	t.Fatalf("no %s %s in the manifests", kind, name)
}

func ensureNamespace(t testing.TB, kube kubernetes.Interface, name string) {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if _, err := kube.CoreV1().Namespaces().Create(context.Background(), ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}

// grantWorkloads lets user edit ConfigMaps and Deployments in namespace, and waits until the
// authorizer agrees.
func grantWorkloads(t testing.TB, kube kubernetes.Interface, namespace, user string) {
	t.Helper()
	ctx := context.Background()
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "workload-editor", Namespace: namespace},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"*"}},
			{APIGroups: []string{"apps"}, Resources: []string{"deployments"}, Verbs: []string{"*"}},
		}}
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "workload-editor-" + user, Namespace: namespace},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: "User", Name: user}}}
	if _, err := kube.RbacV1().Roles(namespace).Create(ctx, role, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	if _, err := kube.RbacV1().RoleBindings(namespace).Create(ctx, binding, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	client := kubernetes.NewForConfigOrDie(cp.UserConfig(user))
	testenv.Eventually(t, time.Minute, user+" allowed to list deployments", func() (bool, string) {
		_, err := client.AppsV1().Deployments(namespace).List(ctx, metav1.ListOptions{Limit: 1})
		return err == nil, fmt.Sprint(err)
	})
}

// waitAuthorized waits until the shipped ServiceAccount is allowed attr: RBAC objects just applied
// take a moment to reach the authorizer.
func waitAuthorized(t testing.TB, attr authorizationv1.ResourceAttributes) {
	t.Helper()
	testenv.Eventually(t, time.Minute, fmt.Sprintf("the shipped ServiceAccount allowed %+v", attr), func() (bool, string) {
		return accessAllowed(t, attr), ""
	})
}

// accessAllowed asks the apiserver, as the shipped ServiceAccount, whether it may do attr.
func accessAllowed(t testing.TB, attr authorizationv1.ResourceAttributes) bool {
	t.Helper()
	sa := kubernetes.NewForConfigOrDie(cp.ImpersonatingConfig(serviceAccount, serviceAccountGroups...))
	review := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &attr}}
	got, err := sa.AuthorizationV1().SelfSubjectAccessReviews().Create(context.Background(), review, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return got.Status.Allowed
}
