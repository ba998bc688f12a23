package receiver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
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
)

// Timing of the controller.
const (
	// ResyncInterval is how often every Receiver is resolved again even when nothing changed:
	// Secrets are read with a GET, not watched, so a rotated token is picked up by then.
	ResyncInterval = 30 * time.Second
	// ObserveInterval is the least time between two writes of one Receiver's last event.
	ObserveInterval = time.Second

	syncKey          = "sync"
	observeKeyPrefix = "o/"
)

// ControllerConfig is what the controller needs. Log may be nil.
type ControllerConfig struct {
	Kube  *rest.Config
	Index *Index // the controller Sets it after every change
	Log   *slog.Logger
	// Namespace is the daemon's own namespace, the only one where it may read and create
	// Secrets: a GitRepoConfig elsewhere asking for a generated Receiver is skipped (with a
	// Warning Event). Empty allows every namespace (tests).
	Namespace string
	// Resync is how often every Receiver is resolved again; ResyncInterval when zero.
	Resync time.Duration
}

// Controller resolves Receivers into the Index, reports their status, and generates a Receiver
// (with its token Secret) for every GitRepoConfig with spec.receiver.
type Controller struct {
	cfg       ControllerConfig
	dyn       dynamic.Interface
	kube      kubernetes.Interface
	recorder  record.EventRecorder
	queue     workqueue.TypedRateLimitingInterface[string]
	factory   dynamicinformer.DynamicSharedInformerFactory
	receivers cache.SharedIndexInformer
	dests     cache.SharedIndexInformer
	repos     cache.SharedIndexInformer

	mu       sync.Mutex
	observed map[string]*observation // last events not written yet, or written last, per Receiver
	byRepo   map[string][]string     // normalised repository → Receiver keys
	warned   map[types.UID]bool      // GitRepoConfigs told their receiver is not generated
	written  map[string]written      // the status last written per Receiver, until the cache has it
}

// NewController builds the controller; Run does the work.
func NewController(cfg ControllerConfig) (*Controller, error) {
	if cfg.Kube == nil || cfg.Index == nil {
		return nil, errors.New("receiver controller: Kube and Index are required")
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.Resync <= 0 {
		cfg.Resync = ResyncInterval
	}
	dyn, err := dynamic.NewForConfig(cfg.Kube)
	if err != nil {
		return nil, fmt.Errorf("build dynamic client: %w", err)
	}
	kube, err := kubernetes.NewForConfig(cfg.Kube)
	if err != nil {
		return nil, fmt.Errorf("build kubernetes client: %w", err)
	}
	c := &Controller{
		cfg: cfg, dyn: dyn, kube: kube,
		factory:  dynamicinformer.NewDynamicSharedInformerFactory(dyn, 0),
		observed: map[string]*observation{},
		written:  map[string]written{},
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.NewTypedItemExponentialFailureRateLimiter[string](100*time.Millisecond, 30*time.Second),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "receivers"}),
	}
	c.receivers = c.factory.ForResource(crds.Receivers).Informer()
	c.dests = c.factory.ForResource(crds.GitDestinations).Informer()
	c.repos = c.factory.ForResource(crds.GitRepoConfigs).Informer()
	return c, nil
}

// Run resolves Receivers until ctx ends: at start, on every change of a Receiver, GitDestination
// or GitRepoConfig, and every Resync. It returns once everything it started has stopped.
func (c *Controller) Run(ctx context.Context) error {
	broadcaster := record.NewBroadcaster()
	broadcaster.StartRecordingToSink(&corev1client.EventSinkImpl{Interface: c.kube.CoreV1().Events("")})
	defer broadcaster.Shutdown()
	c.recorder = broadcaster.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "gitops-reverser"})

	defer c.queue.ShutDown()
	changed := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { c.queue.Add(syncKey) },
		UpdateFunc: func(_, _ any) { c.queue.Add(syncKey) },
		DeleteFunc: func(any) { c.queue.Add(syncKey) },
	}
	for _, inf := range []cache.SharedIndexInformer{c.receivers, c.dests, c.repos} {
		if _, err := inf.AddEventHandler(changed); err != nil {
			return fmt.Errorf("watch: %w", err)
		}
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
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(c.cfg.Resync)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				c.queue.ShutDown()
				return
			case <-tick.C:
				c.queue.Add(syncKey)
			}
		}
	}()
	c.queue.Add(syncKey)
	for c.next(ctx) {
	}
	return nil
}

// next handles one queued key; false once the queue is shut down.
func (c *Controller) next(ctx context.Context) bool {
	key, shutdown := c.queue.Get()
	if shutdown {
		return false
	}
	defer c.queue.Done(key)
	var err error
	if key == syncKey {
		err = c.sync(ctx)
	} else {
		err = c.writeObserved(ctx, key[len(observeKeyPrefix):])
	}
	if err != nil && ctx.Err() == nil {
		c.cfg.Log.Warn("receivers: retrying", "key", key, "err", err)
		c.queue.AddRateLimited(key)
		return true
	}
	c.queue.Forget(key)
	return true
}

// sync generates the Receivers GitRepoConfigs ask for, then rebuilds the index and writes every
// Receiver's status that changed. An error (a failed write) retries the whole sync.
func (c *Controller) sync(ctx context.Context) error {
	genErr := c.generate(ctx)
	resolved := c.resolveAll(ctx)
	byPath := make(map[string]*Entry, len(resolved))
	for _, r := range resolved {
		if r.path != "" {
			byPath[r.path] = r.entry
		}
	}
	c.cfg.Index.Set(byPath)
	c.indexRepositories(resolved)
	statusErr := c.writeStatuses(ctx, resolved)
	return errors.Join(genErr, statusErr)
}
