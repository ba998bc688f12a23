package ui

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/configbutler/gitops-reverser/controller"
	"github.com/configbutler/gitops-reverser/crds"
	"github.com/configbutler/gitops-reverser/gitops"
)

//go:embed templates/*.html
var templateFiles embed.FS

//go:embed static
var staticFiles embed.FS

// contentSecurityPolicy lets the page load only its own script and style, from its own origin,
// and talk only to its own server: injected markup could neither run nor send anything away.
const contentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; " +
	"form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

// Config is what the page needs.
type Config struct {
	// Kube is the daemon's client configuration: it reads the configuration and write-back kinds
	// and asks TokenReviews and SubjectAccessReviews. Without its credentials, it is also the base
	// of each person's own client, which sends their decisions.
	Kube *rest.Config
	// Auth is who may see the page.
	Auth Auth
	// Progress returns the Git worker's progress of a repository and branch; nil or false when
	// this process does not push it (yet).
	Progress func(url, branch string) (gitops.WorkerStatus, bool)
	// Log receives what goes wrong while serving; nil discards.
	Log *slog.Logger
}

// Page serves the operator page. New builds it; Run keeps its caches until ctx ends; it serves
// through ServeHTTP meanwhile.
type Page struct {
	cfg     Config
	auth    *authenticator
	factory *controller.Informers
	stores  map[schema.GroupVersionResource]cache.SharedIndexInformer
	// unserved holds a flag per kind the page shows if it can but does not wait for (see
	// cacheOptional); the flag is set once the apiserver says it does not serve the kind.
	unserved map[schema.GroupVersionResource]*atomic.Bool
	views    map[string]*template.Template
	mux      *http.ServeMux
}

// New builds the page; it starts nothing.
func New(cfg Config) (*Page, error) {
	if cfg.Auth != AuthToken && cfg.Auth != AuthNone {
		return nil, fmt.Errorf("operator page: auth must be %q or %q, got %q", AuthToken, AuthNone, cfg.Auth)
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	dyn, err := dynamic.NewForConfig(cfg.Kube)
	if err != nil {
		return nil, fmt.Errorf("operator page: build dynamic client: %w", err)
	}
	views, err := parseViews()
	if err != nil {
		return nil, err
	}
	p := &Page{
		cfg: cfg, auth: newAuthenticator(cfg.Auth, dyn), views: views,
		factory:  controller.NewInformers(dyn),
		stores:   map[schema.GroupVersionResource]cache.SharedIndexInformer{},
		unserved: map[schema.GroupVersionResource]*atomic.Bool{},
	}
	for _, gvr := range []schema.GroupVersionResource{crds.GitRepoConfigs, crds.GitDestinations, crds.Proposals, crds.SyncRuns} {
		if _, err := p.cache(gvr); err != nil {
			return nil, err
		}
	}
	// RemoteClusters and NotifyChannels are newer than the other kinds: a cluster that still has the older CRDs does
	// not serve them, and the page must not wait for them there.
	for _, gvr := range []schema.GroupVersionResource{crds.RemoteClusters, crds.NotifyChannels} {
		if err := p.cacheOptional(gvr); err != nil {
			return nil, err
		}
	}
	p.mux = p.routes()
	return p, nil
}

// cache adds an informer of gvr to the page's caches; it runs from Run.
func (p *Page) cache(gvr schema.GroupVersionResource) (cache.SharedIndexInformer, error) {
	inf := p.factory.ForResource(gvr)
	if err := inf.SetTransform(dropManagedFields); err != nil {
		return nil, fmt.Errorf("operator page: %w", err)
	}
	p.stores[gvr] = inf
	return inf, nil
}

// cacheOptional caches gvr like cache, but the page stops waiting for its first list once the
// apiserver answers that it does not serve gvr (its CRD is not installed) or does not let the
// daemon list it. The informer keeps retrying meanwhile, so a CRD installed later is cached
// then; until then the page shows no object of the kind.
func (p *Page) cacheOptional(gvr schema.GroupVersionResource) error {
	inf, err := p.cache(gvr)
	if err != nil {
		return err
	}
	unserved := &atomic.Bool{}
	p.unserved[gvr] = unserved
	err = inf.SetWatchErrorHandlerWithContext(func(ctx context.Context, r *cache.Reflector, err error) {
		if !apierrors.IsNotFound(err) && !apierrors.IsForbidden(err) {
			cache.DefaultWatchErrorHandler(ctx, r, err)
			return
		}
		if unserved.CompareAndSwap(false, true) { // said once, not at every retry
			p.cfg.Log.Info("operator page: the apiserver does not serve (or let the daemon list) a kind; the page shows none of it",
				"resource", gvr.Resource, "err", err)
		}
	})
	if err != nil {
		return fmt.Errorf("operator page: %w", err)
	}
	return nil
}

// dropManagedFields keeps the caches small: the page never shows who manages which field.
func dropManagedFields(obj any) (any, error) {
	if u, ok := obj.(*unstructured.Unstructured); ok {
		u.SetManagedFields(nil)
	}
	return obj, nil
}

// Run fills and keeps the page's caches until ctx ends.
func (p *Page) Run(ctx context.Context) error {
	p.factory.Start(ctx)
	<-ctx.Done()
	p.factory.Shutdown()
	return nil
}

// synced reports whether every cache holds a first complete list, but for an optional kind
// the apiserver does not serve.
func (p *Page) synced() bool {
	for gvr, inf := range p.stores {
		if !inf.HasSynced() && !p.notServed(gvr) {
			return false
		}
	}
	return true
}

// notServed reports whether gvr is an optional kind the apiserver said it does not serve.
func (p *Page) notServed(gvr schema.GroupVersionResource) bool {
	flag, optional := p.unserved[gvr]
	return optional && flag.Load()
}

func (p *Page) routes() *http.ServeMux {
	mux := http.NewServeMux()
	static, _ := fs.Sub(staticFiles, "static") // the directory is embedded above
	files := http.StripPrefix("/static/", http.FileServerFS(static))
	mux.Handle("GET /static/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-cache") // revalidated: a new daemon's script is used at once
		files.ServeHTTP(w, r)
	}))
	mux.HandleFunc("GET /{$}", p.overview)
	mux.HandleFunc("GET /proposals/{namespace}/{name}", p.proposal)
	csrf := http.NewCrossOriginProtection()
	csrf.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "refused: a decision must come from this page's own origin", http.StatusForbidden)
	}))
	mux.Handle("POST /proposals/{namespace}/{name}/decision", csrf.Handler(http.HandlerFunc(p.decide)))
	return mux
}

