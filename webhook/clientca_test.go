package webhook

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// newClientCert issues a client certificate signed by ca, as an apiserver's webhook client
// certificate would be.
func newClientCert(t *testing.T, ca keyPair, name string) tls.Certificate {
	t.Helper()
	leaf, err := issue(&x509.Certificate{
		Subject:     pkix.Name{CommonName: name},
		NotBefore:   time.Now().Add(-time.Hour),
		NotAfter:    time.Now().Add(time.Hour),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}, &ca)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := tls.X509KeyPair(leaf.certPEM, leaf.keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	return cert
}

func mustCA(t *testing.T) keyPair {
	t.Helper()
	ca, err := newCA(time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return ca
}

// writeFileAtomically replaces path as the kubelet replaces a mounted ConfigMap: temp + rename.
func writeFileAtomically(t *testing.T, path string, content []byte) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, content, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// clientCAServer is the admission handler behind a TLS server that requires client certificates
// of the CA in caFile; served counts the requests that reached a handler.
type clientCAServer struct {
	srv      *Server
	serverCA *x509.CertPool
	clientCA *ClientCA
	served   *atomic.Int32
}

func startClientCAServer(t *testing.T, caFile string) clientCAServer {
	t.Helper()
	clientCA, err := LoadClientCA(caFile)
	if err != nil {
		t.Fatal(err)
	}
	certs := newStaticCerts(t, "127.0.0.1")
	cs := clientCAServer{serverCA: x509.NewCertPool(), clientCA: clientCA, served: &atomic.Int32{}}
	cs.serverCA.AppendCertsFromPEM(certs.ca)
	handler, _, _ := newTestHandler(t)
	mux := http.NewServeMux()
	mux.Handle(AdmissionPath, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		cs.served.Add(1)
		handler.ServeHTTP(w, r)
	}))
	cs.srv, err = StartServer(ServerConfig{BindAddress: "127.0.0.1:0", Certs: certs, ClientCA: clientCA}, mux, whLogger())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.srv.Shutdown(context.Background()) })
	return cs
}

// review posts an admission review presenting certs (none: no client certificate) and returns
// the status code, or the error when there is no HTTP answer at all.
func (cs clientCAServer) review(t *testing.T, certs ...tls.Certificate) (int, error) {
	t.Helper()
	transport := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: cs.serverCA, Certificates: certs}}
	defer transport.CloseIdleConnections()
	client := &http.Client{Timeout: 10 * time.Second, Transport: transport}
	body := reviewCase{op: "CREATE", namespace: "team-a", name: "app", object: cmObject("app", map[string]any{"k": "v"})}.review(t)
	resp, err := client.Post("https://"+cs.srv.Addr()+AdmissionPath, "application/json", bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	_ = resp.Body.Close()
	return resp.StatusCode, nil
}

func TestClientCAAdmitsOnlyCallersWithACertificateOfThatCA(t *testing.T) {
	trusted, other := mustCA(t), mustCA(t)
	caFile := filepath.Join(t.TempDir(), "ca.crt")
	writeFileAtomically(t, caFile, trusted.certPEM)
	cs := startClientCAServer(t, caFile)

	cases := []struct {
		name  string
		certs []tls.Certificate
		want  int // 0: refused at the TLS handshake, no HTTP answer
	}{
		{"no client certificate is refused", nil, 0},
		{"a certificate of another CA is refused", []tls.Certificate{newClientCert(t, other, "kube-apiserver")}, 0},
		{"a certificate of the configured CA is answered", []tls.Certificate{newClientCert(t, trusted, "kube-apiserver")}, http.StatusOK},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := cs.served.Load()
			status, err := cs.review(t, tc.certs...)
			if status != tc.want {
				t.Fatalf("status %d (err %v), want %d", status, err, tc.want)
			}
			if tc.want == 0 && (err == nil || !strings.Contains(err.Error(), "remote error: tls:")) {
				t.Fatalf("err = %v, want the server's TLS alert", err)
			}
			if tc.want == 0 && cs.served.Load() != before {
				t.Fatal("a refused caller reached the handler")
			}
		})
	}

	t.Run("a replaced CA file applies to the next connection", func(t *testing.T) {
		cs.clientCA.checkEvery = 0 // look at the file on every handshake from here on
		writeFileAtomically(t, caFile, other.certPEM)
		if status, err := cs.review(t, newClientCert(t, other, "kube-apiserver")); status != http.StatusOK {
			t.Fatalf("a certificate of the new CA: status %d (err %v), want 200", status, err)
		}
		if status, _ := cs.review(t, newClientCert(t, trusted, "kube-apiserver")); status != 0 {
			t.Fatalf("a certificate of the replaced CA: status %d, want refused", status)
		}
		writeFileAtomically(t, caFile, []byte("not a certificate"))
		if status, err := cs.review(t, newClientCert(t, other, "kube-apiserver")); status != http.StatusOK {
			t.Fatalf("after a broken CA file: status %d (err %v), want the last good CA kept", status, err)
		}
	})
}

func TestLoadClientCARefusesAFileWithoutCertificates(t *testing.T) {
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty.crt")
	writeFileAtomically(t, empty, []byte("nothing here"))
	for _, path := range []string{empty, filepath.Join(dir, "missing.crt")} {
		if _, err := LoadClientCA(path); err == nil {
			t.Errorf("LoadClientCA(%s) gave a client CA", filepath.Base(path))
		}
	}
}
