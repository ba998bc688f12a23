package ctl

import (
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/configbutler/gitops-reverser/crds"
)

// ourPrefix is where the apiserver serves the configbutler.ai kinds.
var ourPrefix = "/apis/" + crds.GroupVersion.String() + "/"

// flakyAPIServer stands in front of the control plane as the apiserver answers right after the
// CRDs were installed: the first tries of each request under prefix get answers, one each, and
// later ones reach the control plane. It counts every request by method and path.
type flakyAPIServer struct {
	url     string
	caPEM   []byte
	prefix  string
	answers []func(w http.ResponseWriter, r *http.Request)
	proxy   *httputil.ReverseProxy

	mu   sync.Mutex
	seen map[string]int
}

func newFlakyAPIServer(t *testing.T, prefix string, answers ...func(f *flakyAPIServer, w http.ResponseWriter, r *http.Request)) *flakyAPIServer {
	t.Helper()
	target, err := url.Parse(cp.URL)
	if err != nil {
		t.Fatal(err)
	}
	transport := cp.Transport()
	f := &flakyAPIServer{prefix: prefix, seen: map[string]int{},
		proxy: &httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) { r.SetURL(target) }, Transport: transport}}
	for _, answer := range answers {
		f.answers = append(f.answers, func(w http.ResponseWriter, r *http.Request) { answer(f, w, r) })
	}
	// TLS, as the kubeconfig's user is sent only to an https server.
	srv := httptest.NewTLSServer(http.HandlerFunc(f.serve))
	t.Cleanup(func() {
		srv.Close()
		transport.CloseIdleConnections()
	})
	f.url = srv.URL
	f.caPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	return f
}

func (f *flakyAPIServer) serve(w http.ResponseWriter, r *http.Request) {
	key := r.Method + " " + r.URL.Path
	f.mu.Lock()
	try := f.seen[key]
	f.seen[key]++
	f.mu.Unlock()
	if strings.HasPrefix(r.URL.Path, f.prefix) && try < len(f.answers) {
		f.answers[try](w, r)
		return
	}
	f.proxy.ServeHTTP(w, r)
}

// requests is how many requests of method for path came.
func (f *flakyAPIServer) requests(method, path string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.seen[method+" "+path]
}

// kubeconfig writes a kubeconfig of user, in the world's namespace, that reaches the control
// plane through f.
func (f *flakyAPIServer) kubeconfig(w *world, user string) string {
	w.t.Helper()
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["flaky"] = &clientcmdapi.Cluster{Server: f.url, CertificateAuthorityData: f.caPEM}
	cfg.AuthInfos[user] = &clientcmdapi.AuthInfo{Token: cp.UserConfig(user).BearerToken}
	cfg.Contexts[user] = &clientcmdapi.Context{Cluster: "flaky", AuthInfo: user, Namespace: w.ns}
	cfg.CurrentContext = user
	path := filepath.Join(w.t.TempDir(), user+".kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		w.t.Fatal(err)
	}
	return path
}

// handlerNotServed answers 503 as the apiserver does while a CRD's handler is not served yet.
func handlerNotServed(_ *flakyAPIServer, w http.ResponseWriter, _ *http.Request) {
	serviceUnavailable(w, "Resource kind "+crds.GroupVersion.String()+", Kind=Proposal not found")
}

// unavailable answers 503 as an overloaded or starting apiserver does.
func unavailable(_ *flakyAPIServer, w http.ResponseWriter, _ *http.Request) {
	serviceUnavailable(w, "the server is currently unable to handle the request")
}

func serviceUnavailable(w http.ResponseWriter, message string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusServiceUnavailable)
	_ = json.NewEncoder(w).Encode(metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
		Status: metav1.StatusFailure, Reason: metav1.StatusReasonServiceUnavailable, Code: http.StatusServiceUnavailable,
		Message: message})
}

// resourceNotServed passes the request on for a version of our group the control plane does not
// serve: its answer is the one for a kind it serves no more, or not yet.
func resourceNotServed(f *flakyAPIServer, w http.ResponseWriter, r *http.Request) {
	r.URL.Path = strings.Replace(r.URL.Path, ourPrefix, "/apis/"+crds.Group+"/v0/", 1)
	r.URL.RawPath = ""
	f.proxy.ServeHTTP(w, r)
}

