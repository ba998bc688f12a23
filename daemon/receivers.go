package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"

	"github.com/configbutler/gitops-reverser/httpserver"
	"github.com/configbutler/gitops-reverser/metrics"
	"github.com/configbutler/gitops-reverser/receiver"
)

// receivers serves the Receivers' webhooks (Git hosts, CDEvents) beside the mirror: a verified
// push makes its destinations reconcile now instead of on their interval. It is optional: while
// its port cannot be bound it is degraded and retries, and the mirror runs on.
type receivers struct {
	cfg      ServerConfig
	ctl      *receiver.Controller
	handler  http.Handler
	optional *optionalParts
	log      *slog.Logger
}

func newReceivers(s shared, cfg ServerConfig, wb *writeBack) (*receivers, error) {
	log := s.log.With("part", metrics.PartReceivers)
	index := &receiver.Index{}
	ctl, err := receiver.NewController(receiver.ControllerConfig{Kube: s.kube, Index: index, Namespace: s.namespace, Log: log})
	if err != nil {
		return nil, err
	}
	s.optional.track(metrics.PartReceivers, "webhooks of Git hosts are not served: destinations reconcile on their interval only")
	return &receivers{
		cfg: cfg, ctl: ctl, optional: s.optional, log: log,
		handler: receiver.NewHandler(receiver.HandlerConfig{
			Index: index, Deliveries: receiver.NewDeliveries(0, 0, nil), Trigger: wb.ctl.SyncNow,
			Observe: ctl.Observe, Metrics: s.reg.Receiver, Log: log,
		}),
	}, nil
}

// Run listens (retrying while the port is taken), then serves and keeps the index in step with
// the Receivers until ctx ends.
func (r *receivers) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() {
		if err := r.ctl.Run(ctx); err != nil && !errors.Is(err, context.Canceled) {
			r.log.Error("receiver controller stopped", "err", err)
		}
	})
	var srv *httpserver.Server
	listening := r.optional.retry(ctx, metrics.PartReceivers, func() (problem, bool) {
		var err error
		srv, err = httpserver.Listen(httpserver.Config{
			Name:        "receiver",
			BindAddress: r.cfg.BindAddress, CertDir: r.cfg.CertDir,
			Handler: r.handler, Log: r.log,
		})
		return problem{
			what: fmt.Sprintf("listen on %s: %v", r.cfg.BindAddress, err),
			fix:  "free the port or choose another --" + keyReceiverBindAddress + " (and --" + keyReceiverCertDir + " must hold tls.crt and tls.key)",
		}, err == nil
	})
	if !listening {
		return nil
	}
	r.optional.fine(metrics.PartReceivers)
	return srv.Run(ctx)
}
