package webhook

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/configbutler/gitops-reverser/httpserver"
	"github.com/configbutler/gitops-reverser/testenv"
)

var whConfigMaps = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}

// reviewRecorder stands in for the admission handler: it keeps every request and allows it.
type reviewRecorder struct {
	mu   sync.Mutex
	reqs []admissionv1.AdmissionRequest
}

func (rr *reviewRecorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var review admissionv1.AdmissionReview
	if err := json.NewDecoder(r.Body).Decode(&review); err != nil || review.Request == nil {
		http.Error(w, "not an admission review", http.StatusBadRequest)
		return
	}
	rr.mu.Lock()
	rr.reqs = append(rr.reqs, *review.Request)
	rr.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Response: &admissionv1.AdmissionResponse{UID: review.Request.UID, Allowed: true},
	})
}

// find returns the last request for name with operation op.
func (rr *reviewRecorder) find(name, op string) (admissionv1.AdmissionRequest, bool) {
	rr.mu.Lock()
	defer rr.mu.Unlock()
	for i := len(rr.reqs) - 1; i >= 0; i-- {
		if r := rr.reqs[i]; r.Name == name && string(r.Operation) == op {
			return r, true
		}
	}
	return admissionv1.AdmissionRequest{}, false
}

// recordedWebhook is a webhook server with self-managed certificates, registered for configmaps.
type recordedWebhook struct {
	srv *runningServer
	rec *reviewRecorder
	ns  string
}

func startRecordedWebhook(t *testing.T, name string) recordedWebhook {
	t.Helper()
	rec := &reviewRecorder{}
	srv, ns := startWebhook(t, name, rec, func(ns string) []Resource {
		return []Resource{{GVR: whConfigMaps, Namespaced: true, Namespace: ns, Operations: []string{"CREATE", "UPDATE", "DELETE"}}}
	})
	return recordedWebhook{srv: srv, rec: rec, ns: ns}
}

// runningServer is an httpserver.Server running with the webhook's limits until stop.
type runningServer struct {
	addr string
	stop func() error // ends Run and returns its result (see testenv.Run)
}

// serveWebhook listens on a free loopback port with the webhook's limits and certs, and runs
// the server until stop or the end of the test.
func serveWebhook(t testing.TB, certs CertSource, h http.Handler) *runningServer {
	t.Helper()
	srv, err := httpserver.Listen(httpserver.Config{Name: "webhook", BindAddress: "127.0.0.1:0", Handler: h,
		Certs: certs, Limits: ServerLimits(), Log: whLogger()})
	if err != nil {
		t.Fatalf("start server: %v", err)
	}
	return &runningServer{addr: srv.Addr(), stop: testenv.Run(t, srv)}
}

// startWebhook serves h at AdmissionPath over TLS, with self-managed certificates in namespace
// name, and registers it as configuration name for the resources rs(name). It returns the server
// and the namespace; both, and the registration, go when t ends.
func startWebhook(t *testing.T, name string, h http.Handler, rs func(ns string) []Resource) (*runningServer, string) {
	t.Helper()
	ctx := context.Background()
	ns := whNamespace(t, name)
	certs, err := NewSelfManaged(SelfManagedConfig{Dynamic: whDynamic(t), Namespace: ns, SecretName: "webhook-tls",
		ServiceName: "gitops-reverser", ExtraHosts: []string{"127.0.0.1"}}, whLogger())
	if err == nil {
		err = certs.Sync(ctx)
	}
	if err != nil {
		t.Fatalf("self-managed certificates: %v", err)
	}
	mux := http.NewServeMux()
	mux.Handle("POST "+AdmissionPath, h)
	srv := serveWebhook(t, certs, mux)
	reg := NewRegistration(RegistrationConfig{Dynamic: whDynamic(t), Name: name, URL: "https://" + srv.addr,
		Path: AdmissionPath, CABundle: certs.CABundle, TimeoutSeconds: 10}) // a busy test machine is slow
	if err := reg.Update(ctx, rs(ns)); err != nil {
		t.Fatalf("register webhook: %v", err)
	}
	t.Cleanup(func() { _ = reg.Delete(context.Background()) })
	return srv, ns
}

