// Package watch turns the daemon's configuration (GitRepoConfig, GitDestination, WatchRule,
// ClusterWatchRule) into running work: it resolves destinations and reports their status, expands
// rules into concrete resources through API discovery, and runs one list+watch per selected
// resource that feeds canonical YAML to the Git workers. Rules, destinations and discovery are
// followed at runtime without a restart.
package watch

import (
	"context"
	"errors"
	"log/slog"
	"maps"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/configbutler/gitops-reverser/controller"
	"github.com/configbutler/gitops-reverser/crds"
	"github.com/configbutler/gitops-reverser/gitops"
	"github.com/configbutler/gitops-reverser/gitsecrets"
	"github.com/configbutler/gitops-reverser/kube"
	"github.com/configbutler/gitops-reverser/metrics"
	"github.com/configbutler/gitops-reverser/shard"
)

// Pool is what the manager needs of the owner of the Git workers (gitops.Pool).
type Pool interface {
	SetWorkers(wants []gitops.Branch)
	Sink(url, branch string) (gitops.Sink, bool)
	WorkerStatus(url, branch string) (gitops.WorkerStatus, bool)
}

// Repositories is what the manager needs of the reader of the repositories' Secrets
// (gitsecrets.Repositories): it loads their credentials and signing keys, hands the
// repositories to the pool, checks their remotes, and says how each stands.
type Repositories interface {
	SetRepositories(ctx context.Context, repos []gitsecrets.Repository) map[string]gitsecrets.RepoState
	Recheck()
}

// Options are the daemon-wide settings of the mirror.
type Options struct {
	Expand           ExpandOptions
	DiscoveryRefresh time.Duration
	// Pool runs the Git workers; the manager tells it which repositories and branches the
	// configuration asks for. Its OnChange should call the manager's Changed.
	Pool Pool
	// Repos reads the repositories' Secrets and hands the repositories to Pool.
	Repos   Repositories
	Metrics *metrics.Mirror
	// Requests, if set, counts the pull requests open and the age of the oldest.
	Requests *metrics.PullRequests
	Log      *slog.Logger
	// Authors credits watch events to the users the admission webhook saw; nil credits the bot.
	Authors Authors
	// OnWatched, if set, is told every watched resource after each change of the selection, so
	// the admission webhook can be registered for exactly those.
	OnWatched func(ctx context.Context, sels []Selection)
	// Sealer encrypts Secrets for destinations with spec.encryption; nil leaves every Secret out.
	Sealer Sealer
	// Changes, if set, says that the pool's or a Secret's state moved (see Changes).
	Changes Changes
	// Shards, if set, shares the destinations out across replicas: this replica writes only
	// those of the shards it owns, and leaves the rest (their watches, workers and status) to
	// their owners. Its changes of ownership should reach Changes. Nil writes every destination.
	Shards Shards
	// CrossNamespaceRefs says whether a GitDestination may use a GitRepoConfig, and a WatchRule a
	// GitDestination, of another namespace: with its consent ("" or consent), or never (deny).
	CrossNamespaceRefs CrossNamespaceRefs
	// DefaultServiceAccount is the ServiceAccount, in each WatchRule's namespace, that bounds what
	// a rule naming none may mirror; "" lets such rules read with the daemon's rights.
	DefaultServiceAccount string
	// Remote says what the kubeconfigs of RemoteClusters may ask of the daemon.
	Remote RemoteOptions
	// ClusterAuthors, if set, credits the watch events of a RemoteCluster ("namespace/name") to the
	// users its own apiserver told the admission webhook of; nil credits them to the bot.
	ClusterAuthors func(cluster string) Authors
	// ClusterAttribution, if set, says how attribution stands on a RemoteCluster (crds.Attribution*)
	// and what its Ready condition should tell of it, given when a watch of it last delivered an
	// object (unix nanoseconds, 0 for never).
	ClusterAttribution func(cluster string, lastEvent int64) (state, message string)
	// Writable, if set, holds the first reconcile (and so every watcher) until it is closed: the
	// daemon closes it once the files of waiting proposals are held. Nil writes at once.
	Writable <-chan struct{}
}

// Shards is what the manager needs of the sharing of destinations (package shard).
type Shards interface {
	Want(keys []shard.Key)    // the shards the usable destinations ask for
	Owns(k shard.Key) bool    // whether this replica writes the shard now
	Owner(k shard.Key) string // the replica that does, "" for none
}

