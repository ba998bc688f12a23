package webhook

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"
)

// DefaultBindAddress is where the webhook server listens when ServerConfig.BindAddress is empty.
const DefaultBindAddress = ":9443"

// Named limits of the webhook server. An AdmissionReview carries the object and, for updates, the
// old object too; etcd caps an object near 1.5 MiB, so 8 MiB leaves room for both plus JSON overhead.
const (
	defaultMaxBodyBytes = 8 << 20
	readHeaderTimeout   = 5 * time.Second
	readTimeout         = 10 * time.Second
	writeTimeout        = 10 * time.Second
	idleTimeout         = 90 * time.Second
	maxHeaderBytes      = 16 << 10
)

// ServerConfig is how the webhook server listens and which certificate it presents.
type ServerConfig struct {
	// BindAddress is host:port; empty means DefaultBindAddress.
	BindAddress string
	// Certs provides the serving certificate on every handshake, so a rotated certificate is
	// served without a restart.
	Certs CertSource
	// MaxBodyBytes caps a request body; 0 means 8 MiB.
	MaxBodyBytes int64
	// ClientCA, if set, makes the server require a client certificate signed by one of its CAs:
	// a caller without one is refused at the TLS handshake, before any handler runs.
	ClientCA *ClientCA
}

// Server is the running HTTPS server of the webhook handlers.
type Server struct {
	srv  *http.Server
	addr string
	done chan struct{}
	err  error // Serve's result, readable once done is closed
}

// StartServer listens first, so a bind error is returned here, then serves TLS 1.2+ with mux in
// the background until Shutdown.
func StartServer(cfg ServerConfig, mux http.Handler, log *slog.Logger) (*Server, error) {
	if cfg.Certs == nil {
		return nil, errors.New("start webhook server: no certificate source")
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	addr := cfg.BindAddress
	if addr == "" {
		addr = DefaultBindAddress
	}
	maxBody := cfg.MaxBodyBytes
	if maxBody <= 0 {
		maxBody = defaultMaxBodyBytes
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen for webhook server on %s: %w", addr, err)
	}
	s := &Server{
		srv: &http.Server{
			Handler:           http.MaxBytesHandler(mux, maxBody),
			TLSConfig:         tlsConfig(cfg),
			ReadHeaderTimeout: readHeaderTimeout,
			ReadTimeout:       readTimeout,
			WriteTimeout:      writeTimeout,
			IdleTimeout:       idleTimeout,
			MaxHeaderBytes:    maxHeaderBytes,
			// TLS handshake failures land here: a caBundle that does not match shows up this way.
			ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn),
		},
		addr: l.Addr().String(),
		done: make(chan struct{}),
	}
	log.Info("serving", "server", "webhook", "address", s.addr)
	go func() {
		defer close(s.done)
		s.err = s.srv.ServeTLS(l, "", "") // certificates come from TLSConfig.GetCertificate
	}()
	return s, nil
}

// tlsConfig serves cfg.Certs; with a client CA, every handshake gets a config that requires a
// client certificate verified against the CA file as it is now, so a replaced CA applies to the
// next connection. Session tickets are off then: a resumed session would skip that check.
func tlsConfig(cfg ServerConfig) *tls.Config {
	build := func() *tls.Config {
		c := &tls.Config{
			MinVersion:     tls.VersionTLS12,
			GetCertificate: cfg.Certs.GetCertificate,
			NextProtos:     []string{"h2", "http/1.1"},
		}
		if cfg.ClientCA != nil {
			c.ClientAuth = tls.RequireAndVerifyClientCert
			c.ClientCAs = cfg.ClientCA.Pool()
			c.SessionTicketsDisabled = true
		}
		return c
	}
	c := build()
	if cfg.ClientCA != nil {
		c.GetConfigForClient = func(*tls.ClientHelloInfo) (*tls.Config, error) { return build(), nil }
	}
	return c
}

// Addr is the address the server listens on, with the port resolved when BindAddress asked for :0.
func (s *Server) Addr() string { return s.addr }

// Shutdown stops accepting connections and waits for requests in flight until ctx ends; then it
// closes the remaining connections. Calling it again is harmless.
func (s *Server) Shutdown(ctx context.Context) error {
	var errs []error
	if err := s.srv.Shutdown(ctx); err != nil {
		errs = append(errs, fmt.Errorf("shut down webhook server: %w", err))
		_ = s.srv.Close()
	}
	<-s.done
	if s.err != nil && !errors.Is(s.err, http.ErrServerClosed) {
		errs = append(errs, fmt.Errorf("webhook server: %w", s.err))
	}
	return errors.Join(errs...)
}
