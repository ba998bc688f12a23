package daemon

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/configbutler/gitops-reverser/crds"
	"github.com/configbutler/gitops-reverser/gitops"
	"github.com/configbutler/gitops-reverser/metrics"
	"github.com/configbutler/gitops-reverser/watch"
	"github.com/configbutler/gitops-reverser/webhook"
	"github.com/configbutler/gitops-reverser/writeback"
)

// clusterAdmissionPrefix is where the apiservers of RemoteClusters send their admission reviews:
// <prefix><namespace>/<name>/<token>, a path of each cluster's own.
const clusterAdmissionPrefix = "/admit/clusters/"

// silentAfter is how long after a registration a cluster whose watches deliver changes may go
// without a single review before attribution is told Failing: its apiserver cannot reach the hub.
const silentAfter = 20 * time.Second

// unregisterTimeout bounds the removal of the webhook from a cluster no longer mirrored.
const unregisterTimeout = 10 * time.Second

// clusterConns gives the connection of a RemoteCluster ("namespace/name") the mirror uses, and
// the fingerprint of its kubeconfig (watch.Manager.ClusterConn).
type clusterConns func(name string) (cfg *rest.Config, fingerprint string, ok bool)

// remoteHooks is attribution on RemoteClusters. Each cluster gets the daemon's webhook registered
// in it at a path of its own, whose last segment is a token derived from the cluster's kubeconfig:
// only that cluster's webhook configuration (and whoever holds the kubeconfig) knows it. A review
// is taken only on the path of the cluster it names, the token compared in constant time, and
// feeds only that cluster's correlation store: a review posted on another cluster's path, or with
// another token, is refused (403) and credits nobody.
type remoteHooks struct {
	a     *attribution
	conns atomic.Pointer[clusterConns] // set once the mirror is built
	// inUse says whether a destination still names the cluster (watch.Manager.ClusterInUse): only
	// then is its webhook kept while its rules select nothing (refused, or it does not answer).
	inUse atomic.Pointer[func(name string) bool]

	mu       sync.Mutex
	ctx      context.Context // Run's; nil until attribution serves
	hooks    map[string]*clusterHook
	pending  []watch.Selection // what onWatched was told last before Run served
	register sync.WaitGroup
}

// clusterHook is the webhook of one RemoteCluster.
type clusterHook struct {
	name, token, fingerprint string
	webhookName              string // of its ValidatingWebhookConfiguration in the cluster
	store                    *webhook.Store
	watched                  *webhook.Watched
	handler                  http.Handler
	registration             *webhook.Registration
	registrar                *webhook.Registrar
	cancel                   context.CancelFunc // stops the hook: its store, and its registrar
	ctx                      context.Context    // the hook's, until cancel
	// stopRegistering stops the registrar while this replica serves the cluster; nil while it does not.
	stopRegistering context.CancelFunc
	registeredAt    atomic.Int64 // unix nanoseconds of the last successful apply; 0 before
	// failure is why the last apply failed, with its fix; nil after one that worked. The first
	// failure of a kind is logged, its retries are not.
	failure    atomic.Pointer[string]
	lastReview atomic.Int64
	log        *slog.Logger
}

func newRemoteHooks(a *attribution) *remoteHooks {
	return &remoteHooks{a: a, hooks: map[string]*clusterHook{}}
}

// clusterToken is the last segment of a cluster's admission path.
func clusterToken(name, fingerprint string) string {
	sum := sha256.Sum256([]byte("gitops-reverser admission\x00" + name + "\x00" + fingerprint))
	return hex.EncodeToString(sum[:])
}

// ServeHTTP takes a review on a cluster's path, or refuses it.
func (h *remoteHooks) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rest := strings.TrimPrefix(r.URL.Path, clusterAdmissionPrefix)
	parts := strings.Split(rest, "/")
	h.mu.Lock()
	var hook *clusterHook
	if len(parts) == 3 {
		hook = h.hooks[parts[0]+"/"+parts[1]]
	}
	h.mu.Unlock()
	if hook == nil || subtle.ConstantTimeCompare([]byte(parts[2]), []byte(hook.token)) != 1 {
		h.a.log.Warn("admission review refused: not on the path of the cluster it names", "path", r.URL.Path, "remote", r.RemoteAddr)
		h.a.metrics.Reviews.WithLabelValues(metrics.ReviewRefused).Inc()
		http.Error(w, "no such cluster path", http.StatusForbidden)
		return
	}
	hook.lastReview.Store(time.Now().UnixNano())
	hook.handler.ServeHTTP(w, r)
}

// start begins registering the clusters asked for so far; from now on onWatched starts them itself.
func (h *remoteHooks) start(ctx context.Context) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.ctx = ctx
	h.applyLocked(h.pending)
	h.pending = nil
}

