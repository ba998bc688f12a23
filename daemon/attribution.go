package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"

	admissionv1client "k8s.io/client-go/kubernetes/typed/admissionregistration/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"

	"github.com/configbutler/gitops-reverser/metrics"
	"github.com/configbutler/gitops-reverser/watch"
	"github.com/configbutler/gitops-reverser/webhook"
)

// attribution is the admission webhook side of the daemon: the HTTPS server, its certificates,
// the correlation store, and the registration that makes the apiserver call it for exactly the
// watched resources.
type attribution struct {
	store   *webhook.Store
	watched *webhook.Watched
	reg     *webhook.Registration
	server  *webhook.Server
	log     *slog.Logger

	mu   sync.Mutex
	last []webhook.Resource // re-registered when the CA bundle rotates
}

func startAttribution(ctx context.Context, cfg Config, kube *rest.Config, core corev1client.CoreV1Interface, m *metrics.Attribution, log *slog.Logger) (*attribution, error) {
	a := &attribution{
		store: webhook.NewStore(webhook.StoreConfig{
			TTL: cfg.CorrelationTTL, Capacity: cfg.CorrelationCapacity, Metrics: m, Bot: bot,
		}),
		watched: &webhook.Watched{},
		log:     log,
	}
	certs, err := a.certificates(ctx, cfg, core)
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.Handle(webhook.AdmissionPath, webhook.NewAdmissionHandler(a.store, a.watched, m, log))
	if a.server, err = webhook.StartServer(webhook.ServerConfig{BindAddress: cfg.WebhookBindAddress, Certs: certs}, mux, log); err != nil {
		return nil, err
	}
	admission, err := admissionv1client.NewForConfig(kube)
	if err != nil {
		return nil, errors.Join(fmt.Errorf("build admission client: %w", err), a.stop())
	}
	_, port, _ := net.SplitHostPort(cfg.WebhookBindAddress)
	servicePort, _ := strconv.Atoi(port)
	a.reg = webhook.NewRegistration(webhook.RegistrationConfig{
		Admission: admission, Name: controllerName, URL: cfg.WebhookURL,
		ServiceNamespace: cfg.Namespace, ServiceName: cfg.WebhookServiceName, ServicePort: int32(servicePort),
		Path: webhook.AdmissionPath, CABundle: certs.CABundle, TimeoutSeconds: 2,
	})
	a.store.Start()
	return a, nil
}

// certificates are the files of --webhook-cert-dir, or a CA and certificate the daemon keeps in
// a Secret and rotates itself.
func (a *attribution) certificates(ctx context.Context, cfg Config, core corev1client.CoreV1Interface) (webhook.CertSource, error) {
	if cfg.WebhookCertDir != "" {
		return webhook.NewFileCerts(cfg.WebhookCertDir)
	}
	var hosts []string
	if u, err := url.Parse(cfg.WebhookURL); err == nil && u.Hostname() != "" {
		hosts = append(hosts, u.Hostname())
	}
	sm, err := webhook.NewSelfManaged(ctx, webhook.SelfManagedConfig{
		Core: core, Namespace: cfg.Namespace, SecretName: cfg.WebhookServiceName + "-webhook-tls",
		ServiceName: cfg.WebhookServiceName, ExtraHosts: hosts, Now: time.Now, OnRotate: a.reregister,
	}, a.log)
	if err != nil {
		return nil, fmt.Errorf("webhook certificates: %w", err)
	}
	go sm.Run(ctx)
	return sm, nil
}

// onWatched registers the webhook for exactly the resources the mirror watches.
func (a *attribution) onWatched(ctx context.Context, sels []watch.Selection) {
	rs := make([]webhook.Resource, 0, len(sels))
	for _, s := range sels {
		rs = append(rs, webhook.Resource{GVR: s.GVR, Namespaced: s.Namespaced, Namespace: s.Namespace, Operations: s.Ops.Operations()})
	}
	a.watched.Set(rs)
	a.mu.Lock()
	a.last = rs
	a.mu.Unlock()
	if err := a.reg.Update(ctx, rs); err != nil {
		a.log.Error("register the admission webhook", "err", err)
	}
}

// reregister refreshes the caBundle after the serving certificate's CA changed.
func (a *attribution) reregister() {
	if a.reg == nil {
		return
	}
	a.mu.Lock()
	rs := a.last
	a.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := a.reg.Update(ctx, rs); err != nil {
		a.log.Error("refresh the admission webhook's CA bundle", "err", err)
	}
}

func (a *attribution) stop() error {
	a.store.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return a.server.Shutdown(ctx)
}
