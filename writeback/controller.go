package writeback

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"

	"github.com/configbutler/gitops-reverser/crds"
	"github.com/configbutler/gitops-reverser/gitedits"
	"github.com/configbutler/gitops-reverser/gitops"
	"github.com/configbutler/gitops-reverser/metrics"
)

// Git is what write-back needs of the Git workers (gitops.Pool): their clones, read through
// gitedits, and the holds.
type Git interface {
	gitedits.Git
	Hold(url, branch, path string)
	Release(url, branch, path string, restore *gitops.Change)
}

// Approvers tells who set a proposal's spec.decision to decision, as the apiserver authenticated
// them; the admission webhook records it. False when nobody is known (the webhook was down).
type Approvers func(uid types.UID, decision string) (authenticationv1.UserInfo, bool)

// Defaults of Config.
const (
	DefaultInterval          = 5 * time.Minute
	MinInterval              = 10 * time.Second
	DefaultMaxPerTick        = 25
	DefaultRetention         = 90 * 24 * time.Hour
	DefaultFailedRetention   = 365 * 24 * time.Hour
	destinationKeyPrefix     = "d/"
	proposalKeyPrefix        = "p/"
	defaultOperationDeadline = 2 * time.Minute
	// receiverSpacing is the least time between the starts of two runs a webhook triggers.
	receiverSpacing = time.Second
	// Client-side rate limit of write-back's API requests (one proposal takes about eight).
	clientQPS   = 50
	clientBurst = 100
)

// Config is everything the controller needs. Approvers, Credits, Metrics and Log may be nil.
type Config struct {
	Kube *rest.Config
	Git  Git
	// Selections says what a destination ("namespace/name") selects: a Git file of any other
	// resource, or outside a WatchRule's namespace, is refused.
	Selections func(destination string) []Selection
	Approvers  Approvers
	Credits    *Credits
	// Ours tells the daemon's own commits (by their trailers) from people's.
	Ours       func(message string) bool
	Interval   time.Duration // between fetches of a destination; at least MinInterval
	MaxPerTick int           // proposals opened per reconcile
	// Halt stops every apply, automatic or approved; proposals are still opened.
	Halt                       bool
	Retention, FailedRetention time.Duration // of SyncRuns: success / failed and partial
	Metrics                    *metrics.WriteBack
	Log                        *slog.Logger
}

// Controller runs write-back for every GitDestination that enables it.
type Controller struct {
	cfg      Config
	dyn      dynamic.Interface
	kube     kubernetes.Interface
	recorder record.EventRecorder
	queue    workqueue.TypedRateLimitingInterface[string]
	factory  dynamicinformer.DynamicSharedInformerFactory
	dests    cache.SharedIndexInformer
	repos    cache.SharedIndexInformer
	props    cache.SharedIndexInformer

	mu        sync.Mutex
	triggers  map[string]trigger   // why each queued destination runs next
	known     map[string]bool      // write-back destinations seen, to run each once at start
	requested map[string]string    // the sync-now value last queued, per destination
	started   map[string]time.Time // when each destination's last run started
}

// trigger is why a destination is reconciled; value is the sync-now annotation it answers.
type trigger struct{ kind, value string }