// wait returns once every registrar has stopped (after Run's ctx ended).
func (h *remoteHooks) wait() { h.register.Wait() }

// onWatched takes the reviews of every RemoteCluster watched (by this replica or another: a
// review may reach any replica, which hands it to the others), registers the webhook in those
// this replica watches, with exactly the resources watched there, and lets go of the clusters no
// longer watched.
func (h *remoteHooks) onWatched(sels []watch.Selection) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.ctx == nil {
		h.pending = sels
		return
	}
	h.applyLocked(sels)
}

// applyLocked is onWatched once attribution serves; h.mu is held.
func (h *remoteHooks) applyLocked(sels []watch.Selection) {
	byCluster := map[string][]webhook.Resource{}
	served := map[string]bool{}
	for _, s := range sels {
		if s.Cluster != "" {
			byCluster[s.Cluster] = append(byCluster[s.Cluster], webhook.Resource{GVR: s.GVR, Namespaced: s.Namespaced, Namespace: s.Namespace, Operations: s.Ops.Operations()})
			served[s.Cluster] = served[s.Cluster] || !s.Elsewhere
		}
	}
	inUse := h.inUse.Load()
	for name, hook := range h.hooks {
		if byCluster[name] == nil && (inUse == nil || !(*inUse)(name)) {
			hook.cancel()
			delete(h.hooks, name)
			h.register.Go(func() { h.unregister(hook) })
		}
	}
	for name, rs := range byCluster { // a cluster kept above without a selection keeps its last ones
		h.setLocked(name, rs, served[name])
	}
}

// setLocked makes the hook of cluster name take the reviews of rs, starting it (again, when its
// kubeconfig was rotated: the path changes with it), and register them there while this replica
// serves the cluster. h.mu is held.
func (h *remoteHooks) setLocked(name string, rs []webhook.Resource, served bool) {
	conns := h.conns.Load()
	if conns == nil {
		return
	}
	cfg, fp, ok := (*conns)(name)
	if !ok {
		return
	}
	hook := h.hooks[name]
	if hook != nil && hook.fingerprint != fp {
		hook.cancel()
		hook = nil
	}
	if hook == nil {
		var err error
		if hook, err = h.newHook(name, cfg, fp); err != nil {
			h.a.log.Error("attribution on a remote cluster", "cluster", name, "err", err)
			return
		}
		h.hooks[name] = hook
	}
	hook.watched.Set(rs)
	hook.registrar.SetResources(rs)
	switch {
	case served && hook.stopRegistering == nil:
		ctx, cancel := context.WithCancel(hook.ctx)
		hook.stopRegistering = cancel
		h.register.Go(func() { _ = hook.registrar.Run(ctx) })
	case !served && hook.stopRegistering != nil:
		hook.stopRegistering() // the replica that serves it now registers its own
		hook.stopRegistering = nil
	}
}

// unregister removes the webhook from a cluster no destination mirrors any longer, so its
// apiserver stops calling a path that now refuses it; the cluster may not answer: it is told once.
// Only a webhook this replica registered is asked to be deleted by hand: one never registered
// (refused, or registered by the replica that served the cluster) is most likely not there, and
// is removed when it is only as a courtesy to an earlier run.
func (h *remoteHooks) unregister(hook *clusterHook) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(h.ctx), unregisterTimeout)
	defer cancel()
	err := hook.registration.Delete(ctx)
	switch {
	case err != nil && hook.registeredAt.Load() != 0:
		hook.log.Warn("remove the webhook from a cluster no longer mirrored; delete it there by hand", "name", hook.webhookName, "err", err)
	case err != nil:
		hook.log.Info("the webhook was never registered in a cluster no longer mirrored: nothing to remove", "err", err)
	default:
		hook.log.Info("webhook removed from a cluster no longer mirrored", "name", hook.webhookName)
	}
}

// storeOf is the correlation store of RemoteCluster cluster, for the records peers hand over;
// nil when no destination of this daemon mirrors it.
func (h *remoteHooks) storeOf(cluster string) *webhook.Store {
	if hook := h.hook(cluster); hook != nil {
		return hook.store
	}
	return nil
}

