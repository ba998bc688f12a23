package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/configbutler/gitops-reverser/gitops"
	"github.com/configbutler/gitops-reverser/kube"
	"github.com/configbutler/gitops-reverser/metrics"
)

// shared is what every part of the daemon is built from besides its own section of the
// configuration: the clients, the metrics, the record of optional parts, the log, and the facts
// all parts share.
type shared struct {
	kube      *rest.Config
	dyn       dynamic.Interface
	reg       *metrics.Registry
	optional  *optionalParts
	log       *slog.Logger
	namespace string           // the daemon's own
	bot       gitops.Signature // the daemon in Git
	workDir   string           // where the clones live
	inCluster bool
	self      *daemonUser // who the apiserver says the daemon is
}

// serve starts the components in dependency order, waits for ctx to end, and stops them in
// reverse order.
func serve(ctx context.Context, cfg Config, log *slog.Logger) error {
	restCfg, err := restConfig(cfg.Kubeconfig)
	if err != nil {
		return err
	}
	dyn, err := dynamic.NewForConfig(restCfg)
	if err != nil {
		return fmt.Errorf("build kubernetes client: %w", err)
	}
	api, err := kube.RESTClient(restCfg)
	if err != nil {
		return err
	}
	reg := metrics.New()
	s := shared{kube: restCfg, dyn: dyn, reg: reg, optional: newOptionalParts(reg.Health.Degraded, log), log: log,
		namespace: cfg.Namespace, bot: cfg.Bot, workDir: cfg.WorkDir, inCluster: cfg.InCluster}
	s.self = &daemonUser{dyn: dyn}
	ensureNamespace(ctx, dyn, cfg.Namespace, log)
	inst := newCRDInstall(restCfg, cfg.InstallCRDs, cfg.ApproverPolicy, cfg.Namespace, s.self, log)
	ready := &readiness{api: api, optional: s.optional, crds: inst}

	eps, err := listenEndpoints(cfg.Endpoints, reg, ready, log)
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
	log.Info("started", "host", restCfg.Host, "installCRDs", cfg.InstallCRDs, "watchIngestion", cfg.Mirror.Enabled)

	if cfg.Mirror.Enabled {
		if err := runMirror(ctx, s, cfg, ready, inst); err != nil {
			log.Error("mirror stopped", "err", err)
			return errors.Join(err, stopServers())
		}
	}
	<-ctx.Done()
	log.Info("shutting down")
	return stopServers()
}

// runMirror runs the mirror and the parts beside it: while this replica leads (with leader
// election), or on the shards it owns. It returns when ctx ends, or early when the mirror cannot
// start at all (e.g. the cluster's identity cannot be read): then the daemon exits instead of
// staying up, ready and idle, so the failure shows as a restarting Pod. Attribution never ends it.
func runMirror(ctx context.Context, s shared, cfg Config, ready *readiness, inst *crdInstall) error {
	if cfg.Leader.Shards {
		return runSharded(ctx, s, cfg, ready, inst)
	}
	work := func(ctx context.Context, fence gitops.Fence) error {
		var fences gitops.Fences
		if fence != nil {
			fences = func(string, string) gitops.Fence { return fence }
		}
		parts, err := buildLeaderParts(ctx, s, cfg, leaderDeps{fences: fences, crds: inst})
		if err != nil {
			return err
		}
		return parts.Run(ctx)
	}
	return leadOrStandBy(ctx, s, cfg.Leader, ready, work)
}

// leadOrStandBy runs work while this replica leads: always without --leader-elect, else while it
// holds the Lease, with every push fenced by it.
func leadOrStandBy(ctx context.Context, s shared, cfg LeaderConfig, ready *readiness, work lead) error {
	if !cfg.Elect {
		s.reg.Health.Leader.Set(1)
		return work(ctx, nil)
	}
	l, err := newLeadership(s, cfg, leaderIdentity(cfg.PodName), work)
	if err != nil {
		return err
	}
	ready.role.Store(l)
	return l.Run(ctx)
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