// Sealer encrypts Secrets before they reach Git (package sops).
type Sealer interface {
	// Ready prepares the sealer (the daemon loads its digest key) the first time a destination
	// asks for encryption, and says why it cannot; it is asked again at every reconcile until it can.
	Ready(ctx context.Context) error
	// Seal returns the document to write for the canonical YAML of a Secret, encrypted for
	// recipients, and keep, which tells whether a file already is that Secret for them (the
	// encryption is randomised: an unchanged Secret must not make a commit).
	Seal(plaintext []byte, recipients []string) (doc []byte, keep func(current []byte) bool, err error)
	// CheckRecipient says why s is not a usable recipient, or nil.
	CheckRecipient(s string) error
	// CreationRules is the .sops.yaml written at the base folder of a destination, so people can
	// edit its files with sops too.
	CreationRules(recipients []string) []byte
}

// Manager owns the resource watchers, tells the pool which Git workers the configuration asks
// for, and reports the status of the configuration objects. Everything it owns is touched only
// from its Run goroutine.
type Manager struct {
	opts       Options
	dyn        dynamic.Interface
	api        rest.Interface // raw requests: discovery, and the watchers' lists and watches (streamClient)
	reporter   *reporter
	trigger    chan struct{}
	informers  map[schema.GroupVersionResource]cache.SharedIndexInformer
	resources  []kube.APIResource
	watchers   map[string]*running
	warned     map[string]bool                   // rules already warned about selecting Secrets, by uid/generation
	coalesced  map[string]int                    // coalescings already reported, by destination
	progress   map[string]crds.GitProgress       // status.git last written, by destination
	requests   map[string]crds.PullRequestStatus // status.pullRequest last written, by destination
	dests      []*destination                    // as the last reconcile resolved them
	sopsRules  map[string]string                 // the .sops.yaml last handed to each destination's worker, by destination
	refused    map[string]string                 // the refusal last told as an Event, by uid of the referring object
	access     *access                           // what the rules' ServiceAccounts may read
	namespaces cache.SharedIndexInformer         // for the namespaceSelector of accessPolicies; nil until one is met
	// cacheNamespaces starts namespaces, once; set by Run.
	cacheNamespaces func()
	// remotes are the RemoteClusters destinations use, by namespace/name; remoteClusters caches
	// every RemoteCluster once cacheRemoteClusters (set by Run) was first called, and says whether
	// it has synced.
	remotes             map[string]*remote
	remoteClusters      cache.SharedIndexInformer
	cacheRemoteClusters func() bool
	// clustersUsed is, by RemoteCluster a usable destination names, the connection the last
	// reconcile used (nil while it is not connected): for ClusterConn and ClusterInUse.
	clustersUsed atomic.Pointer[map[string]*connection]
	// clusterSelections is, by RemoteCluster, how many selections the last reconcile made there
	// (for every destination, whichever replica serves it): its status's watches.
	clusterSelections map[string]int
	// published is, by destination, what the last reconcile selected: for Selections and Render.
	published atomic.Pointer[map[string]*destinationRules]
	// admitted is, by destination, the GitRepoConfig the last reconcile found it may use: for Admits.
	repoAdmitted atomic.Pointer[map[string]string]
	consents     atomic.Pointer[map[string][]string] // by destination (namespace/name): the namespaces it admits
}

// running is a goroutine the manager started and can stop.
type running struct {
	cancel context.CancelFunc
	done   chan struct{}
	w      *watcher
}

func (r *running) stop() {
	r.cancel()
	<-r.done
}