// ServeHTTP serves the page with the headers every answer carries.
func (p *Page) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", contentSecurityPolicy)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cross-Origin-Opener-Policy", "same-origin")
	h.Set("Vary", "Authorization")
	p.mux.ServeHTTP(w, r)
}

// signedIn authenticates the request; when it cannot, it answers with the sign-in form and
// returns nil.
func (p *Page) signedIn(w http.ResponseWriter, r *http.Request) *viewer {
	v, err := p.auth.viewer(r)
	switch {
	case err == nil:
		return v
	case errors.Is(err, errNoToken):
		p.render(w, http.StatusOK, "signin", layout{Title: "Sign in"}, nil)
	case errors.Is(err, errBadToken):
		p.render(w, http.StatusUnauthorized, "signin", layout{Title: "Sign in", Error: err.Error()}, nil)
	default:
		p.cfg.Log.Error("authenticate a viewer of the operator page", "err", err)
		p.render(w, http.StatusServiceUnavailable, "signin", layout{Title: "Sign in", Error: err.Error()}, nil)
	}
	return nil
}

// layout is what every view shows around its content.
type layout struct {
	Title  string
	Viewer string // "" when nobody is signed in
	Mode   Auth
	Error  string
}

// render writes a view; a template error is logged and answered 500.
func (p *Page) render(w http.ResponseWriter, status int, view string, l layout, data any) {
	l.Mode = p.cfg.Auth
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store") // what a person may see is not kept anywhere
	buf := getBuffer()
	defer putBuffer(buf)
	if err := p.views[view].ExecuteTemplate(buf, "layout", struct {
		Layout layout
		Data   any
	}{l, data}); err != nil {
		p.cfg.Log.Error("render the operator page", "view", view, "err", err)
		http.Error(w, "the page could not be rendered; the daemon's log says why", http.StatusInternalServerError)
		return
	}
	w.WriteHeader(status)
	_, _ = buf.WriteTo(w)
}

// notReady answers while the caches are still being filled.
func (p *Page) notReady(w http.ResponseWriter, v *viewer) bool {
	if p.synced() {
		return false
	}
	w.Header().Set("Retry-After", "2")
	p.render(w, http.StatusServiceUnavailable, "error", layout{Title: "Loading", Viewer: viewerName(v),
		Error: "the page is still reading from the Kubernetes API; reload in a moment"}, nil)
	return true
}

func viewerName(v *viewer) string {
	if v == nil {
		return ""
	}
	return v.user.Username
}

// requestTimeout bounds what one page view asks of the apiserver.
const requestTimeout = 20 * time.Second
