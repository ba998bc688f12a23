package controller

import (
	"context"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/cache"
)

// Informers is a set of informers of unstructured objects in every namespace, one per resource,
// which start together and are joined by Shutdown. It does the job of client-go's dynamic
// informer factory, which would link client-go's typed informers and all-groups scheme (see
// package kube).
type Informers struct {
	dyn dynamic.Interface

	mu        sync.Mutex
	informers map[schema.GroupVersionResource]cache.SharedIndexInformer
	started   map[schema.GroupVersionResource]bool
	ctx       context.Context // of the started ones; nil before Start
	cancel    context.CancelFunc
	running   sync.WaitGroup
}

// NewInformers is an empty set; ForResource adds to it, Start runs it.
func NewInformers(dyn dynamic.Interface) *Informers {
	return &Informers{dyn: dyn, informers: map[schema.GroupVersionResource]cache.SharedIndexInformer{},
		started: map[schema.GroupVersionResource]bool{}}
}

// ForResource is the informer of gvr, made on first use; it runs from the next Start.
func (f *Informers) ForResource(gvr schema.GroupVersionResource) cache.SharedIndexInformer {
	f.mu.Lock()
	defer f.mu.Unlock()
	if inf, ok := f.informers[gvr]; ok {
		return inf
	}
	inf := cache.NewSharedIndexInformer(ListWatch(f.dyn.Resource(gvr)), &unstructured.Unstructured{}, 0,
		cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	f.informers[gvr] = inf
	return inf
}

// ListWatch lists and watches the objects of api, for an informer of unstructured objects.
func ListWatch(api dynamic.ResourceInterface) *cache.ListWatch {
	return &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			return api.List(ctx, opts)
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			return api.Watch(ctx, opts)
		},
	}
}

// Start runs every informer not yet running until ctx ends or Shutdown is called.
func (f *Informers) Start(ctx context.Context) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.ctx == nil {
		f.ctx, f.cancel = context.WithCancel(ctx)
	}
	runCtx := f.ctx
	for gvr, inf := range f.informers {
		if !f.started[gvr] {
			f.started[gvr] = true
			f.running.Go(func() { inf.RunWithContext(runCtx) })
		}
	}
}

// WaitForCacheSync waits until every started informer has synced, or ctx ends; it says which have.
func (f *Informers) WaitForCacheSync(ctx context.Context) map[schema.GroupVersionResource]bool {
	f.mu.Lock()
	started := map[schema.GroupVersionResource]cache.SharedIndexInformer{}
	for gvr, inf := range f.informers {
		if f.started[gvr] {
			started[gvr] = inf
		}
	}
	f.mu.Unlock()
	synced := map[schema.GroupVersionResource]bool{}
	for gvr, inf := range started {
		synced[gvr] = cache.WaitForCacheSync(ctx.Done(), inf.HasSynced)
	}
	return synced
}

// Shutdown stops every informer and returns once they all have.
func (f *Informers) Shutdown() {
	f.mu.Lock()
	if f.cancel != nil {
		f.cancel()
	}
	f.mu.Unlock()
	f.running.Wait()
}