// New builds the controller; Run does the work.
func New(cfg Config) (*Controller, error) {
	if cfg.Interval == 0 {
		cfg.Interval = DefaultInterval
	}
	cfg.Interval = max(cfg.Interval, MinInterval)
	if cfg.MaxPerTick <= 0 {
		cfg.MaxPerTick = DefaultMaxPerTick
	}
	if cfg.Retention <= 0 {
		cfg.Retention = DefaultRetention
	}
	if cfg.FailedRetention <= 0 {
		cfg.FailedRetention = DefaultFailedRetention
	}
	if cfg.Credits == nil {
		cfg.Credits = NewCredits()
	}
	if cfg.Metrics == nil {
		cfg.Metrics = metrics.New().WriteBack
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.Ours == nil {
		cfg.Ours = func(string) bool { return false }
	}
	if cfg.Selections == nil {
		cfg.Selections = func(string) []Selection { return nil }
	}
	kubeCfg := rest.CopyConfig(cfg.Kube)
	if kubeCfg.QPS == 0 { // client-go's default of 5 requests/s would make a 25-proposal run take 40 s
		kubeCfg.QPS, kubeCfg.Burst = clientQPS, clientBurst
	}
	dyn, err := dynamic.NewForConfig(kubeCfg)
	if err != nil {
		return nil, fmt.Errorf("build dynamic client: %w", err)
	}
	kube, err := kubernetes.NewForConfig(kubeCfg)
	if err != nil {
		return nil, fmt.Errorf("build kubernetes client: %w", err)
	}
	c := &Controller{
		cfg: cfg, dyn: dyn, kube: kube,
		factory:   dynamicinformer.NewDynamicSharedInformerFactory(dyn, 0),
		triggers:  map[string]trigger{},
		known:     map[string]bool{},
		requested: map[string]string{},
		started:   map[string]time.Time{},
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.NewTypedItemExponentialFailureRateLimiter[string](time.Second, 5*time.Minute),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "write-back"}),
	}
	c.dests = c.factory.ForResource(crds.GitDestinations).Informer()
	c.repos = c.factory.ForResource(crds.GitRepoConfigs).Informer()
	c.props = c.factory.ForResource(crds.Proposals).Informer()
	if err := c.props.AddIndexers(cache.Indexers{pathIndex: indexByPath}); err != nil {
		return nil, fmt.Errorf("index Proposals: %w", err)
	}
	return c, nil
}

// Run reconciles until ctx ends: every write-back destination once at start, then on its
// interval, on the sync-now annotation and on SyncNow; every proposal whose decision changes.
// It returns once everything it started has stopped.
func (c *Controller) Run(ctx context.Context) error {
	broadcaster := record.NewBroadcaster()
	broadcaster.StartRecordingToSink(&corev1client.EventSinkImpl{Interface: c.kube.CoreV1().Events("")})
	defer broadcaster.Shutdown()
	c.recorder = broadcaster.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "gitops-reverser"})

	defer c.queue.ShutDown()
	if _, err := c.dests.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.destinationSeen,
		UpdateFunc: func(_, obj any) { c.destinationSeen(obj) },
	}); err != nil {
		return fmt.Errorf("watch GitDestinations: %w", err)
	}
	if _, err := c.props.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.proposalSeen,
		UpdateFunc: func(_, obj any) { c.proposalSeen(obj) },
	}); err != nil {
		return fmt.Errorf("watch Proposals: %w", err)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	c.factory.Start(ctx.Done())
	defer c.factory.Shutdown()
	for gvr, ok := range c.factory.WaitForCacheSync(ctx.Done()) {
		if !ok && ctx.Err() == nil {
			return fmt.Errorf("sync the cache of %s", gvr.Resource)
		}
	}
	go func() {
		<-ctx.Done()
		c.queue.ShutDown()
	}()
	for c.next(ctx) {
	}
	return nil
}

// Close releases what New started, for a controller whose Run never ran.
func (c *Controller) Close() { c.queue.ShutDown() }

// SyncNow reconciles the destination as soon as the controller is free: fetch, read the edits
// people pushed, open proposals. It is the one call every trigger uses.
func (c *Controller) SyncNow(namespace, name, why string) {
	c.enqueueDestination(namespace+"/"+name, trigger{kind: why})
}

// HeldChanged is the pool's OnHeldChange: the mirror wanted to write a file a proposal holds,
// so the live object may have moved and the proposal be stale.
func (c *Controller) HeldChanged(url, branch, path string) {
	for _, p := range c.proposalsAt(path) {
		if d, err := c.destination(p.Namespace, p.Spec.DestinationRef.Name); err == nil && d.url == url && d.branch == branch {
			c.queue.Add(proposalKeyPrefix + p.Namespace + "/" + p.Name)
		}
	}
}

// enqueueDestination queues a run; a sync-now request wins over a start-up run, which wins
// over an interval run, so the annotation's value is recorded as handled. A webhook trigger
// waits until receiverSpacing after the destination's last run started: a flood of pushes then
// costs at most two fetches (the run under way and one that answers all the others).
func (c *Controller) enqueueDestination(key string, t trigger) {
	c.mu.Lock()
	if cur, ok := c.triggers[key]; !ok || cur.kind == crds.TriggerInterval || t.kind == crds.TriggerSyncNow {
		c.triggers[key] = t
	}
	var wait time.Duration
	if t.kind == crds.TriggerReceiver {
		wait = time.Until(c.started[key].Add(receiverSpacing))
	}
	c.mu.Unlock()
	if wait > 0 {
		c.queue.AddAfter(destinationKeyPrefix+key, wait)
		return
	}
	c.queue.Add(destinationKeyPrefix + key)
}

