package daemon

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"

	"github.com/configbutler/gitops-reverser/gitops"
	"github.com/configbutler/gitops-reverser/httpserver"
	"github.com/configbutler/gitops-reverser/metrics"
	"github.com/configbutler/gitops-reverser/watch"
	"github.com/configbutler/gitops-reverser/webhook"
)

// Backoff of an optional part's start (attribution: its certificates or its port) while it
// cannot start.
const (
	optionalMinBackoff = 500 * time.Millisecond
	optionalMaxBackoff = 30 * time.Second
)

// attribution is the admission webhook side of the daemon: the HTTPS server, its certificates,
// the correlation store, and the registration that makes the apiserver call it for exactly the
// watched resources. It is optional: while any of it cannot work (no namespace for the
// certificate Secret, no permission, a port in use) it is degraded, the mirror keeps running and
// credits changes to the bot, and it retries until it works.
type attribution struct {
	cfg       WebhookConfig
	namespace string
	inCluster bool
	store     *webhook.Store
	decisions *webhook.Decisions // who set each proposal's decision, for write-back
	watched   *webhook.Watched
	registrar *webhook.Registrar
	selfMgd   *webhook.SelfManaged // nil with --webhook-cert-dir
	peers     *webhook.Peers       // nil: a single replica, or peers not wired
	handler   http.Handler
	optional  *optionalParts
	log       *slog.Logger
	metrics   *metrics.Attribution
	bot       gitops.Signature
	remotes   *remoteHooks // attribution on RemoteClusters

	// certs is set by Run before the registrar starts, and read by the registrar's goroutine.
	certs webhook.CertSource
	// registeredByLeader says the registration is cluster-wide work done by register, while this
	// replica leads (--shards=auto), not by Run; serving is closed once Run has its certificates.
	registeredByLeader bool
	serving            chan struct{}
}

// newAttribution builds the parts; it starts nothing and does no I/O, so the daemon starts
// whatever state the cluster is in. Run does the work. peers, when set, lists the other live
// replicas (--shards=auto): every record is handed to them before the apiserver is answered.
func newAttribution(s shared, cfg WebhookConfig, peers func() []string) (*attribution, error) {
	m, log := s.reg.Attribution, s.log
	a := &attribution{
		cfg: cfg, namespace: s.namespace, inCluster: s.inCluster,
		store: webhook.NewStore(webhook.StoreConfig{
			TTL: cfg.CorrelationTTL, Capacity: cfg.CorrelationCapacity, Metrics: m, Bot: s.bot,
		}),
		decisions: webhook.NewDecisions(webhook.DefaultDecisionsCapacity, webhook.DefaultDecisionsTTL, time.Now),
		serving:   make(chan struct{}),
		watched:   &webhook.Watched{},
		optional:  s.optional,
		log:       log,
		metrics:   m,
		bot:       s.bot,
	}

	a.remotes = newRemoteHooks(a)
	opts := []webhook.AdmissionOption{webhook.WithDecisions(a.decisions)}
	if peers != nil {
		var err error
		a.peers, err = webhook.NewPeers(webhook.PeersConfig{
			Store: a.store, StoreFor: a.remotes.storeOf, Addresses: peers, Certs: func() webhook.CertSource { return a.certs },
			ServerName: cfg.ServiceName + "." + s.namespace + ".svc", Metrics: m, Log: log,
		})
		if err != nil {
			return nil, fmt.Errorf("webhook peers: %w", err)
		}
		opts = append(opts, webhook.WithPeers(a.peers))
	}
	a.handler = webhook.NewAdmissionHandler(a.store, a.watched, m, log, opts...)
	a.registrar = webhook.NewRegistrar(webhook.RegistrarConfig{
		Registration: webhook.NewRegistration(webhook.RegistrationConfig{
			Dynamic: s.dyn, Name: cfg.ServiceName, URL: cfg.URL,
			ServiceNamespace: s.namespace, ServiceName: cfg.ServiceName, ServicePort: int32(webhookPort(cfg)),
			Path: webhook.AdmissionPath, CABundle: a.caBundle, TimeoutSeconds: 2,
		}),
		OnApply: a.registered, MaxBackoff: optionalMaxBackoff, Log: log,
	})
	if cfg.CertDir == "" {
		var err error
		var hosts []string
		if u, err := url.Parse(cfg.URL); err == nil && u.Hostname() != "" {
			hosts = append(hosts, u.Hostname())
		}
		a.selfMgd, err = webhook.NewSelfManaged(webhook.SelfManagedConfig{
			Dynamic: s.dyn, Namespace: s.namespace, SecretName: cfg.ServiceName + "-webhook-tls",
			ServiceName: cfg.ServiceName, ExtraHosts: hosts, Now: time.Now, OnRotate: a.registrar.CARotated,
		}, log)
		if err != nil {
			return nil, fmt.Errorf("webhook certificates: %w", err)
		}
	}
	s.optional.track(metrics.PartAttribution, "changes are credited to "+s.bot.Name+", not to the people who made them")
	return a, nil
}

