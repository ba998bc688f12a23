package httpserver

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestStartServerPortInUse(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Close() }()
	s, err := Start(Config{Name: "test", BindAddress: l.Addr().String(), Handler: http.NotFoundHandler()})
	if err == nil {
		t.Fatalf("Start on %s, a port in use, served at %s", l.Addr(), s.Addr())
	}
}

func TestStartServerRefusesAMissingCertDirOrConfig(t *testing.T) {
	for name, cfg := range map[string]Config{
		"CertDirWithoutPair": {BindAddress: "127.0.0.1:0", Handler: http.NotFoundHandler(), CertDir: t.TempDir()},
		"NoHandler":          {BindAddress: "127.0.0.1:0"},
		"NoAddress":          {Handler: http.NotFoundHandler()},
	} {
		if _, err := Start(cfg); err == nil {
			t.Errorf("%s: Start did not fail", name)
		}
	}
}

func TestServerStopsWhenContextEnds(t *testing.T) {
	s, err := Start(Config{Name: "test", BindAddress: "127.0.0.1:0", Handler: http.NotFoundHandler()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	resp, err := http.Get("http://" + s.Addr() + "/")
	if err != nil {
		t.Fatalf("GET while serving: %v", err)
	}
	_ = resp.Body.Close()
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run after cancel: %v", err)
	}
	if _, err := net.Dial("tcp", s.Addr()); err == nil {
		t.Fatal("still listening after Run returned")
	}
}

// writeServingCert writes a self-signed tls.crt/tls.key for 127.0.0.1 into dir and returns a
// pool that trusts it.
func writeServingCert(t *testing.T, dir string) *x509.CertPool {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "receiver-test"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses:           []net.IP{net.ParseIP("127.0.0.1")},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	if err := os.WriteFile(filepath.Join(dir, "tls.crt"), certPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "tls.key"),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(certPEM)
	return pool
}

func TestServerServesTLSFromCertDir(t *testing.T) {
	dir := t.TempDir()
	pool := writeServingCert(t, dir)
	hello := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("hello")) })
	s, err := Start(Config{Name: "test", BindAddress: "127.0.0.1:0", CertDir: dir, Handler: hello})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
	defer client.CloseIdleConnections()
	resp, err := client.Get("https://" + s.Addr() + "/")
	if err != nil {
		t.Fatalf("GET over TLS: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK || string(body) != "hello" {
		t.Fatalf("over TLS: %d %q", resp.StatusCode, body)
	}

	// Plain HTTP to the TLS port is answered 400 by net/http, never by the handler.
	resp, err = http.Get("http://" + s.Addr() + "/")
	if err == nil {
		body, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest || string(body) == "hello" {
			t.Fatalf("plain HTTP to the TLS listener: %d %q", resp.StatusCode, body)
		}
	}
}
