package ui

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/configbutler/gitops-reverser/crds"
	"github.com/configbutler/gitops-reverser/testenv"
)

// cp is the package's shared control plane: one real etcd + kube-apiserver for all tests.
var cp *testenv.ControlPlane

// TestMain runs the tests against one control plane, then checks that no goroutine outlived them.
func TestMain(m *testing.M) {
	os.Exit(testenv.RunMainNoLeaks(m, &cp))
}

var installCRDs = sync.OnceValue(func() error {
	return crds.Install(context.Background(), cp.AdminConfig(), slog.New(slog.DiscardHandler))
})

// world is a set of namespaces with the daemon's objects in them, and users with roles there.
type world struct {
	t    testing.TB
	kube kubernetes.Interface
	dyn  dynamic.Interface
}

func newWorld(t testing.TB) *world {
	t.Helper()
	if err := installCRDs(); err != nil {
		t.Fatal(err)
	}
	return &world{t: t, kube: kubernetes.NewForConfigOrDie(cp.AdminConfig()), dyn: dynamic.NewForConfigOrDie(cp.AdminConfig())}
}

// namespace creates a namespace named after the test and returns its name.
func (w *world) namespace(suffix string) string {
	w.t.Helper()
	name := strings.ToLower(strings.NewReplacer("/", "-", "_", "-").Replace(w.t.Name()))
	name = strings.Trim(name[:min(len(name), 50)], "-") + "-" + suffix
	if _, err := w.kube.CoreV1().Namespaces().Create(context.Background(),
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		w.t.Fatal(err)
	}
	return name
}

// create creates obj (a crds type) and, when status is set, writes it through the status
// subresource (or with the object, for kinds without one).
func (w *world) create(gvr schema.GroupVersionResource, obj any, status any) {
	w.t.Helper()
	ctx := context.Background()
	u, err := crds.ToUnstructured(obj)
	if err != nil {
		w.t.Fatal(err)
	}
	if gvr == crds.SyncRuns && status != nil {
		st, err := crds.ToUnstructured(status)
		if err != nil {
			w.t.Fatal(err)
		}
		u.Object["status"] = st.Object
	}
	client := w.dyn.Resource(gvr).Namespace(u.GetNamespace())
	created, err := client.Create(ctx, u, metav1.CreateOptions{})
	if err != nil {
		w.t.Fatalf("create %s %s: %v", gvr.Resource, u.GetName(), err)
	}
	if gvr == crds.SyncRuns || status == nil {
		return
	}
	st, err := crds.ToUnstructured(status)
	if err != nil {
		w.t.Fatal(err)
	}
	created.Object["status"] = st.Object
	if _, err := client.UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
		w.t.Fatalf("status of %s %s: %v", gvr.Resource, u.GetName(), err)
	}
}

// grant binds user to a Role in namespace that allows verbs on proposals.
func (w *world) grant(namespace, user string, verbs ...string) {
	w.t.Helper()
	ctx := context.Background()
	name := user + "-proposals"
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{crds.Group}, Resources: []string{"proposals"}, Verbs: verbs}}}
	if _, err := w.kube.RbacV1().Roles(namespace).Create(ctx, role, metav1.CreateOptions{}); err != nil {
		w.t.Fatal(err)
	}
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}}}
	if _, err := w.kube.RbacV1().RoleBindings(namespace).Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		w.t.Fatal(err)
	}
}

// proposal reads a Proposal back from the apiserver.
func (w *world) proposal(namespace, name string) *crds.Proposal {
	w.t.Helper()
	u, err := w.dyn.Resource(crds.Proposals).Namespace(namespace).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		w.t.Fatal(err)
	}
	p, err := crds.FromUnstructured[crds.Proposal](u)
	if err != nil {
		w.t.Fatal(err)
	}
	return p
}

// startPage runs a Page against the control plane (as its admin, unless cfg.Kube says otherwise)
// behind an httptest server until the test ends.
func startPage(t testing.TB, cfg Config) string {
	t.Helper()
	if cfg.Kube == nil {
		cfg.Kube = cp.AdminConfig()
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	p, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	testenv.Run(t, p)
	srv := httptest.NewServer(p)
	t.Cleanup(srv.Close) // before p stops: cleanups run last in, first out
	return srv.URL
}

// response is what a request to the page got.
type response struct {
	status int
	header http.Header
	body   string
}

// get requests path as user ("" sends no token).
func get(t testing.TB, base, path, user string) response {
	t.Helper()
	return send(t, http.MethodGet, base+path, user, nil, nil)
}

func send(t testing.TB, method, u, user string, form url.Values, header http.Header) response {
	t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, u, body)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	if user != "" {
		req.Header.Set("Authorization", "Bearer "+cp.UserConfig(user).BearerToken)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return response{status: resp.StatusCode, header: resp.Header, body: string(data)}
}

// waitFor polls path as user until the page answers 200 with every want in its body.
func waitFor(t testing.TB, base, path, user string, want ...string) response {
	t.Helper()
	var last response
	testenv.Eventually(t, time.Minute, fmt.Sprintf("%s shows %q to %q", path, want, user), func() (bool, string) {
		last = get(t, base, path, user)
		if last.status != http.StatusOK {
			return false, fmt.Sprintf("status %d: %.300s", last.status, last.body)
		}
		for _, s := range want {
			if !strings.Contains(last.body, s) {
				return false, fmt.Sprintf("no %q in the page", s)
			}
		}
		return true, ""
	})
	return last
}
