package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"k8s.io/client-go/discovery"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

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
	inst := newCRDInstall(kube, cfg.InstallCRDs, log)
	ready := &readiness{api: disco.RESTClient(), optional: optional, crds: inst}

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

	// The CRDs are applied beside everything else: the mirror waits only for its own kinds.
	ctx, cancel := context.WithCancel(ctx)
	var installing sync.WaitGroup
	installing.Go(func() { _ = inst.Run(ctx) })
	defer func() { cancel(); installing.Wait() }()
	log.Info("started", "host", kube.Host, "installCRDs", cfg.InstallCRDs, "watchIngestion", cfg.EnableWatchIngestion)

	if cfg.EnableWatchIngestion {
		// runMirror returns when ctx ends, or early when the mirror cannot start at all (e.g. the
		// cluster's identity cannot be read): then the daemon exits instead of staying up, ready
		// and idle, so the failure shows as a restarting Pod. Attribution never ends it.
		// With leader election it runs only while this replica leads.
		lead := func(ctx context.Context, fence gitops.Fence) error {
			return runMirror(ctx, cfg, kube, core, reg, optional, fence, inst, log)
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
// mirror's own errors end this. The mirror starts once its own kinds are served and the files of
// waiting proposals are held; the parts beside it once every CRD is established.
func runMirror(ctx context.Context, cfg Config, kube *rest.Config, core corev1client.CoreV1Interface, reg *metrics.Registry,
	optional *optionalParts, fence gitops.Fence, inst *crdInstall, log *slog.Logger) error {
	var attr *attribution
	if cfg.EnableWebhook {
		var err error
		if attr, err = newAttribution(cfg, kube, core, reg.Attribution, optional, log); err != nil {
			return err
		}
	}
	credits := writeback.NewCredits()
	var wb *writeBack
	held := make(chan struct{})
	hooks := mirrorHooks{
		authors:      creditChain{credits: credits, attr: attr},
		onHeldChange: func(url, branch, path string) { wb.heldChanged(url, branch, path) },
		fence:        fence,
		writable:     held,
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
	wg.Go(func() { // the holds need the Proposal kind; the mirror writes nothing before them
		if wait(besideCtx, inst.all) {
			wb.loadHolds(besideCtx)
		}
		close(held)
	})
	for i, part := range beside {
		wg.Go(func() {
			if wait(besideCtx, inst.all) {
				errs[i+1] = part.Run(besideCtx)
			}
		})
	}
	if wait(ctx, inst.mirror) {
		errs[len(errs)-1] = mirror.Run(ctx)
	}
	stopBeside()
	stopSide()
	wg.Wait()
	return errors.Join(errs...)
}

// The client-side rate limit of the daemon's requests. client-go's default of 5 per second would
// make the start (CRDs, config caches, discovery, the first pages of every list) wait for itself;
// the apiserver's priority and fairness protects it from a burst.
const (
	clientQPS   = 50
	clientBurst = 100
)

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
	cfg.QPS, cfg.Burst = clientQPS, clientBurst
	return cfg, nil
}
