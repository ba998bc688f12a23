package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"

	"github.com/configbutler/gitops-reverser/crds"
	"github.com/configbutler/gitops-reverser/gitops"
	"github.com/configbutler/gitops-reverser/httpserver"
	"github.com/configbutler/gitops-reverser/kube"
	"github.com/configbutler/gitops-reverser/metrics"
	"github.com/configbutler/gitops-reverser/ui"
)

// The values of --ui-auth.
const (
	uiAuthToken = "token"
	uiAuthNone  = "none"
)

// checkUI checks the operator page's flags: the page without sign-in shows every destination and
// proposal to whoever reaches it, so it may only listen where nobody else can.
func checkUI(cfg Config, check func(ok bool, key, format string, args ...any)) {
	check(cfg.UI.Auth == uiAuthToken || cfg.UI.Auth == uiAuthNone, keyUIAuth, "must be %s or %s, got %q", uiAuthToken, uiAuthNone, cfg.UI.Auth)
	check(cfg.UI.CertDir == "" || cfg.UI.BindAddress != "", keyUICertDir, "has no effect without %s", keyUIBindAddress)
	if cfg.UI.BindAddress == "" {
		return
	}
	host, port, err := net.SplitHostPort(cfg.UI.BindAddress)
	check(err == nil && port != "", keyUIBindAddress, "must be host:port or :port, got %q", cfg.UI.BindAddress)
	if err == nil && cfg.UI.Auth == uiAuthNone {
		check(isLoopback(host), keyUIAuth, "%s shows everything without signing in, so %s must be a loopback address (127.0.0.1:port, [::1]:port or localhost:port), got %q",
			uiAuthNone, keyUIBindAddress, cfg.UI.BindAddress)
	}
}

// isLoopback reports whether host only ever resolves to this machine: an empty host means every
// interface.
func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// operatorPage serves the operator page beside the mirror. It is optional: while its port cannot
// be bound, or the daemon may not read what it shows or check who is looking, it is degraded and
// retries, and the mirror runs on.
type operatorPage struct {
	cfg      UIConfig
	page     *ui.Page
	probe    func(context.Context) error
	optional *optionalParts
	log      *slog.Logger
}

func newOperatorPage(s shared, cfg UIConfig, pool *gitops.Pool) (*operatorPage, error) {
	restCfg, optional, log := s.kube, s.optional, s.log.With("part", metrics.PartUI)
	page, err := ui.New(ui.Config{Kube: restCfg, Auth: ui.Auth(cfg.Auth), Progress: pool.WorkerStatus, Log: log})
	if err != nil {
		return nil, err
	}
	dyn, err := dynamic.NewForConfig(restCfg)
	if err != nil {
		return nil, fmt.Errorf("build dynamic client: %w", err)
	}
	optional.track(metrics.PartUI, "the operator page is not served: use kubectl to review proposals")
	return &operatorPage{
		cfg: cfg, page: page, optional: optional, log: log,
		probe: func(ctx context.Context) error { return probePage(ctx, cfg, dyn) },
	}, nil
}

// probePage checks that the daemon may read what the page shows and, with token sign-in, check
// tokens: a forbidden TokenReview would turn every person away.
func probePage(ctx context.Context, cfg UIConfig, dyn dynamic.Interface) error {
	if err := mayList(ctx, dyn, crds.GitRepoConfigs, crds.GitDestinations, crds.Proposals, crds.SyncRuns); err != nil {
		return err
	}
	if cfg.Auth != uiAuthToken {
		return nil
	}
	_, err := kube.For(dyn, kube.TokenReviews, "").Create(ctx, &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: "probe"}}, metav1.CreateOptions{})
	return err
}

// Run waits until the page can work and its port is bound, then serves until ctx ends.
func (o *operatorPage) Run(ctx context.Context) error {
	var srv *httpserver.Server
	serving := o.optional.retry(ctx, metrics.PartUI, func() (problem, bool) {
		if err := o.probe(ctx); err != nil {
			return problem{
				what: err.Error(),
				fix:  "grant the daemon get/list/watch on gitrepoconfigs, gitdestinations, proposals and syncruns of configbutler.ai and create on tokenreviews.authentication.k8s.io (deploy/rbac.yaml, the Helm chart with ui.enabled)",
			}, false
		}
		var err error
		srv, err = httpserver.Listen(httpserver.Config{
			Name: "ui", BindAddress: o.cfg.BindAddress, CertDir: o.cfg.CertDir, Handler: o.page, Log: o.log,
		})
		return problem{
			what: fmt.Sprintf("listen on %s: %v", o.cfg.BindAddress, err),
			fix:  "free the port or choose another --" + keyUIBindAddress + " (and --" + keyUICertDir + " must hold tls.crt and tls.key)",
		}, err == nil
	})
	if !serving {
		return nil
	}
	o.optional.fine(metrics.PartUI)
	if o.cfg.CertDir == "" && !isLoopback(hostOf(o.cfg.BindAddress)) {
		o.log.Warn("the operator page speaks plain HTTP: put it behind an Ingress with TLS, or set --" + keyUICertDir + ", since people send their tokens to it")
	}
	var wg sync.WaitGroup
	var cacheErr error
	wg.Go(func() { cacheErr = o.page.Run(ctx) })
	err := srv.Run(ctx)
	wg.Wait()
	return errors.Join(err, cacheErr)
}

func hostOf(addr string) string {
	host, _, _ := net.SplitHostPort(addr)
	return host
}
