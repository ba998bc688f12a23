package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"k8s.io/client-go/discovery"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/configbutler/gitops-reverser/crds"
	"github.com/configbutler/gitops-reverser/gitops"
	"github.com/configbutler/gitops-reverser/metrics"
	"github.com/configbutler/gitops-reverser/writeback"
)

// serve starts the components in dependency order, waits for ctx to end, and stops them in
// reverse order.
func serve(ctx context.Context, cfg Config, log *slog.Logger) error {
	kube, err := restConfig(cfg.Kubeconfig)
	if err != nil {
		return err
	}
	core, err := corev1client.NewForConfig(kube)
	if err != nil {
		return fmt.Errorf("build kubernetes client: %w", err)
	}
	disco, err := discovery.NewDiscoveryClientForConfig(kube)
	if err != nil {
		return fmt.Errorf("build discovery client: %w", err)
	}
	reg := metrics.New()
	optional := newOptionalParts(reg.Health.Degraded, log)
	ready := &readiness{api: disco.RESTClient(), optional: optional}

	eps, err := listenEndpoints(cfg, reg, ready, log)
	if err != nil {
		return err
	}
	// Metrics and health serve until everything else has stopped, so probes answer while the
	// mirror flushes.
	epsCtx, stopEps := context.WithCancel(context.WithoutCancel(ctx))
	epsDone := make(chan error, 1)
	go func() { epsDone <- eps.Run(epsCtx) }()
	stopServers := func() error { stopEps(); return <-epsDone }

	ensureCRDs(ctx, kube, cfg.InstallCRDs, log)
	if ctx.Err() != nil {
		return stopServers()
	}
	ready.crdsEstablished.Store(true)
	log.Info("started", "host", kube.Host, "installCRDs", cfg.InstallCRDs, "watchIngestion", cfg.EnableWatchIngestion)

	if cfg.EnableWatchIngestion {
		// runMirror returns when ctx ends, or early when the mirror cannot start at all (e.g. the
		// cluster's identity cannot be read): then the daemon exits instead of staying up, ready
		// and idle, so the failure shows as a restarting Pod. Attribution never ends it.
		// With leader election it runs only while this replica leads.
		lead := func(ctx context.Context, fence gitops.Fence) error {
			return runMirror(ctx, cfg, kube, core, reg, optional, fence, log)
		}
		if err := leadOrStandBy(ctx, cfg, kube, core, reg, optional, ready, lead, log); err != nil {
			log.Error("mirror stopped", "err", err)
			return errors.Join(err, stopServers())
		}
	}
	<-ctx.Done()
	log.Info("shutting down")
	return stopServers()
}

// leadOrStandBy runs lead while this replica leads: always without --leader-elect, else while it
// holds the Lease, with every push fenced by it.
func leadOrStandBy(ctx context.Context, cfg Config, kube *rest.Config, core corev1client.CoreV1Interface, reg *metrics.Registry,
	optional *optionalParts, ready *readiness, lead func(context.Context, gitops.Fence) error, log *slog.Logger) error {
	if !cfg.LeaderElect {
		reg.Health.Leader.Set(1)
		return lead(ctx, nil)
	}
	l, err := newLeadership(cfg, kube, core, reg, optional, log)
	if err != nil {
		return err
	}
	ready.role.Store(l)
	return l.Run(ctx, func(ctx context.Context) error { return lead(ctx, l.fence.check) })
}

// runMirror runs the cluster → Git mirror until ctx ends and every worker has flushed, with the
// optional parts beside it: the admission webhook crediting authors (unless disabled),
// write-back, the Receivers' webhooks (when --receiver-bind-address is set) and the operator page
// (when --ui-bind-address is set). Optional parts degrade instead of failing, so only the
// mirror's own errors end this.
func runMirror(ctx context.Context, cfg Config, kube *rest.Config, core corev1client.CoreV1Interface, reg *metrics.Registry,
	optional *optionalParts, fence gitops.Fence, log *slog.Logger) error {
	var attr *attribution
	if cfg.EnableWebhook {
		var err error
		if attr, err = newAttribution(cfg, kube, core, reg.Attribution, optional, log); err != nil {
			return err
		}
	}
	credits := writeback.NewCredits()
	var wb *writeBack
	hooks := mirrorHooks{
		authors:      creditChain{credits: credits, attr: attr},
		onHeldChange: func(url, branch, path string) { wb.heldChanged(url, branch, path) },
		fence:        fence,
	}
	if attr != nil {
		hooks.onWatched = attr.onWatched
	}
	mirror, err := newMirror(ctx, cfg, kube, core, reg.Mirror, hooks, log)
	if err != nil {
		return err
	}
	if wb, err = newWriteBack(cfg, kube, mirror, attr, credits, reg.WriteBack, optional, log); err != nil {
		return err
	}
	// Every part beside the mirror is built before any starts, so a failure leaves nothing running.
	beside := []interface{ Run(context.Context) error }{wb}
	if cfg.ReceiverBindAddress != "" {
		rcv, err := newReceivers(cfg, kube, wb, reg.Receiver, optional, log)
		if err != nil {
			return err
		}
		beside = append(beside, rcv)
	}
	if cfg.UIBindAddress != "" {
		page, err := newOperatorPage(cfg, kube, mirror.pool, optional, log)
		if err != nil {
			return err
		}
		beside = append(beside, page)
	}
	wb.loadHolds(ctx) // before the mirror writes every live object
	// The mirror stops first (it flushes its workers), then the parts beside it; attribution last:
	// the mirror reads the correlation store until its last watch event.
	errs := make([]error, len(beside)+2)
	var wg sync.WaitGroup
	sideCtx, stopSide := context.WithCancel(context.WithoutCancel(ctx))
	if attr != nil {
		wg.Go(func() { errs[0] = attr.Run(sideCtx) })
	}
	besideCtx, stopBeside := context.WithCancel(ctx)
	defer stopBeside()
	for i, part := range beside {
		wg.Go(func() { errs[i+1] = part.Run(besideCtx) })
	}
	errs[len(errs)-1] = mirror.Run(ctx)
	stopBeside()
	stopSide()
	wg.Wait()
	return errors.Join(errs...)
}

// ensureCRDs applies the CRDs (or, when another tool owns them, waits for them), retrying with
// backoff while the apiserver is unreachable, until they are established or ctx ends. The daemon
// stays unready meanwhile.
func ensureCRDs(ctx context.Context, kube *rest.Config, install bool, log *slog.Logger) {
	backoff := 500 * time.Millisecond
	for {
		var err error
		if install {
			err = crds.Install(ctx, kube, log)
		} else {
			err = crds.WaitEstablished(ctx, kube, log)
		}
		if err == nil {
			return
		}
		log.Error("CRDs not established; retrying", "install", install, "err", err, "in", backoff)
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 30*time.Second)
	}
}

// restConfig loads an explicit kubeconfig, else $KUBECONFIG or ~/.kube/config, else the
// in-cluster configuration.
func restConfig(path string) (*rest.Config, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = path
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, nil).ClientConfig()
	if err != nil {
		return nil, &ConfigError{Err: fmt.Errorf("%s: load kubernetes client config: %w", keyKubeconfig, err)}
	}
	cfg.UserAgent = "gitops-reverser"
	return cfg, nil
}
