package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"k8s.io/client-go/rest"
)

// readiness answers /readyz: ready once the CRDs are established and while the apiserver answers.
// Degraded optional parts are listed in the body but leave the answer as it is: the mirror works
// without them, so the Pod stays in its Services.
type readiness struct {
	crds     *crdInstall // nil until the daemon starts installing them
	api      rest.Interface
	optional *optionalParts
	// role says whether this replica leads or stands by; unset without leader election.
	role atomic.Pointer[leadership]
}

func (r *readiness) check(ctx context.Context) error {
	if r.crds == nil || !r.crds.done.Load() {
		return errors.New("CRDs not established yet")
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if err := r.api.Get().AbsPath("/version").Do(ctx).Error(); err != nil {
		return fmt.Errorf("kubernetes API unreachable: %w", err)
	}
	return nil
}

func healthMux(ready *readiness) *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, req *http.Request) {
		var body strings.Builder
		status := http.StatusOK
		if err := ready.check(req.Context()); err != nil {
			status = http.StatusServiceUnavailable
			body.WriteString("not ready: " + err.Error() + "\n")
		} else {
			body.WriteString("ok\n")
		}
		if l := ready.role.Load(); l != nil {
			body.WriteString(l.role() + "\n")
		}
		if ready.optional != nil {
			for _, line := range ready.optional.report() {
				body.WriteString(line + "\n")
			}
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.WriteHeader(status)
		_, _ = w.Write([]byte(body.String()))
	})
	return mux
}

// httpServer is a plain-HTTP server with named limits. It listens before serving, so a bind error
// surfaces at start instead of in a goroutine.
type httpServer struct {
	name string
	srv  *http.Server
	done chan error
}

func startHTTPServer(name, addr string, handler http.Handler, log *slog.Logger) (*httpServer, error) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen for %s on %s: %w", name, addr, err)
	}
	s := &httpServer{
		name: name,
		srv: &http.Server{
			Handler:           handler,
			ReadHeaderTimeout: 5 * time.Second,
			ReadTimeout:       10 * time.Second,
			WriteTimeout:      30 * time.Second,
			IdleTimeout:       90 * time.Second,
			MaxHeaderBytes:    16 << 10,
		},
		done: make(chan error, 1),
	}
	log.Info("serving", "server", name, "address", l.Addr().String())
	go func() { s.done <- s.srv.Serve(l) }()
	return s, nil
}

// shutdown stops accepting requests and waits up to 5 s for those in flight.
func (s *httpServer) shutdown() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.srv.Shutdown(ctx); err != nil {
		return fmt.Errorf("shut down %s server: %w", s.name, err)
	}
	if err := <-s.done; !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("%s server: %w", s.name, err)
	}
	return nil
}
