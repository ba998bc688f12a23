// Package controller is the one skeleton the daemon's controllers (write-back, receivers) share,
// so each of them is only its reconcile logic: informers of unstructured objects (Informers) whose
// handlers only compute a key and enqueue it, a rate-limited workqueue with a retry cap, N workers,
// and an event recorder whose sender runs inside Run. New starts nothing; Run returns only after
// every goroutine it started (informers, workers, the event sender) has ended.
package controller

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
)

// Defaults of Config.
const (
	DefaultMaxRetries = 15
	DefaultBaseDelay  = 100 * time.Millisecond
	DefaultMaxDelay   = 5 * time.Minute
)

// Handler reconciles one key. An error retries the key with backoff (at most MaxRetries times);
// requeueAfter > 0 queues it again after that long, with a fresh retry count: on success, and
// when the retries are given up.
type Handler func(ctx context.Context, key string) (requeueAfter time.Duration, err error)

// Keys turns an object an informer saw (added, updated or deleted, possibly a
// cache.DeletedFinalStateUnknown) into the key to queue; "" queues nothing.
type Keys func(obj any) string

// Config is what a Controller needs. Events and Log may be nil (Events are then not sent).
type Config struct {
	Name    string // of the workqueue, and in logs
	Dynamic dynamic.Interface
	Events  dynamic.Interface // of the Events; usually Dynamic
	Handle  Handler
	// Workers handle keys at once (a key is never handled by two at a time); 1 when zero.
	Workers int
	// MaxRetries is how many failures in a row a key is retried; DefaultMaxRetries when zero.
	MaxRetries int
	// BaseDelay and MaxDelay bound the exponential backoff of a failing key.
	BaseDelay, MaxDelay time.Duration
	Log                 *slog.Logger
}

// Controller runs Config.Handle for every key its informers, its Add callers and its own retries
// queue, until Run's context ends.
type Controller struct {
	cfg     Config
	factory *Informers
	events  *Events
	groups  []*Group

	mu      sync.Mutex
	queue   workqueue.TypedRateLimitingInterface[string] // nil before Run
	runCtx  context.Context                              // Run's context, while it runs
	pending map[string]time.Duration                     // keys added before Run, and when they are due
	ended   bool
}

