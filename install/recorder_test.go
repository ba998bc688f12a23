package install

import (
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// permission is one verb on one resource (with its subresource) of one API group.
type permission struct{ verb, group, resource string }

func (p permission) String() string {
	if p.group == "" {
		return p.verb + " " + p.resource
	}
	return p.verb + " " + p.resource + "." + p.group
}

func (p permission) covers(r recordedRequest) bool {
	return (p.verb == "*" || p.verb == r.verb) && (p.group == "*" || p.group == r.group) &&
		(p.resource == "*" || p.resource == r.resource)
}

// recordedRequest is one API request with the attributes RBAC authorizes it by.
type recordedRequest struct {
	verb, group, resource, namespace, name string // resource includes "/subresource"
	status                                 int
	as                                     string // the user it impersonated (Impersonate-User), if any
}

func (r recordedRequest) String() string {
	s := permission{verb: r.verb, group: r.group, resource: r.resource}.String()
	if r.namespace != "" {
		s += " in " + r.namespace
	}
	return s
}

// apiRecorder is a reverse proxy in front of the apiserver that records every resource request
// passing through it. Credentials and impersonation headers pass unchanged, so the apiserver
// authorizes each request exactly as if it came directly.
type apiRecorder struct {
	server   *httptest.Server
	mu       sync.Mutex
	requests []recordedRequest
}

func startAPIRecorder(t testing.TB) *apiRecorder {
	t.Helper()
	target, err := url.Parse(cp.URL)
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(target)
	proxy.Transport = cp.Transport()
	proxy.FlushInterval = -1 // watch events pass at once
	rec := &apiRecorder{}
	infos := &request.RequestInfoFactory{APIPrefixes: sets.NewString("api", "apis"), GrouplessAPIPrefixes: sets.NewString("api")}
	proxy.ModifyResponse = func(resp *http.Response) error {
		info, err := infos.NewRequestInfo(resp.Request)
		if err != nil || !info.IsResourceRequest {
			return nil
		}
		resource := info.Resource
		if info.Subresource != "" {
			resource += "/" + info.Subresource
		}
		r := recordedRequest{verb: info.Verb, group: info.APIGroup, resource: resource,
			namespace: info.Namespace, name: info.Name, status: resp.StatusCode, as: resp.Request.Header.Get("Impersonate-User")}
		rec.mu.Lock()
		defer rec.mu.Unlock()
		rec.requests = append(rec.requests, r)
		if r.verb == "patch" && r.status == http.StatusCreated {
			// A server-side apply that created the object was also authorized as create.
			r.verb = "create"
			rec.requests = append(rec.requests, r)
		}
		return nil
	}
	// TLS, as client-go sends credentials only over TLS.
	rec.server = httptest.NewTLSServer(proxy)
	t.Cleanup(rec.server.Close)
	return rec
}

func (r *apiRecorder) recorded() []recordedRequest {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.requests)
}

// refused are the requests the apiserver answered 401 or 403.
func (r *apiRecorder) refused() []recordedRequest {
	return slices.DeleteFunc(r.recorded(), func(req recordedRequest) bool {
		return req.status != http.StatusForbidden && req.status != http.StatusUnauthorized
	})
}

// tokenKubeconfig writes a kubeconfig that authenticates with token through the proxy: a real
// token of the shipped ServiceAccount is the daemon itself, whose own requests may impersonate.
func (r *apiRecorder) tokenKubeconfig(t testing.TB, token string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "kubeconfig")
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["shipped"] = &clientcmdapi.Cluster{Server: r.server.URL,
		CertificateAuthorityData: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: r.server.Certificate().Raw})}
	cfg.AuthInfos["shipped"] = &clientcmdapi.AuthInfo{Token: token}
	cfg.Contexts["shipped"] = &clientcmdapi.Context{Cluster: "shipped", AuthInfo: "shipped"}
	cfg.CurrentContext = "shipped"
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// kubeconfig writes a kubeconfig that impersonates the shipped ServiceAccount through the proxy.
func (r *apiRecorder) kubeconfig(t testing.TB) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := cp.WriteKubeconfigAs(path, serviceAccount, serviceAccountGroups...); err != nil {
		t.Fatal(err)
	}
	cfg, err := clientcmd.LoadFromFile(path)
	if err != nil {
		t.Fatal(err)
	}
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: r.server.Certificate().Raw})
	for _, c := range cfg.Clusters {
		c.Server, c.CertificateAuthorityData = r.server.URL, ca
	}
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}