// Run obtains the certificates and the port, retrying with backoff, then serves the webhook,
// rotates its certificate and keeps its registration applied, until ctx ends. Every goroutine
// it starts has returned when it returns; its error is the server's.
func (a *attribution) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() { _ = a.store.Run(ctx) }) // lookups work after it ends: the mirror may outlive it
	if !a.inCluster && a.cfg.URL == "" {
		a.optional.degraded(metrics.PartAttribution, unreachableProblem(a.cfg))
		<-ctx.Done()
		return nil
	}
	srv := a.start(ctx)
	if srv == nil {
		return nil // ctx ended first
	}
	a.optional.fine(metrics.PartAttribution)
	close(a.serving)
	a.remotes.start(ctx)
	defer a.remotes.wait()
	var served error
	wg.Go(func() { served = srv.Run(ctx) })
	if a.selfMgd != nil {
		wg.Go(func() { _ = a.selfMgd.Run(ctx) })
	}
	if !a.registeredByLeader {
		wg.Go(func() { _ = a.registrar.Run(ctx) })
	}
	wg.Wait()
	if a.peers != nil {
		a.peers.Close() // after the server: a replica that stops still hands on what it answered
	}
	return served
}

// start tries until the server is listening with its certificates, or ctx ends (then nil).
func (a *attribution) start(ctx context.Context) *httpserver.Server {
	var srv *httpserver.Server
	a.optional.retry(ctx, metrics.PartAttribution, func() (problem, bool) {
		var p problem
		srv, p = a.tryStart(ctx)
		return p, srv != nil
	})
	return srv
}

// tryStart reads the client CA, gets the serving certificate and listens: one attempt.
func (a *attribution) tryStart(ctx context.Context) (*httpserver.Server, problem) {
	var clientCA *httpserver.ClientCA
	if a.cfg.ClientCAFile != "" {
		var err error
		if clientCA, err = httpserver.LoadClientCA(a.cfg.ClientCAFile); err != nil {
			return nil, clientCAProblem(a.cfg, err)
		}
	}
	if a.certs == nil {
		if a.selfMgd == nil {
			fc, err := httpserver.NewFileCerts(a.cfg.CertDir)
			if err != nil {
				return nil, certDirProblem(a.cfg, err)
			}
			a.certs = fc
		} else {
			if err := a.selfMgd.Sync(ctx); err != nil {
				return nil, secretProblem(a.namespace, err)
			}
			a.certs = a.selfMgd
		}
	}
	mux := http.NewServeMux()
	mux.Handle(webhook.AdmissionPath, a.handler)
	mux.Handle(clusterAdmissionPrefix, a.remotes)
	if a.peers != nil {
		mux.Handle("POST "+webhook.CorrelationsPath, a.peers)
	}
	srv, err := httpserver.Listen(httpserver.Config{
		Name: "webhook", BindAddress: a.cfg.BindAddress, Handler: mux, Limits: webhook.ServerLimits(),
		Certs: a.certs, ClientCA: clientCA, Log: a.log,
	})
	if err != nil {
		return nil, listenProblem(a.cfg, err)
	}
	return srv, problem{}
}

// register keeps the webhook's registration applied until ctx ends, once Run serves: the work of
// the leader when the replicas share the shards, since every replica serves the webhook.
func (a *attribution) register(ctx context.Context) error {
	if !wait(ctx, a.serving) {
		return nil
	}
	return a.registrar.Run(ctx)
}

// caBundle is what the registration tells the apiserver to trust; nil until Run has certificates.
func (a *attribution) caBundle() []byte {
	if a.certs == nil {
		return nil
	}
	return a.certs.CABundle()
}

// registered is told the outcome of every registration apply.
func (a *attribution) registered(err error) {
	if err != nil {
		a.optional.degraded(metrics.PartAttribution, registrationProblem(a.cfg.ServiceName, err))
		return
	}
	a.optional.fine(metrics.PartAttribution)
}

// onWatched is the mirror's OnWatched: the handler records exactly the watched resources from now
// on, and who sets a proposal's decision; the registrar registers them. It never blocks the mirror.
func (a *attribution) onWatched(_ context.Context, sels []watch.Selection) {
	a.remotes.onWatched(sels)
	rs := make([]webhook.Resource, 0, len(sels))
	for _, s := range sels {
		if s.Cluster != "" {
			continue // another cluster's apiserver calls the webhook for it
		}
		rs = append(rs, webhook.Resource{GVR: s.GVR, Namespaced: s.Namespaced, Namespace: s.Namespace, Operations: s.Ops.Operations()})
	}
	rs = webhook.WithProposals(rs)
	a.watched.Set(rs)
	a.registrar.SetResources(rs)
}

// webhookPort is the port of --webhook-bind-address, which is also the Service's port.
func webhookPort(cfg WebhookConfig) int {
	_, port, _ := net.SplitHostPort(cfg.BindAddress)
	n, _ := strconv.Atoi(port)
	return n
}
