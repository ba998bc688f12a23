// Package httpserver is the one HTTP(S) server of the daemon: the admission webhook, the
// Receivers' webhooks, the operator page, metrics and health all serve through it, so every
// endpoint has named limits (Limits), listens before it serves (a bind error surfaces at start),
// and shuts down gracefully when its context ends. It speaks plain HTTP (for probes, scrapes, or
// an Ingress in front) or TLS 1.2+ with certificates from a directory that may be replaced while
// running (FileCerts) or from any other source (Certificates), optionally requiring a client
// certificate of a CA file (ClientCA). Failed TLS handshakes are logged at most once a minute per
// source, so a scanner or a misconfigured caller cannot flood the log.
package httpserver

import (
	"context"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"net"
	"net/http"
)

// Config is where and how a server listens.
type Config struct {
	// Name says which server this is in logs and errors, e.g. "receiver".
	Name string
	// BindAddress is host:port (":0" picks a free port).
	BindAddress string
	// Handler serves every request.
	Handler http.Handler
	// Limits bound requests; zero fields take the package defaults.
	Limits Limits
	// CertDir, when set, holds tls.crt and tls.key: the server speaks TLS 1.2+ and picks up
	// replaced files without a restart (FileCerts).
	CertDir string
	// Certs, when set instead of CertDir, gives the certificate on every handshake.
	// Neither CertDir nor Certs means plain HTTP.
	Certs Certificates
	// ClientCA, when set (TLS only), makes the server require a client certificate signed by one
	// of its CAs: a caller without one is refused at the TLS handshake, before any handler runs.
	ClientCA *ClientCA
	// Log receives the server's own errors (e.g. failed TLS handshakes); nil discards.
	Log *slog.Logger
}

// Server is a listener and its server. Listen listens; Run serves until its context ends.
type Server struct {
	name       string
	srv        *http.Server
	ln         net.Listener
	tls        bool
	addr       string
	log        *slog.Logger
	handshakes *handshakeLog
}

// Listen checks cfg, loads its certificates and listens at once, so a port in use or unreadable
// certificates are an error the caller can report; it starts no goroutine: serving starts with
// Run. A server that will never Run is released with Close.
func Listen(cfg Config) (*Server, error) {
	if cfg.Handler == nil {
		return nil, fmt.Errorf("start %s server: no handler", cfg.Name)
	}
	if cfg.BindAddress == "" {
		return nil, fmt.Errorf("start %s server: no bind address", cfg.Name)
	}
	logger := cfg.Log
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	tlsCfg, err := tlsConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("start %s server: %w", cfg.Name, err)
	}
	ln, err := net.Listen("tcp", cfg.BindAddress)
	if err != nil {
		return nil, fmt.Errorf("listen for %s server on %s: %w", cfg.Name, cfg.BindAddress, err)
	}
	limits := cfg.Limits.withDefaults()
	handler := cfg.Handler
	if limits.MaxBodyBytes > 0 {
		handler = http.MaxBytesHandler(handler, limits.MaxBodyBytes)
	}
	handshakes := newHandshakeLog(slog.NewLogLogger(logger.Handler(), slog.LevelWarn).Writer())
	return &Server{
		name: cfg.Name,
		srv: &http.Server{
			Handler:           handler,
			TLSConfig:         tlsCfg,
			ReadHeaderTimeout: limits.ReadHeaderTimeout,
			ReadTimeout:       limits.ReadTimeout,
			WriteTimeout:      limits.WriteTimeout,
			IdleTimeout:       limits.IdleTimeout,
			MaxHeaderBytes:    limits.MaxHeaderBytes,
			// Failed TLS handshakes land here too: a caBundle that does not match shows this way.
			ErrorLog: log.New(handshakes, "", 0),
		},
		ln:         ln,
		tls:        tlsCfg != nil,
		addr:       ln.Addr().String(),
		log:        logger,
		handshakes: handshakes,
	}, nil
}

// Addr is the address the server listens on, with the port resolved when BindAddress asked for :0.
func (s *Server) Addr() string { return s.addr }

// Close releases the listener of a server whose Run will not be called (e.g. another server
// failed to start). Do not call it after Run.
func (s *Server) Close() error {
	if err := s.ln.Close(); err != nil {
		return fmt.Errorf("close %s server: %w", s.name, err)
	}
	return nil
}

// Run serves until ctx ends, then shuts down gracefully: requests in flight get up to
// shutdownTimeout, then the remaining connections are closed. It returns once its serving
// goroutine has, with nil after a clean shutdown, or early with the error that stopped serving.
// Call it once.
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