// TestTransientAnswersForOurKindsAreRetried: right after the CRDs were installed, the apiserver
// answers a request for our kinds 503, then 404 for the resource; every command retries until it
// is served, and then succeeds.
func TestTransientAnswersForOurKindsAreRetried(t *testing.T) {
	w := newWorld(t)
	w.grant("alice")
	proposal := ourPrefix + "namespaces/" + w.ns + "/proposals/web-replicas"
	for _, tc := range []struct {
		args     []string
		requests [][2]string // method and path, each tried three times
	}{
		{[]string{"status"}, [][2]string{{http.MethodGet, ourPrefix + "namespaces/" + w.ns + "/gitdestinations"}}},
		{[]string{"proposals", "diff", "web-replicas"}, [][2]string{{http.MethodGet, proposal}}},
		{[]string{"proposals", "approve", "web-replicas"}, [][2]string{{http.MethodGet, proposal}, {http.MethodPatch, proposal}}},
		{[]string{"sync", "prod"}, [][2]string{{http.MethodPatch, ourPrefix + "namespaces/" + w.ns + "/gitdestinations/prod"}}},
	} {
		flaky := newFlakyAPIServer(t, ourPrefix, handlerNotServed, resourceNotServed)
		r := runCLI(t, append(tc.args, "--kubeconfig", flaky.kubeconfig(w, "alice"))...)
		if r.err != nil {
			t.Errorf("%s: %v", strings.Join(tc.args, " "), r.err)
		}
		for _, req := range tc.requests {
			if got := flaky.requests(req[0], req[1]); got != 3 {
				t.Errorf("%s: %s %s came %d times, want 3 (503, 404, then served)", strings.Join(tc.args, " "), req[0], req[1], got)
			}
		}
	}
	if p := read[crds.Proposal](w, crds.Proposals, "web-replicas"); p.Spec.Decision != crds.DecisionApprove {
		t.Errorf("after approve through the flaky apiserver: decision %q", p.Spec.Decision)
	}
}

// TestOtherAnswersFailAtOnce: a NotFound of a named object is an answer, not a hiccup, and a
// request for a kind not ours is never retried: each fails after one request, as before.
func TestOtherAnswersFailAtOnce(t *testing.T) {
	w := newWorld(t)
	w.grant("alice")

	straight := newFlakyAPIServer(t, ourPrefix) // no transient answers
	r := runCLI(t, "proposals", "diff", "missing", "--kubeconfig", straight.kubeconfig(w, "alice"))
	want := fmt.Sprintf(`get proposal %s/missing: error from server (NotFound): proposals.configbutler.ai "missing" not found`, w.ns)
	if r.exitCode() != exitFailed || r.err.Error() != want {
		t.Errorf("diff of a missing proposal: exit %d, err %v; want 1 and %q", r.exitCode(), r.err, want)
	}
	if got := straight.requests(http.MethodGet, ourPrefix+"namespaces/"+w.ns+"/proposals/missing"); got != 1 {
		t.Errorf("the missing proposal was read %d times, want once", got)
	}

	reviews := "/apis/authentication.k8s.io/v1/selfsubjectreviews"
	flaky := newFlakyAPIServer(t, reviews, unavailable)
	r = runCLI(t, "proposals", "approve", "web-replicas", "--kubeconfig", flaky.kubeconfig(w, "alice"))
	if r.exitCode() != exitFailed || !strings.Contains(r.err.Error(), "error from server (ServiceUnavailable)") {
		t.Errorf("approve while SelfSubjectReviews answer 503: exit %d, err %v; want 1 and ServiceUnavailable", r.exitCode(), r.err)
	}
	if got := flaky.requests(http.MethodPost, reviews); got != 1 {
		t.Errorf("the SelfSubjectReview was sent %d times, want once", got)
	}
}

// TestTransientTellsTheKindNotServedFromAMissingObject: what the retry takes for "not served
// yet", by the errors the dynamic client returns.
func TestTransientTellsTheKindNotServedFromAMissingObject(t *testing.T) {
	proposals := schema.GroupResource{Group: crds.Group, Resource: "proposals"}
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"503 while the handler starts", apierrors.NewServiceUnavailable("Resource kind configbutler.ai/v1alpha1, Kind=Proposal not found"), true},
		{"the apiserver's plain 404 page", apierrors.NewGenericServerResponse(http.StatusNotFound, http.MethodGet, schema.GroupResource{}, "", "404 page not found", 0, true), true},
		{"a NotFound naming no object", apierrors.NewNotFound(proposals, ""), true},
		{"a NotFound of a named proposal", apierrors.NewNotFound(proposals, "web-replicas"), false},
		{"wrapped, of a named proposal", fmt.Errorf("get: %w", apierrors.NewNotFound(proposals, "web-replicas")), false},
		{"Forbidden", apierrors.NewForbidden(proposals, "web-replicas", errors.New("no")), false},
		{"not from the apiserver", errors.New("connection refused"), false},
	} {
		if got := transient(tc.err); got != tc.want {
			t.Errorf("%s: transient = %v, want %v", tc.name, got, tc.want)
		}
	}
}