// New builds a controller; Run does the work.
func New(cfg Config) *Controller {
	if cfg.Workers <= 0 {
		cfg.Workers = 1
	}
	if cfg.MaxRetries <= 0 {
		cfg.MaxRetries = DefaultMaxRetries
	}
	if cfg.BaseDelay <= 0 {
		cfg.BaseDelay = DefaultBaseDelay
	}
	if cfg.MaxDelay <= 0 {
		cfg.MaxDelay = DefaultMaxDelay
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	return &Controller{
		cfg:     cfg,
		factory: NewInformers(cfg.Dynamic),
		events:  NewEvents(cfg.Events, cfg.Log),
	}
}

// Recorder records Events about the controller's objects; they are sent while Run runs.
func (c *Controller) Recorder() *Events { return c.events }

// Informer caches gvr in every namespace for as long as Run runs, and queues keys(obj) on every
// change. Call it before Run.
func (c *Controller) Informer(gvr schema.GroupVersionResource, keys Keys) (cache.SharedIndexInformer, error) {
	inf := c.factory.ForResource(gvr)
	if _, err := inf.AddEventHandler(c.enqueuer(keys)); err != nil {
		return nil, fmt.Errorf("watch %s: %w", gvr.Resource, err)
	}
	return inf, nil
}

// enqueuer is an informer's handler: it only computes a key and queues it.
func (c *Controller) enqueuer(keys Keys) cache.ResourceEventHandler {
	add := func(obj any) {
		if k := keys(obj); k != "" {
			c.Add(k)
		}
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    add,
		UpdateFunc: func(_, obj any) { add(obj) },
		DeleteFunc: add,
	}
}

// Add queues key. It never blocks; a key added before Run is handled once Run starts, one
// added after Run ended is dropped.
func (c *Controller) Add(key string) { c.AddAfter(key, 0) }

// AddAfter queues key once d has passed. Before Run, a key is kept once (with its shortest
// delay), so a controller that never runs holds no more than its distinct keys.
func (c *Controller) AddAfter(key string, d time.Duration) {
	c.mu.Lock()
	q := c.queue
	if q == nil && !c.ended {
		if cur, ok := c.pending[key]; !ok || d < cur {
			if c.pending == nil {
				c.pending = map[string]time.Duration{}
			}
			c.pending[key] = d
		}
	}
	c.mu.Unlock()
	if q == nil {
		return
	}
	if d > 0 {
		q.AddAfter(key, d)
		return
	}
	q.Add(key)
}

// ObjectKey is the "namespace/name" (or "name") of an object an informer saw, "" when it has none.
func ObjectKey(obj any) string {
	k, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
	if err != nil {
		return ""
	}
	return k
}

// Run starts the event sender and the informers, waits for their caches, then handles keys
// with Workers workers until ctx ends. It returns once every goroutine it started has ended.
// A controller runs once.
func (c *Controller) Run(ctx context.Context) error {
	// The sender outlives ctx until the workers have ended: their last Events are still sent.
	eventsCtx, stopEvents := context.WithCancel(context.WithoutCancel(ctx))
	var events sync.WaitGroup
	events.Go(func() { _ = c.events.Run(eventsCtx) })
	ctx, cancel := context.WithCancel(ctx)
	defer func() {
		cancel()
		c.factory.Shutdown()
		c.stopGroups()
		stopEvents()
		events.Wait()
	}()
	q, err := c.start(ctx)
	if err != nil {
		return err
	}
	defer q.ShutDown()
	c.factory.Start(ctx)
	for gvr, ok := range c.factory.WaitForCacheSync(ctx) {
		if !ok && ctx.Err() == nil {
			return fmt.Errorf("%s: sync the cache of %s", c.cfg.Name, gvr.Resource)
		}
	}
	var workers sync.WaitGroup
	for range c.cfg.Workers {
		workers.Go(func() {
			for c.next(ctx, q) {
			}
		})
	}
	<-ctx.Done()
	q.ShutDown()
	workers.Wait()
	return nil
}

// start creates the queue and hands it the keys added before Run.
func (c *Controller) start(ctx context.Context) (workqueue.TypedRateLimitingInterface[string], error) {
	q := workqueue.NewTypedRateLimitingQueueWithConfig(
		workqueue.NewTypedItemExponentialFailureRateLimiter[string](c.cfg.BaseDelay, c.cfg.MaxDelay),
		workqueue.TypedRateLimitingQueueConfig[string]{Name: c.cfg.Name})
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.queue != nil || c.ended {
		q.ShutDown()
		return nil, errors.New(c.cfg.Name + ": the controller runs once")
	}
	c.queue, c.runCtx = q, ctx
	for key, after := range c.pending {
		q.AddAfter(key, after)
	}
	c.pending = nil
	return q, nil
}

// next handles one queued key; false once the queue shut down.
func (c *Controller) next(ctx context.Context, q workqueue.TypedRateLimitingInterface[string]) bool {
	key, shutdown := q.Get()
	if shutdown {
		return false
	}
	defer q.Done(key)
	after, err := c.cfg.Handle(ctx, key)
	switch {
	case err != nil && ctx.Err() != nil:
		q.Forget(key) // stopping: the error is the cancellation's
	case err != nil && q.NumRequeues(key) < c.cfg.MaxRetries:
		c.cfg.Log.Warn(c.cfg.Name+" failed; retrying", "key", key, "err", err)
		q.AddRateLimited(key)
	case err != nil:
		c.cfg.Log.Error(c.cfg.Name+" failed; giving up", "key", key, "err", err, "attempts", q.NumRequeues(key)+1)
		q.Forget(key)
		if after > 0 {
			q.AddAfter(key, after)
		}
	case after > 0:
		q.Forget(key)
		q.AddAfter(key, after)
	default:
		q.Forget(key)
	}
	return true
}

// stopGroups stops every informer group still running, and lets none start again.
func (c *Controller) stopGroups() {
	c.mu.Lock()
	c.ended, c.runCtx = true, nil
	c.mu.Unlock()
	for _, g := range c.groups {
		g.Stop()
	}
}

// running is Run's context, nil when Run does not run.
func (c *Controller) running() context.Context {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.runCtx
}