// NewManager connects to the cluster; Run does the work.
func NewManager(cfg *rest.Config, opts Options) (*Manager, error) {
	if opts.Authors == nil {
		opts.Authors = noAuthors{}
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	api, err := streamClient(cfg)
	if err != nil {
		return nil, err
	}
	return &Manager{
		opts: opts, dyn: dyn, api: api,
		reporter:  &reporter{dyn: dyn, recorder: controller.NewEvents(dyn, opts.Log)},
		trigger:   make(chan struct{}, 1),
		watchers:  map[string]*running{},
		warned:    map[string]bool{},
		coalesced: map[string]int{},
		progress:  map[string]crds.GitProgress{},
		requests:  map[string]crds.PullRequestStatus{},
		sopsRules: map[string]string{},
		refused:   map[string]string{},
		access:    newAccess(dyn),
		remotes:   map[string]*remote{},
	}, nil
}

// Run follows the configuration until ctx ends, then stops the watchers and returns once they
// and the informers have. The pool's workers outlive it: the daemon stops them afterwards, so
// they push what the watchers handed them.
func (m *Manager) Run(ctx context.Context) error {
	// The Event sender outlives ctx until the watchers have stopped: their last Events are sent.
	eventsCtx, stopEvents := context.WithCancel(context.WithoutCancel(ctx))
	var events sync.WaitGroup
	events.Go(func() { _ = m.reporter.recorder.Run(eventsCtx) })
	defer func() {
		stopEvents()
		events.Wait()
	}()
	var informers sync.WaitGroup
	defer informers.Wait()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if err := m.startInformers(ctx, &informers); err != nil {
		return err
	}
	m.cacheNamespaces = m.namespaceCache(ctx, &informers)
	m.cacheRemoteClusters = m.remoteClusterCache(ctx, &informers)
	if !m.ready(ctx, &informers) {
		return nil
	}
	defer m.stopRemotes()
	defer m.stopAll()
	return m.follow(ctx)
}

// startInformers caches the configuration kinds; every change of one asks for a reconcile.
func (m *Manager) startInformers(ctx context.Context, informers *sync.WaitGroup) error {
	m.informers = map[schema.GroupVersionResource]cache.SharedIndexInformer{}
	poke := m.pokeOnChange()
	for _, gvr := range []schema.GroupVersionResource{crds.GitRepoConfigs, crds.GitDestinations, crds.WatchRules, crds.ClusterWatchRules} {
		inf := m.configInformer(gvr)
		if _, err := inf.AddEventHandler(poke); err != nil {
			return err
		}
		m.informers[gvr] = inf
		informers.Go(func() { inf.RunWithContext(ctx) })
	}
	return nil
}

// namespaceCache returns what starts the cache of namespaces. Namespaces are cached for the
// namespaceSelector of accessPolicies and ClusterWatchRules, from the first reconcile that meets
// one: a relabelled namespace is then admitted or refused, selected or not, at once. Without such
// a selector they cost nothing. Only the rules that select by namespace labels wait for them.
func (m *Manager) namespaceCache(ctx context.Context, informers *sync.WaitGroup) func() {
	var start sync.Once
	return func() {
		start.Do(func() {
			inf := m.configInformer(namespacesGVR)
			if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
				AddFunc: func(any) { m.poke() },
				UpdateFunc: func(old, cur any) {
					if !maps.Equal(old.(*unstructured.Unstructured).GetLabels(), cur.(*unstructured.Unstructured).GetLabels()) {
						m.poke()
					}
				},
				DeleteFunc: func(any) { m.poke() },
			}); err != nil {
				m.opts.Log.Warn("follow the namespaces' labels; accessPolicies admit by name only", "err", err)
				return
			}
			m.namespaces = inf
			informers.Go(func() { inf.RunWithContext(ctx) })
			informers.Go(func() {
				if cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
					m.poke() // what waited for the labels goes on
				}
			})
		})
	}
}

// ready waits until the configuration is cached, discovery has been read (beside the caches'
// first lists) and the files of waiting proposals are held; false when ctx ended first.
func (m *Manager) ready(ctx context.Context, informers *sync.WaitGroup) bool {
	discovered := make(chan struct{})
	informers.Go(func() { m.rediscover(ctx); close(discovered) })
	for _, inf := range m.informers {
		cache.WaitForCacheSync(ctx.Done(), inf.HasSynced)
	}
	<-discovered
	if m.opts.Writable == nil {
		return ctx.Err() == nil
	}
	select {
	case <-m.opts.Writable:
		return true
	case <-ctx.Done():
		return false
	}
}

// follow reconciles whenever the configuration, the pool or discovery changes, and on its timers,
// until ctx ends; a failed reconcile is tried again with backoff.
func (m *Manager) follow(ctx context.Context) error {
	refresh := time.NewTicker(m.opts.DiscoveryRefresh)
	defer refresh.Stop()
	progress := time.NewTicker(progressInterval)
	defer progress.Stop()
	recheck := time.NewTicker(accessRecheck)
	defer recheck.Stop()
	m.poke()
	retry := time.NewTimer(0)
	<-retry.C
	backoff := time.Second
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-m.trigger:
		case <-m.opts.Changes:
		case <-retry.C:
		case <-refresh.C:
			m.rediscover(ctx)
			m.opts.Repos.Recheck()
		case <-recheck.C:
			if !m.access.used() {
				continue // no rule acts as a ServiceAccount: nothing to ask again
			}
		case <-progress.C:
			if err := errors.Join(m.reportProgress(ctx, m.dests), m.reportClusters(ctx)); err != nil {
				m.opts.Log.Warn("report the Git progress of destinations and the state of clusters", "err", err)
			}
			continue
		}
		if err := m.reconcile(ctx); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			m.opts.Log.Error("reconcile; retrying", "err", err, "in", backoff)
			retry.Reset(backoff)
			backoff = min(2*backoff, time.Minute)
			continue
		}
		backoff = time.Second
	}
}