// waitActive creates ConfigMaps until the apiserver, which picks up a new registration after a
// moment, sends one of them to the webhook; it returns that ConfigMap's name.
func (w recordedWebhook) waitActive(t *testing.T) string {
	t.Helper()
	configMaps := whCore(t).ConfigMaps(w.ns)
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{GenerateName: "probe-"}}
		created, err := configMaps.Create(context.Background(), cm, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("create probe configmap: %v", err)
		}
		name := created.Name
		for range 10 {
			if _, ok := w.rec.find(name, "CREATE"); ok {
				return name
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	t.Fatal("the apiserver never called the webhook")
	return ""
}

func TestAPIServerCallsWebhookOverTLS(t *testing.T) {
	w := startRecordedWebhook(t, "webhook-tls-call")
	name := w.waitActive(t)
	req, _ := w.rec.find(name, "CREATE")
	if req.UserInfo.Username != testenv.AdminUser || req.Namespace != w.ns || req.Resource.Resource != "configmaps" {
		t.Fatalf("request = user %q ns %q resource %q, want %q %q configmaps",
			req.UserInfo.Username, req.Namespace, req.Resource.Resource, testenv.AdminUser, w.ns)
	}

	ctx := context.Background()
	configMaps := whCore(t).ConfigMaps(w.ns)
	cm, err := configMaps.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cm.Data = map[string]string{"k": "v"}
	if _, err := configMaps.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("update: %v", err)
	}
	if err := configMaps.Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		t.Fatalf("delete: %v", err)
	}
	for _, op := range []string{"UPDATE", "DELETE"} {
		req, ok := w.rec.find(name, op)
		if !ok {
			t.Fatalf("no %s review for %s", op, name)
		}
		if req.UserInfo.Username != testenv.AdminUser {
			t.Errorf("%s review user = %q, want %q", op, req.UserInfo.Username, testenv.AdminUser)
		}
	}
}

func TestFailurePolicyIgnoreWhenServerDown(t *testing.T) {
	w := startRecordedWebhook(t, "webhook-server-down")
	w.waitActive(t)
	if err := w.srv.stop(); err != nil {
		t.Fatalf("stop: %v", err)
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{GenerateName: "while-down-"}}
	created, err := whCore(t).ConfigMaps(w.ns).Create(context.Background(), cm, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create with the webhook down: %v", err)
	}
	if _, ok := w.rec.find(created.Name, "CREATE"); ok {
		t.Fatal("a stopped server recorded a review")
	}
}

func TestServerLimitsFitAdmissionReviews(t *testing.T) {
	var served atomic.Int32
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		served.Add(1)
		if _, err := io.Copy(io.Discard, r.Body); err != nil {
			http.Error(w, err.Error(), http.StatusRequestEntityTooLarge)
		}
	})
	certs := newStaticCerts(t, "127.0.0.1")
	srv := serveWebhook(t, certs, mux)
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(certs.ca)
	// HTTP/1.1 on purpose: the 431 for oversize headers is an HTTP/1 answer.
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}
	t.Cleanup(tr.CloseIdleConnections)
	client := &http.Client{Timeout: 30 * time.Second, Transport: tr}
	cases := []struct {
		name, header string
		body         int
		want         int
	}{
		{"an update of an object at etcd's limit is read", "x", 3 << 20, http.StatusOK},
		{"a body over 8 MiB is cut off", "x", 8<<20 + 1, http.StatusRequestEntityTooLarge},
		{"an oversize header is refused with 431", strings.Repeat("a", 64<<10), 0, http.StatusRequestHeaderFieldsTooLarge},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequest(http.MethodPost, "https://"+srv.addr+"/", strings.NewReader(strings.Repeat("a", tc.body)))
			req.Header.Set("X-Test", tc.header)
			resp, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			_ = resp.Body.Close()
			if resp.StatusCode != tc.want {
				t.Fatalf("status = %d, want %d", resp.StatusCode, tc.want)
			}
		})
	}
}
