package daemon

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"k8s.io/client-go/rest"

	"github.com/configbutler/gitops-reverser/metrics"
	"github.com/configbutler/gitops-reverser/receiver"
)

// receivers serves the Receivers' webhooks (Git hosts, CDEvents) beside the mirror: a verified
// push makes its destinations reconcile now instead of on their interval. It is optional: while
// its port cannot be bound it is degraded and retries, and the mirror runs on.
type receivers struct {
	cfg      Config
	ctl      *receiver.Controller
	handler  http.Handler
	optional *optionalParts
	log      *slog.Logger
}

func newReceivers(cfg Config, kube *rest.Config, wb *writeBack, m *metrics.Receiver, optional *optionalParts, log *slog.Logger) (*receivers, error) {
	log = log.With("part", metrics.PartReceivers)
	index := &receiver.Index{}
	ctl, err := receiver.NewController(receiver.ControllerConfig{Kube: kube, Index: index, Namespace: cfg.Namespace, Log: log})
	if err != nil {
		return nil, err
	}
	optional.track(metrics.PartReceivers, "webhooks of Git hosts are not served: destinations reconcile on their interval only")
	return &receivers{
		cfg: cfg, ctl: ctl, optional: optional, log: log,
		handler: receiver.NewHandler(receiver.HandlerConfig{
			Index: index, Deliveries: receiver.NewDeliveries(0, 0, nil), Trigger: wb.ctl.SyncNow,
			Observe: ctl.Observe, Metrics: m, Log: log,
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
	backoff := attributionMinBackoff
	for {
		srv, err := receiver.StartServer(receiver.ServerConfig{
			BindAddress: r.cfg.ReceiverBindAddress, CertDir: r.cfg.ReceiverCertDir,
			Handler: r.handler, Log: r.log,
		})
		if err == nil {
			r.optional.fine(metrics.PartReceivers)
			return srv.Run(ctx)
		}
		r.optional.degraded(metrics.PartReceivers, problem{
			what: "listen on " + r.cfg.ReceiverBindAddress + ": " + err.Error(),
			fix:  "free the port or choose another --" + keyReceiverBindAddress + " (and --" + keyReceiverCertDir + " must hold tls.crt and tls.key)",
		})
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, attributionMaxBackoff)
	}
}