// newHook builds the webhook of one cluster and starts registering it there.
func (h *remoteHooks) newHook(name string, cfg *rest.Config, fp string) (*clusterHook, error) {
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("client of cluster %s: %w", name, err)
	}
	a := h.a
	hook := &clusterHook{name: name, token: clusterToken(name, fp), fingerprint: fp, watched: &webhook.Watched{},
		webhookName: a.cfg.ServiceName + "-hub", log: a.log.With("cluster", name),
		store: webhook.NewStore(webhook.StoreConfig{TTL: a.cfg.CorrelationTTL, Capacity: a.cfg.CorrelationCapacity, Metrics: a.metrics, Bot: a.bot})}
	opts := []webhook.AdmissionOption{webhook.WithCluster(name)}
	if a.peers != nil {
		opts = append(opts, webhook.WithPeers(a.peers))
	}
	hook.handler = webhook.NewAdmissionHandler(hook.store, hook.watched, a.metrics, hook.log, opts...)
	base := strings.TrimSuffix(a.cfg.URL, "/")
	hook.registration = webhook.NewRegistration(webhook.RegistrationConfig{
		Dynamic: dyn, Name: hook.webhookName, URL: base, Path: clusterAdmissionPrefix + name + "/" + hook.token,
		CABundle: a.caBundle, TimeoutSeconds: 2,
	})
	hook.registrar = webhook.NewRegistrar(webhook.RegistrarConfig{
		Registration: hook.registration,
		OnApply:      hook.applied,
		MaxBackoff:   optionalMaxBackoff, Log: hook.log,
	})
	hook.ctx, hook.cancel = context.WithCancel(h.ctx)
	h.register.Go(func() { _ = hook.store.Run(hook.ctx) })
	return hook, nil
}

// applied records how the registrar's last apply of the hook's registration went. A failure is
// logged with its fix when it is new, not at each retry: the registrar retries with backoff for as
// long as it fails, and the RemoteCluster's status says it meanwhile.
func (hook *clusterHook) applied(err error) {
	if err != nil {
		what, fix := err.Error(), hook.registrationFix(err)
		msg := what + "; " + fix
		if prev := hook.failure.Swap(&msg); prev == nil || *prev != msg {
			hook.log.Warn("cannot register the webhook in a remote cluster: its changes are credited to the bot; retrying with backoff",
				"err", what, "fix", fix)
		}
		return
	}
	// Registered since: set by the first apply that worked (after failures too), not by each of
	// those that follow (every change of the watched resources applies again).
	if hook.failure.Swap(nil) != nil || hook.registeredAt.Load() == 0 {
		hook.registeredAt.Store(time.Now().UnixNano())
		hook.log.Info("webhook registered in a remote cluster", "name", hook.webhookName)
	}
}

// registrationFix says what makes a refused registration work.
func (hook *clusterHook) registrationFix(err error) string {
	if apierrors.IsForbidden(err) {
		return fmt.Sprintf("grant the kubeconfig's identity of RemoteCluster %s, in that cluster, get, create, patch and delete on "+
			"validatingwebhookconfigurations (resourceNames: %s): a ClusterRole and its ClusterRoleBinding (docs/multi-cluster.md)",
			hook.name, hook.webhookName)
	}
	return "check that the cluster's apiserver answers the hub; the hub retries"
}

func (h *remoteHooks) hook(name string) *clusterHook {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.hooks[name]
}

// clusterAuthors credits the watch events of RemoteCluster name to the person write-back applied
// them for, else to the user its apiserver told the webhook of.
type clusterAuthors struct {
	h       *remoteHooks
	credits *writeback.Credits
	name    string
}

func (c clusterAuthors) Author(op string, gk schema.GroupKind, namespace, name string, content []byte) (gitops.Credit, bool) {
	if cr, ok := c.credits.AuthorIn(c.name, op, gk, namespace, name, content); ok {
		return cr, true
	}
	hook := c.h.hook(c.name)
	if hook == nil {
		return gitops.Credit{}, false
	}
	return hook.store.Author(op, gk, namespace, name, content)
}

// state says how attribution stands on cluster name (crds.Attribution*) and why, given when a
// watch of it last delivered an object. Each field of the hook is read once: the registrar's
// goroutine changes them meanwhile, and a failure read twice may be gone at the second read.
func (h *remoteHooks) state(name string, lastEvent int64) (string, string) {
	if h.a.cfg.URL == "" {
		return crds.AttributionOff, "changes are credited to the bot: the daemon has no --webhook-url that remote apiservers can reach"
	}
	hook := h.hook(name)
	if hook == nil {
		return crds.AttributionOff, ""
	}
	failure, registeredAt, lastReview, lastRecord := hook.failure.Load(), hook.registeredAt.Load(), hook.lastReview.Load(), hook.store.LastRecord()
	switch {
	case failure != nil:
		return crds.AttributionFailing, "changes are credited to the bot: registering the webhook there failed: " + *failure
	case registeredAt == 0:
		return crds.AttributionRegistered, ""
	case lastEvent > max(registeredAt, lastReview, lastRecord.UnixNano())+int64(silentAfter):
		return crds.AttributionFailing, fmt.Sprintf("changes are credited to the bot: its apiserver has not called the webhook at %s for %s "+
			"though changes were seen: it cannot reach the hub", h.a.cfg.URL, silentAfter)
	case lastReview > 0 || !lastRecord.IsZero():
		return crds.AttributionWorking, ""
	}
	return crds.AttributionRegistered, ""
}
