package httpserver

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/configbutler/gitops-reverser/testenv"
	"go.uber.org/goleak"
)

// mustServe listens with cfg (on a free loopback port unless cfg says where) and runs the server
// until the test ends, then checks that Run returned cleanly.
func mustServe(t *testing.T, cfg Config) *Server {
	t.Helper()
	if cfg.BindAddress == "" {
		cfg.BindAddress = "127.0.0.1:0"
	}
	if cfg.Name == "" {
		cfg.Name = "test"
	}
	s, err := Listen(cfg)
	if err != nil {
		t.Fatalf("Listen: %v", err)
	}
	runListening(t, s)
	return s
}

// runListening runs s until the test ends, then checks that Run returned cleanly.
func runListening(t *testing.T, s *Server) {
	t.Helper()
	testenv.Run(t, s)
}

// newClient is an HTTP/1.1 client trusting roots (none: plain HTTP); its idle connections close
// when the test ends, so no goroutine outlives it.
func newClient(t *testing.T, roots *x509.CertPool, certs ...tls.Certificate) *http.Client {
	t.Helper()
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, Certificates: certs, MinVersion: tls.VersionTLS12}}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Timeout: 10 * time.Second, Transport: tr}
}

func TestListenFailsOnAPortInUse(t *testing.T) {
	first, err := Listen(Config{Name: "first", BindAddress: "127.0.0.1:0", Handler: http.NotFoundHandler()})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = first.Close() }()
	second, err := Listen(Config{Name: "second", BindAddress: first.Addr(), Handler: http.NotFoundHandler()})
	if err == nil {
		_ = second.Close()
		t.Fatalf("Listen on %s, a port in use, succeeded", first.Addr())
	}
	if !errors.Is(err, syscall.EADDRINUSE) {
		t.Fatalf("err = %v, want EADDRINUSE", err)
	}
}

func TestListenRefusesAnIncompleteConfig(t *testing.T) {
	caFile := t.TempDir() + "/ca.crt"
	writeFileAtomically(t, caFile, newTestCA(t).pem)
	clientCA, err := LoadClientCA(caFile)
	if err != nil {
		t.Fatal(err)
	}
	certDir := t.TempDir()
	writeServingPair(t, certDir, newTestCA(t))
	fc, err := NewFileCerts(certDir)
	if err != nil {
		t.Fatal(err)
	}
	h := http.NotFoundHandler()
	for name, cfg := range map[string]Config{
		"CertDirWithoutPair":     {BindAddress: "127.0.0.1:0", Handler: h, CertDir: t.TempDir()},
		"CertDirAndCerts":        {BindAddress: "127.0.0.1:0", Handler: h, CertDir: certDir, Certs: fc},
		"ClientCAWithoutTLS":     {BindAddress: "127.0.0.1:0", Handler: h, ClientCA: clientCA},
		"NoHandler":              {BindAddress: "127.0.0.1:0"},
		"NoAddress":              {Handler: h},
		"UnparseableBindAddress": {BindAddress: "not an address", Handler: h},
	} {
		if s, err := Listen(cfg); err == nil {
			_ = s.Close()
			t.Errorf("%s: Listen did not fail", name)
		}
	}
}

func TestRunReturnsAfterCancelWithNoGoroutineLeft(t *testing.T) {
	defer goleak.VerifyNone(t)
	release := make(chan struct{})
	var started atomic.Bool
	slow := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		started.Store(true)
		<-release
		_, _ = w.Write([]byte("done"))
	})
	s, err := Listen(Config{Name: "test", BindAddress: "127.0.0.1:0", Handler: slow})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()

	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	answered := make(chan string, 1)
	go func() {
		resp, err := (&http.Client{Transport: tr}).Get("http://" + s.Addr() + "/")
		if err != nil {
			answered <- "error: " + err.Error()
			return
		}
		body, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		answered <- string(body)
	}()
	waitFor(t, "the request to reach the handler", started.Load)
	cancel()
	// Shutdown closes the listener first; a Close instead would also have cut the request off.
	waitFor(t, "the listener to close", func() bool {
		c, err := net.Dial("tcp", s.Addr())
		if err == nil {
			_ = c.Close()
		}
		return err != nil
	})
	select {
	case err := <-done:
		t.Fatalf("Run returned (%v) with a request in flight", err)
	default:
	}
	close(release) // the request in flight finishes within the shutdown timeout
	if got := <-answered; got != "done" {
		t.Fatalf("the request in flight got %q, want it answered", got)
	}
	if err := <-done; err != nil {
		t.Fatalf("Run after cancel: %v", err)
	}
}

func TestLimitsAreApplied(t *testing.T) {
	var served atomic.Int32
	echo := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		served.Add(1)
		if _, err := io.ReadAll(r.Body); err != nil {
			var tooLarge *http.MaxBytesError
			if errors.As(err, &tooLarge) {
				http.Error(w, err.Error(), http.StatusRequestEntityTooLarge)
				return
			}
			http.Error(w, err.Error(), http.StatusBadRequest)
		}
	})
	s := mustServe(t, Config{Handler: echo, Limits: Limits{MaxBodyBytes: 1 << 10, MaxHeaderBytes: 4 << 10}})
	client := newClient(t, nil)
	cases := []struct {
		name, method, header, body string
		want                       int
	}{
		{"small request is served", http.MethodPost, "x", "{}", http.StatusOK},
		{"body at the limit is served", http.MethodPost, "x", strings.Repeat("a", 1<<10), http.StatusOK},
		{"body over MaxBodyBytes gets 413", http.MethodPost, "x", strings.Repeat("a", 1<<10+1), http.StatusRequestEntityTooLarge},
		{"header over MaxHeaderBytes gets 431", http.MethodGet, strings.Repeat("a", 16<<10), "", http.StatusRequestHeaderFieldsTooLarge},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequest(tc.method, "http://"+s.Addr()+"/", strings.NewReader(tc.body))
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
	limits := s.srv
	if limits.ReadHeaderTimeout != defaultLimits.ReadHeaderTimeout || limits.IdleTimeout != defaultLimits.IdleTimeout {
		t.Fatalf("unset limits did not take the defaults: %+v", limits)
	}
}

// waitFor polls cond until it holds, failing the test after 10 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testenv.Eventually(t, 10*time.Second, what, func() (bool, string) { return cond(), "" })
}
