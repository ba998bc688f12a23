// Package httpserver is the HTTP server of the daemon's optional endpoints that people and other
// systems reach over the network (the Receivers' webhooks, the operator page): named limits,
// listen before serve so a bind error surfaces at start, plain HTTP for an Ingress in front or
// TLS 1.2+ from a certificate directory that may be replaced while running, and a graceful
// shutdown when its context ends.
package httpserver

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/configbutler/gitops-reverser/webhook"
)

// Limits of the server. A body is capped by the handler, which knows what it expects.
const (
	readHeaderTimeout = 5 * time.Second
	readTimeout       = 30 * time.Second
	writeTimeout      = 30 * time.Second
	idleTimeout       = 90 * time.Second
	maxHeaderBytes    = 64 << 10
	shutdownTimeout   = 5 * time.Second
)

// Config is where and how a server listens.
type Config struct {
	// Name says which server this is in logs and errors, e.g. "receiver".
	Name string
	// BindAddress is host:port (":0" picks a free port).
	BindAddress string
	// CertDir, when set, holds tls.crt and tls.key: the server speaks TLS 1.2+ and picks up
	// replaced files without a restart. Empty means plain HTTP, for behind an Ingress.
	CertDir string
	// Handler serves every request.
	Handler http.Handler
	// Log receives the server's own errors (e.g. failed TLS handshakes); nil discards.
	Log *slog.Logger
}

// Server is a listener and its server. Start listens; Run serves until its context ends.
type Server struct {
	name string
	srv  *http.Server
	ln   net.Listener
	tls  bool
	addr string
	log  *slog.Logger
}

// Start listens at once, so a port in use or unreadable certificates are an error the
// caller can report; serving starts with Run.
func Start(cfg Config) (*Server, error) {
	if cfg.Handler == nil {
		return nil, fmt.Errorf("start %s server: no handler", cfg.Name)
	}
	if cfg.BindAddress == "" {
		return nil, fmt.Errorf("start %s server: no bind address", cfg.Name)
	}
	log := cfg.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	var tlsConfig *tls.Config
	if cfg.CertDir != "" {
		certs, err := webhook.NewFileCerts(cfg.CertDir)
		if err != nil {
			return nil, fmt.Errorf("start %s server: %w", cfg.Name, err)
		}
		tlsConfig = &tls.Config{
			MinVersion:     tls.VersionTLS12,
			GetCertificate: certs.GetCertificate,
			NextProtos:     []string{"h2", "http/1.1"},
		}
	}
	ln, err := net.Listen("tcp", cfg.BindAddress)
	if err != nil {
		return nil, fmt.Errorf("listen for %s server on %s: %w", cfg.Name, cfg.BindAddress, err)
	}
	return &Server{
		name: cfg.Name,
		srv: &http.Server{
			Handler:           cfg.Handler,
			TLSConfig:         tlsConfig,
			ReadHeaderTimeout: readHeaderTimeout,
			ReadTimeout:       readTimeout,
			WriteTimeout:      writeTimeout,
			IdleTimeout:       idleTimeout,
			MaxHeaderBytes:    maxHeaderBytes,
			ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
		},
		ln:   ln,
		tls:  tlsConfig != nil,
		addr: ln.Addr().String(),
		log:  log,
	}, nil
}

// Addr is the address the server listens on, with the port resolved when BindAddress asked for :0.
func (s *Server) Addr() string { return s.addr }

// Run serves until ctx ends, then shuts down gracefully: requests in flight get up to 5 s, then
// the remaining connections are closed. It returns nil after a clean shutdown. Call it once.
func (s *Server) Run(ctx context.Context) error {
	served := make(chan error, 1)
	go func() {
		if s.tls {
			served <- s.srv.ServeTLS(s.ln, "", "") // certificates come from TLSConfig.GetCertificate
			return
		}
		served <- s.srv.Serve(s.ln)
	}()
	s.log.Info("serving", "server", s.name, "address", s.addr, "tls", s.tls)
	select {
	case err := <-served:
		return fmt.Errorf("%s server: %w", s.name, err)
	case <-ctx.Done():
	}
	shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownTimeout)
	defer cancel()
	var errs []error
	if err := s.srv.Shutdown(shutdownCtx); err != nil {
		errs = append(errs, fmt.Errorf("shut down %s server: %w", s.name, err))
		_ = s.srv.Close()
	}
	if err := <-served; err != nil && !errors.Is(err, http.ErrServerClosed) {
		errs = append(errs, fmt.Errorf("%s server: %w", s.name, err))
	}
	return errors.Join(errs...)
}
