package httpserver

import (
	"crypto/tls"
	"crypto/x509"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

var hello = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("hello")) })

// servedSerial is the serial number of the certificate a handshake with s gets now.
func servedSerial(t *testing.T, s *Server, roots *x509.CertPool) string {
	t.Helper()
	conn, err := tls.Dial("tcp", s.Addr(), &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12})
	if err != nil {
		t.Fatalf("handshake: %v", err)
	}
	defer func() { _ = conn.Close() }()
	return conn.ConnectionState().PeerCertificates[0].SerialNumber.String()
}

func TestServesTLSFromCertDir(t *testing.T) {
	dir := t.TempDir()
	ca := newTestCA(t)
	writeServingPair(t, dir, ca)
	var served atomic.Int32
	s := mustServe(t, Config{CertDir: dir, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		served.Add(1)
		hello.ServeHTTP(w, r)
	})})

	resp, err := newClient(t, ca.pool()).Get("https://" + s.Addr() + "/")
	if err != nil {
		t.Fatalf("GET over TLS: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK || string(body) != "hello" {
		t.Fatalf("over TLS: %d %q", resp.StatusCode, body)
	}

	t.Run("plain HTTP never reaches the handler", func(t *testing.T) {
		before := served.Load()
		resp, err := newClient(t, nil).Get("http://" + s.Addr() + "/")
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode != http.StatusBadRequest {
				t.Fatalf("plain HTTP status = %d, want 400 or an error", resp.StatusCode)
			}
		}
		if served.Load() != before {
			t.Fatal("a plain HTTP request reached the handler")
		}
	})
	t.Run("TLS 1.1 is refused", func(t *testing.T) {
		conn, err := tls.Dial("tcp", s.Addr(), &tls.Config{RootCAs: ca.pool(), MinVersion: tls.VersionTLS10, MaxVersion: tls.VersionTLS11}) //nolint:gosec // the point of the test
		if err == nil {
			_ = conn.Close()
			t.Fatal("TLS 1.1 handshake succeeded")
		}
	})
}

func TestReplacedCertFilesAreServedWithoutRestart(t *testing.T) {
	dir := t.TempDir()
	ca := newTestCA(t)
	first := writeServingPair(t, dir, ca)
	fc, err := NewFileCerts(dir)
	if err != nil {
		t.Fatal(err)
	}
	s := mustServe(t, Config{Certs: fc, Handler: hello})
	if got := servedSerial(t, s, ca.pool()); got != first.SerialNumber.String() {
		t.Fatalf("serving serial %s, want the directory's %s", got, first.SerialNumber)
	}
	if string(fc.CABundle()) != string(ca.pem) {
		t.Fatal("CABundle is not the directory's ca.crt")
	}

	fc.checkEvery = 0 // look at the files on every handshake from here on
	writeServingPair(t, dir, ca, fileTLSCert)
	if got := servedSerial(t, s, ca.pool()); got != first.SerialNumber.String() {
		t.Fatal("a certificate without its key replaced the working pair")
	}
	next := newTestCA(t) // a rotation may bring a new CA too
	second := writeServingPair(t, dir, next)
	if got := servedSerial(t, s, next.pool()); got != second.SerialNumber.String() {
		t.Fatalf("serving serial %s after the files were replaced, want %s", got, second.SerialNumber)
	}
	if string(fc.CABundle()) != string(next.pem) {
		t.Fatal("CABundle did not follow the replaced ca.crt")
	}

	fc.checkEvery = time.Hour // a handshake within the interval does not touch the files
	writeServingPair(t, dir, next)
	if got := servedSerial(t, s, next.pool()); got != second.SerialNumber.String() {
		t.Fatal("files were read again before the check interval passed")
	}
}

func TestNewFileCertsNeedsAPair(t *testing.T) {
	dir := t.TempDir()
	writeServingPair(t, dir, newTestCA(t), fileTLSCert)
	for _, d := range []string{t.TempDir(), dir} {
		if _, err := NewFileCerts(d); err == nil {
			t.Errorf("%s gave a certificate source", d)
		}
	}
}

// review calls s over TLS presenting certs (none: no client certificate) and returns the
// status, or the error when there was no HTTP answer at all.
func review(t *testing.T, s *Server, roots *x509.CertPool, certs ...tls.Certificate) (int, error) {
	t.Helper()
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, Certificates: certs, MinVersion: tls.VersionTLS12}}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Timeout: 10 * time.Second, Transport: tr}).Post("https://"+s.Addr()+"/", "application/json", strings.NewReader("{}"))
	if err != nil {
		return 0, err
	}
	_ = resp.Body.Close()
	return resp.StatusCode, nil
}

func TestClientCARequired(t *testing.T) {
	serverCA, trusted, other := newTestCA(t), newTestCA(t), newTestCA(t)
	caFile := filepath.Join(t.TempDir(), "ca.crt")
	writeFileAtomically(t, caFile, trusted.pem)
	clientCA, err := LoadClientCA(caFile)
	if err != nil {
		t.Fatal(err)
	}
	var served atomic.Int32
	s := mustServe(t, Config{Certs: staticCerts{serverCA.serving(t).tlsCert(t)}, ClientCA: clientCA,
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { served.Add(1); hello.ServeHTTP(w, r) })})

	cases := []struct {
		name  string
		certs []tls.Certificate
		want  int // 0: refused at the TLS handshake, no HTTP answer
	}{
		{"no client certificate is refused", nil, 0},
		{"a certificate of another CA is refused", []tls.Certificate{other.client(t, "kube-apiserver")}, 0},
		{"a certificate of the configured CA is answered", []tls.Certificate{trusted.client(t, "kube-apiserver")}, http.StatusOK},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := served.Load()
			status, err := review(t, s, serverCA.pool(), tc.certs...)
			if status != tc.want {
				t.Fatalf("status %d (err %v), want %d", status, err, tc.want)
			}
			if tc.want == 0 && (err == nil || !strings.Contains(err.Error(), "remote error: tls:")) {
				t.Fatalf("err = %v, want the server's TLS alert", err)
			}
			if tc.want == 0 && served.Load() != before {
				t.Fatal("a refused caller reached the handler")
			}
		})
	}

	t.Run("a replaced CA file applies to the next connection", func(t *testing.T) {
		clientCA.checkEvery = 0 // look at the file on every handshake from here on
		writeFileAtomically(t, caFile, other.pem)
		if status, err := review(t, s, serverCA.pool(), other.client(t, "kube-apiserver")); status != http.StatusOK {
			t.Fatalf("a certificate of the new CA: status %d (err %v), want 200", status, err)
		}
		if status, _ := review(t, s, serverCA.pool(), trusted.client(t, "kube-apiserver")); status != 0 {
			t.Fatalf("a certificate of the replaced CA: status %d, want refused", status)
		}
		writeFileAtomically(t, caFile, []byte("not a certificate"))
		if status, err := review(t, s, serverCA.pool(), other.client(t, "kube-apiserver")); status != http.StatusOK {
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

// staticCerts serves one fixed certificate: a Certificates that is not FileCerts, as the
// webhook's self-managed certificates are not.
type staticCerts struct{ cert tls.Certificate }

func (s staticCerts) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	return &s.cert, nil
}
