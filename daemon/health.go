package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/client-go/rest"

	"github.com/configbutler/gitops-reverser/httpserver"
	"github.com/configbutler/gitops-reverser/metrics"
	"github.com/configbutler/gitops-reverser/shard"
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
	// shards says which shards this replica owns; unset without --shards=auto.
	shards atomic.Pointer[shard.Set]
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
		if set := ready.shards.Load(); set != nil {
			body.WriteString(shardsLine(set) + "\n")
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

// endpoints are the metrics and health servers: plain HTTP, up for the daemon's whole life, and
// required: a port in use is an error at start, not a degraded part.
type endpoints struct {
	servers []*httpserver.Server
}

// listenEndpoints listens for metrics and health; on an error nothing is left listening.
func listenEndpoints(cfg EndpointsConfig, reg *metrics.Registry, ready *readiness, log *slog.Logger) (*endpoints, error) {
	e := &endpoints{}
	for _, c := range []httpserver.Config{
		{Name: "metrics", BindAddress: cfg.MetricsBindAddress, Handler: reg.Handler(), Log: log},
		{Name: "health", BindAddress: cfg.HealthBindAddress, Handler: healthMux(ready), Log: log},
	} {
		srv, err := httpserver.Listen(c)
		if err != nil {
			for _, s := range e.servers {
				err = errors.Join(err, s.Close())
			}
			return nil, err
		}
		e.servers = append(e.servers, srv)
	}
	return e, nil
}

// Run serves metrics and health until ctx ends and both servers have shut down.
func (e *endpoints) Run(ctx context.Context) error {
	errs := make([]error, len(e.servers))
	var wg sync.WaitGroup
	for i, srv := range e.servers {
		wg.Go(func() { errs[i] = srv.Run(ctx) })
	}
	wg.Wait()
	return errors.Join(errs...)
}
