package webhook

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

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
	srv *Server
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

// startWebhook serves h at AdmissionPath over TLS, with self-managed certificates in namespace
// name, and registers it as configuration name for the resources rs(name). It returns the server
// and the namespace; both, and the registration, go when t ends.
func startWebhook(t *testing.T, name string, h http.Handler, rs func(ns string) []Resource) (*Server, string) {
	t.Helper()
	ctx := context.Background()
	ns := whNamespace(t, name)
	certs, err := NewSelfManaged(SelfManagedConfig{Core: whCore(t), Namespace: ns, SecretName: "webhook-tls",
		ServiceName: "gitops-reverser", ExtraHosts: []string{"127.0.0.1"}}, whLogger())
	if err == nil {
		err = certs.Sync(ctx)
	}
	if err != nil {
		t.Fatalf("self-managed certificates: %v", err)
	}
	mux := http.NewServeMux()
	mux.Handle("POST "+AdmissionPath, h)
	srv, err := StartServer(ServerConfig{BindAddress: "127.0.0.1:0", Certs: certs}, mux, whLogger())
	if err != nil {
		t.Fatalf("start server: %v", err)
	}
	t.Cleanup(func() { _ = srv.Shutdown(context.Background()) })
	reg := NewRegistration(RegistrationConfig{Admission: whAdmission(t), Name: name, URL: "https://" + srv.Addr(),
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
	if err := w.srv.Shutdown(context.Background()); err != nil {
		t.Fatalf("shutdown: %v", err)
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

// limitedServer is a webhook server with a 1 KiB body limit whose handler counts requests.
type limitedServer struct {
	srv    *Server
	certs  staticCerts
	pool   *x509.CertPool
	client *http.Client
	served *atomic.Int32
}

func startLimitedServer(t *testing.T) limitedServer {
	t.Helper()
	ls := limitedServer{certs: newStaticCerts(t, "127.0.0.1"), pool: x509.NewCertPool(), served: &atomic.Int32{}}
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		ls.served.Add(1)
		if _, err := io.ReadAll(r.Body); err != nil {
			http.Error(w, err.Error(), http.StatusRequestEntityTooLarge)
		}
	})
	var err error
	ls.srv, err = StartServer(ServerConfig{BindAddress: "127.0.0.1:0", Certs: ls.certs, MaxBodyBytes: 1 << 10}, mux, whLogger())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ls.srv.Shutdown(context.Background()) })
	ls.pool.AppendCertsFromPEM(ls.certs.ca)
	// HTTP/1.1 on purpose: the 431 for oversize headers is an HTTP/1 answer.
	ls.client = &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ls.pool}}}
	return ls
}

func (ls limitedServer) status(t *testing.T, method, header, body string) int {
	t.Helper()
	req, _ := http.NewRequest(method, "https://"+ls.srv.Addr()+"/", strings.NewReader(body))
	req.Header.Set("X-Test", header)
	resp, err := ls.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	return resp.StatusCode
}

func TestServerLimits(t *testing.T) {
	ls := startLimitedServer(t)
	cases := []struct {
		name, method, header, body string
		want                       int
	}{
		{"small request is served", http.MethodPost, "x", "{}", http.StatusOK},
		{"oversize header is refused with 431", http.MethodGet, strings.Repeat("a", 64<<10), "", http.StatusRequestHeaderFieldsTooLarge},
		{"oversize body is cut off", http.MethodPost, "x", strings.Repeat("a", 2<<10), http.StatusRequestEntityTooLarge},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := ls.status(t, tc.method, tc.header, tc.body); got != tc.want {
				t.Fatalf("status = %d, want %d", got, tc.want)
			}
		})
	}
	t.Run("plain HTTP never reaches a handler", func(t *testing.T) {
		before := ls.served.Load()
		resp, err := http.Get("http://" + ls.srv.Addr() + "/")
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode != http.StatusBadRequest {
				t.Fatalf("plain HTTP status = %d, want 400 or an error", resp.StatusCode)
			}
		}
		if ls.served.Load() != before {
			t.Fatal("a plain HTTP request reached the handler")
		}
	})
	t.Run("TLS 1.1 is refused", func(t *testing.T) {
		conn, err := tls.Dial("tcp", ls.srv.Addr(), &tls.Config{RootCAs: ls.pool, MaxVersion: tls.VersionTLS11})
		if err == nil {
			_ = conn.Close()
			t.Fatal("TLS 1.1 handshake succeeded")
		}
	})
	t.Run("bind error is returned by StartServer", func(t *testing.T) {
		other, err := StartServer(ServerConfig{BindAddress: ls.srv.Addr(), Certs: ls.certs}, http.NewServeMux(), whLogger())
		if err == nil {
			_ = other.Shutdown(context.Background())
			t.Fatal("second server on the same address started")
		}
		if !errors.Is(err, syscall.EADDRINUSE) {
			t.Fatalf("err = %v, want EADDRINUSE", err)
		}
	})
}
