package controller

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"
)

// Group is a set of informers that run only while the controller's handler wants them, so a
// feature nobody has switched on costs no watch and no cache: the handler calls Start when the
// first object asks for the feature and Stop when the last one stops asking. Each Start builds
// the informers anew, on a factory of their own, and Stop joins them.
type Group struct {
	c     *Controller
	specs []groupInformer

	mu  sync.Mutex
	run *groupRun // nil while stopped
}

type groupInformer struct {
	gvr      schema.GroupVersionResource
	keys     Keys
	indexers cache.Indexers
}

type groupRun struct {
	factory   *Informers
	informers map[schema.GroupVersionResource]cache.SharedIndexInformer
	cancel    context.CancelFunc
}

// Group returns a new, stopped group of informers. Call it before Run.
func (c *Controller) Group() *Group {
	g := &Group{c: c}
	c.groups = append(c.groups, g)
	return g
}

// Informer adds gvr to the group, with its indexers; keys(obj) is queued on every change.
// Call it before Run.
func (g *Group) Informer(gvr schema.GroupVersionResource, keys Keys, indexers cache.Indexers) {
	g.specs = append(g.specs, groupInformer{gvr: gvr, keys: keys, indexers: indexers})
}

// Start runs the group's informers (when they are not running yet) and waits for their caches;
// ctx bounds the wait. It is meant for the controller's handler, while Run runs.
func (g *Group) Start(ctx context.Context) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.run != nil {
		return nil
	}
	runCtx := g.c.running()
	if runCtx == nil {
		return errors.New(g.c.cfg.Name + ": informers start only while the controller runs")
	}
	r := &groupRun{
		factory:   NewInformers(g.c.cfg.Dynamic),
		informers: map[schema.GroupVersionResource]cache.SharedIndexInformer{},
	}
	for _, s := range g.specs {
		inf := r.factory.ForResource(s.gvr)
		if len(s.indexers) > 0 {
			if err := inf.AddIndexers(s.indexers); err != nil {
				return fmt.Errorf("index %s: %w", s.gvr.Resource, err)
			}
		}
		if _, err := inf.AddEventHandler(g.c.enqueuer(s.keys)); err != nil {
			return fmt.Errorf("watch %s: %w", s.gvr.Resource, err)
		}
		r.informers[s.gvr] = inf
	}
	infCtx, cancel := context.WithCancel(runCtx)
	r.cancel = cancel
	r.factory.Start(infCtx)
	for gvr, ok := range r.factory.WaitForCacheSync(ctx) {
		if !ok {
			cancel()
			r.factory.Shutdown()
			return fmt.Errorf("%s: sync the cache of %s: %w", g.c.cfg.Name, gvr.Resource, context.Cause(ctx))
		}
	}
	g.run = r
	return nil
}

// Stop ends the group's informers, if they run, and returns once they have; their caches are gone.
func (g *Group) Stop() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.run == nil {
		return
	}
	g.run.cancel()
	g.run.factory.Shutdown()
	g.run = nil
}

// Running reports whether the group's informers run.
func (g *Group) Running() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.run != nil
}

// Indexer is the cache of gvr while the group runs; false while it is stopped.
func (g *Group) Indexer(gvr schema.GroupVersionResource) (cache.Indexer, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.run == nil {
		return nil, false
	}
	inf, ok := g.run.informers[gvr]
	if !ok {
		return nil, false
	}
	return inf.GetIndexer(), true
}