// configInformer caches one of our kinds in every namespace.
func (m *Manager) configInformer(gvr schema.GroupVersionResource) cache.SharedIndexInformer {
	return cache.NewSharedIndexInformer(controller.ListWatch(m.dyn.Resource(gvr)), &unstructured.Unstructured{}, 0, cache.Indexers{})
}

// pokeOnChange asks for a reconcile whenever an object of an informer is added, changed or deleted.
// A change of its status alone asks for none: the reconcile writes the status itself, and taking
// its own write for a change made it reconcile again at every push of a long backlog.
func (m *Manager) pokeOnChange() cache.ResourceEventHandlerFuncs {
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(any) { m.poke() },
		UpdateFunc: func(old, cur any) {
			if !statusOnly(old.(*unstructured.Unstructured), cur.(*unstructured.Unstructured)) {
				m.poke()
			}
		},
		DeleteFunc: func(any) { m.poke() },
	}
}

// statusOnly reports whether cur differs from old in its status alone: the same generation (the
// apiserver counts every change of spec), labels, annotations and deletion.
func statusOnly(old, cur *unstructured.Unstructured) bool {
	return old.GetGeneration() == cur.GetGeneration() && old.GetGeneration() != 0 &&
		maps.Equal(old.GetLabels(), cur.GetLabels()) && maps.Equal(old.GetAnnotations(), cur.GetAnnotations()) &&
		old.GetDeletionTimestamp().Equal(cur.GetDeletionTimestamp())
}

func (m *Manager) poke() {
	select {
	case m.trigger <- struct{}{}:
	default:
	}
}

// Changes tells the manager that the pool's state moved (a push started or stopped failing, a
// credentials Secret changed, a remote answered), so the status it reports follows within
// moments instead of at the next refresh. Make it first, hand its Notify to the pool and the
// Secrets, and the value to Options.Changes: the parts are connected without referring to each
// other.
type Changes chan struct{}

// NewChanges makes a Changes.
func NewChanges() Changes { return make(Changes, 1) }

// Notify never blocks: one waiting notice stands for any number.
func (c Changes) Notify() {
	select {
	case c <- struct{}{}:
	default:
	}
}

// Selections returns what the rules of the destination ("namespace/name") select, as of the last
// reconcile: each selection's namespace is "" for every namespace (or a cluster-scoped resource)
// and its own namespace for a WatchRule. Nil when the destination selects nothing or is unknown.
// Safe to call from any goroutine.
func (m *Manager) Selections(destination string) []Selection {
	p := m.published.Load()
	if p == nil {
		return nil
	}
	d := (*p)[destination]
	if d == nil {
		return nil
	}
	out := make([]Selection, len(d.selected))
	for i, s := range d.selected {
		out[i] = s.sel
	}
	return out
}

func (m *Manager) rediscover(ctx context.Context) {
	resources, err := kube.Discover(ctx, m.api, m.opts.Log)
	if err != nil {
		if ctx.Err() != nil {
			return
		}
		m.opts.Log.Error("discovery failed; keeping the previous resources", "err", err)
		return
	}
	m.resources = resources
}

func (m *Manager) stopAll() {
	for k, w := range m.watchers {
		w.stop()
		delete(m.watchers, k)
	}
}

// list returns the informer's objects of one kind as typed structs; broken ones are logged.
func list[T any](m *Manager, gvr schema.GroupVersionResource) []*T {
	var out []*T
	for _, item := range m.informers[gvr].GetStore().List() {
		obj, err := crds.FromUnstructured[T](item.(*unstructured.Unstructured))
		if err != nil {
			m.opts.Log.Warn("skipping object", "err", err)
			continue
		}
		out = append(out, obj)
	}
	return out
}

// Recorder records the mirror's Events (destinations, rules, remote clusters); notifications
// tap it.
func (m *Manager) Recorder() *controller.Events { return m.reporter.recorder }