// destinationSeen queues a write-back destination the first time it is seen, and again when its
// sync-now annotation carries a value not acted on yet.
func (c *Controller) destinationSeen(obj any) {
	d, err := crds.FromUnstructured[crds.GitDestination](obj.(*unstructured.Unstructured))
	if err != nil {
		return
	}
	key := d.Namespace + "/" + d.Name
	if d.Spec.WriteBack == nil || !d.Spec.WriteBack.Enabled {
		c.mu.Lock()
		delete(c.known, key) // enabled again later, it runs at once
		c.mu.Unlock()
		return
	}
	c.mu.Lock()
	first := !c.known[key]
	c.known[key] = true
	v := d.Annotations[crds.AnnotationSyncNow]
	syncNow := v != "" && c.requested[key] != v && (d.Status.WriteBack == nil || d.Status.WriteBack.LastHandledSyncNow != v)
	if syncNow {
		c.requested[key] = v
	}
	c.mu.Unlock()
	switch {
	case syncNow:
		c.enqueueDestination(key, trigger{kind: crds.TriggerSyncNow, value: v})
	case first:
		c.enqueueDestination(key, trigger{kind: crds.TriggerStartup})
	}
}

// proposalSeen queues a proposal that waits and carries a decision.
func (c *Controller) proposalSeen(obj any) {
	p, err := crds.FromUnstructured[crds.Proposal](obj.(*unstructured.Unstructured))
	if err != nil || !waiting(p) || p.Spec.Decision == crds.DecisionNone {
		return
	}
	if p.Status.Phase == crds.PhaseIgnored && p.Spec.Decision == crds.DecisionIgnore {
		return
	}
	c.queue.Add(proposalKeyPrefix + p.Namespace + "/" + p.Name)
}

// next processes one queued key; false once the queue shut down.
func (c *Controller) next(ctx context.Context) bool {
	key, shutdown := c.queue.Get()
	if shutdown {
		return false
	}
	defer c.queue.Done(key)
	opCtx, cancel := context.WithTimeout(ctx, defaultOperationDeadline)
	defer cancel()
	var err error
	requeueAfter := time.Duration(0)
	switch {
	case strings.HasPrefix(key, destinationKeyPrefix):
		requeueAfter, err = c.runDestination(opCtx, strings.TrimPrefix(key, destinationKeyPrefix))
	case strings.HasPrefix(key, proposalKeyPrefix):
		ns, name, _ := strings.Cut(strings.TrimPrefix(key, proposalKeyPrefix), "/")
		err = c.decide(opCtx, ns, name)
	}
	c.cfg.Metrics.Pending.Set(float64(c.pendingCount("")))
	switch {
	case err != nil && ctx.Err() == nil:
		c.cfg.Log.Warn("write-back failed; retrying", "key", key, "err", err)
		c.queue.AddRateLimited(key)
	case requeueAfter > 0:
		c.queue.Forget(key)
		c.queue.AddAfter(key, requeueAfter)
	default:
		c.queue.Forget(key)
	}
	return true
}

// runDestination reconciles one destination for the trigger it was queued with, and says when its
// interval run is due (0: not scheduled). A retry after an error answers the same trigger.
func (c *Controller) runDestination(ctx context.Context, name string) (time.Duration, error) {
	c.mu.Lock()
	t, ok := c.triggers[name]
	delete(c.triggers, name)
	// Without a trigger this is an interval timer; one set by an earlier run is not due yet.
	early := !ok && time.Now().Add(time.Second).Before(c.started[name].Add(c.cfg.Interval))
	if !early {
		c.started[name] = time.Now()
	}
	c.mu.Unlock()
	if early {
		return 0, nil
	}
	if !ok {
		t = trigger{kind: crds.TriggerInterval}
	}
	enabled, err := c.reconcile(ctx, name, t)
	if err != nil {
		c.mu.Lock()
		if _, newer := c.triggers[name]; !newer {
			c.triggers[name] = t
		}
		c.mu.Unlock()
		return 0, err
	}
	if !enabled {
		return 0, nil
	}
	return c.cfg.Interval, nil
}

// errNotWriteBack says a destination is gone or does not enable write-back.
var errNotWriteBack = errors.New("not a write-back destination")
