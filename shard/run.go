package shard

import (
	"cmp"
	"context"
	"slices"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"

	"github.com/configbutler/gitops-reverser/kube"
	"github.com/configbutler/gitops-reverser/lease"
)

// deadMemberAfter is how many lease durations a member's Lease stays after it expired (its
// replica was killed) before a live replica deletes it.
const deadMemberAfter = 5

// Run takes part in the sharing until ctx ends: it holds this replica's membership Lease, follows
// every Lease of the set, and takes, keeps and hands over shards. When ctx ends it gives every
// shard up at once, then its membership: the daemon ends it only once the last pushes are made.
func (s *Set) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	defer wg.Wait()
	inf := s.informer()
	infCtx, stopInf := context.WithCancel(ctx)
	defer stopInf()
	wg.Go(func() { inf.RunWithContext(infCtx) })

	memberCtx, stopMember := context.WithCancel(context.WithoutCancel(ctx))
	defer stopMember()
	wg.Go(func() { s.member(memberCtx) })
	s.cfg.Log.Info("sharing the destinations with the other replicas", "identity", s.cfg.Identity, "peerAddress", s.cfg.Address)

	if cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		tick := time.NewTicker(s.cfg.Timings.RetryPeriod)
		defer tick.Stop()
		terms := context.WithoutCancel(ctx) // each term is ended on its own, the last ones by stopAll
		for ctx.Err() == nil {
			s.balance(terms)
			select {
			case <-ctx.Done():
			case <-s.poke:
			case <-tick.C:
			}
		}
	}
	s.stopAll()
	stopMember()
	return nil
}

// informer follows the set's Leases.
func (s *Set) informer() cache.SharedIndexInformer {
	selector := labels.SelectorFromSet(labels.Set{LabelSet: s.cfg.Prefix}).String()
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			opts.LabelSelector = selector
			return s.cfg.Leases.List(ctx, opts)
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			opts.LabelSelector = selector
			return s.cfg.Leases.Watch(ctx, opts)
		},
	}
	inf := cache.NewSharedIndexInformer(lw, &unstructured.Unstructured{}, 0, cache.Indexers{})
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    s.observe,
		UpdateFunc: func(_, obj any) { s.observe(obj) },
		DeleteFunc: func(obj any) {
			if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			if u, ok := obj.(*unstructured.Unstructured); ok {
				s.mu.Lock()
				delete(s.leases, u.GetName())
				s.mu.Unlock()
				s.wake()
			}
		},
	})
	return inf
}

// observe records a Lease of the set, and when its record last changed by this replica's clock:
// a holder is taken for dead only once its record stayed the same for a lease duration, whatever
// the clocks of the other replicas say.
func (s *Set) observe(obj any) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return
	}
	l, err := kube.Convert[coordinationv1.Lease](u)
	if err != nil {
		return
	}
	r := seen{Record: lease.Record{Spec: l.Spec, At: time.Now()}, role: l.Labels[labelRole], peer: l.Annotations[annotationPeer]}
	s.mu.Lock()
	if old, ok := s.leases[l.Name]; ok && equality.Semantic.DeepEqual(old.Spec, l.Spec) {
		r.At = old.At
	}
	s.leases[l.Name] = r
	s.mu.Unlock()
	s.wake()
}

// member holds this replica's membership Lease until ctx ends, then gives it up and deletes it.
func (s *Set) member(ctx context.Context) {
	e := &lease.Elector{
		Leases: s.cfg.Leases, Name: s.memberName, Timings: s.cfg.Timings, Identity: s.cfg.Identity,
		Fence: lease.NewFence(s.cfg.Timings), Log: s.cfg.Log.With("lease", s.memberName),
		Labels:      map[string]string{LabelSet: s.cfg.Prefix, labelRole: roleMember},
		Annotations: map[string]string{annotationPeer: s.cfg.Address},
	}
	for ctx.Err() == nil {
		held := make(chan context.Context, 1)
		e.Run(ctx, held) // returns when a renewal failed (then it tries again) or ctx ended
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.Timings.RenewDeadline)
	defer cancel()
	if err := s.cfg.Leases.Delete(ctx, s.memberName, metav1.DeleteOptions{}); err != nil {
		s.cfg.Log.Debug("could not delete this replica's membership lease; it expires", "lease", s.memberName, "err", err)
	}
}

// liveMembers counts the replicas whose membership Lease is held, this one always included.
// Called with s.mu held.
func (s *Set) liveMembers(now time.Time) int {
	n := 1
	for name, r := range s.leases {
		if r.role == roleMember && name != s.memberName && r.Valid(now) {
			n++
		}
	}
	return n
}

// balance moves this replica towards its fair share, ceil(shards / live replicas): it hands over
// the shards it has too many of (and those nobody wants any more), gives up candidacies it no
// longer needs, and runs for free shards while it has room. Replicas try the free shards in
// orders of their own, so they seldom race for one.
func (s *Set) balance(ctx context.Context) {
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	live := s.liveMembers(now)
	share := (len(s.want) + live - 1) / live
	var owned, candidates []*term
	for k, t := range s.terms {
		switch {
		case t.leaving:
		case !s.want[k]:
			s.handOver(t)
		case t.leading:
			owned = append(owned, t)
		default:
			candidates = append(candidates, t)
		}
	}
	byRank := func(a, b *term) int { return cmp.Compare(s.rank(a.key), s.rank(b.key)) }
	slices.SortFunc(owned, byRank)
	for _, t := range owned[min(share, len(owned)):] {
		s.handOver(t)
	}
	room := max(share-len(owned), 0)
	slices.SortFunc(candidates, byRank)
	for _, t := range candidates {
		if room > 0 && s.free(t.key, now) {
			room--
			continue
		}
		s.handOver(t) // a candidacy no longer needed: it is just given up
	}
	var free []Key
	for k := range s.want {
		if s.terms[k] == nil && s.free(k, now) {
			free = append(free, k)
		}
	}
	slices.SortFunc(free, func(a, b Key) int { return cmp.Compare(s.rank(a), s.rank(b)) })
	for _, k := range free[:min(room, len(free))] {
		s.startTerm(ctx, k)
	}
	s.forgetDeadMembers(now)
	s.cfg.Metrics.Members.Set(float64(live))
	s.cfg.Metrics.Shards.Set(float64(len(s.want)))
}

// free says whether a replica may take the shard: nobody holds its Lease, or the holder's record
// stayed unchanged for its lease duration. Called with s.mu held.
func (s *Set) free(k Key, now time.Time) bool {
	r, ok := s.leases[s.shardName(k)]
	return !ok || !r.Valid(now) || lease.HolderOf(r.Spec) == s.cfg.Identity
}

// forgetDeadMembers deletes the membership Leases of replicas that died a while ago (a killed
// replica cannot delete its own). Called with s.mu held.
func (s *Set) forgetDeadMembers(now time.Time) {
	for name, r := range s.leases {
		if r.role != roleMember || name == s.memberName || r.Valid(now) || now.Sub(r.At) < deadMemberAfter*s.cfg.Timings.LeaseDuration {
			continue
		}
		delete(s.leases, name)
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), s.cfg.Timings.RenewDeadline)
			defer cancel()
			_ = s.cfg.Leases.Delete(ctx, name, metav1.DeleteOptions{})
		}()
	}
}

// startTerm runs for the shard's Lease. Called with s.mu held.
func (s *Set) startTerm(ctx context.Context, k Key) {
	ctx, cancel := context.WithCancel(ctx)
	t := &term{key: k, fence: lease.NewFence(s.cfg.Timings), cancel: cancel, done: make(chan struct{})}
	s.terms[k] = t
	name := s.shardName(k)
	e := &lease.Elector{
		Leases: s.cfg.Leases, Name: name, Timings: s.cfg.Timings, Identity: s.cfg.Identity, Fence: t.fence,
		Labels:      map[string]string{LabelSet: s.cfg.Prefix, labelRole: roleShard},
		Annotations: map[string]string{annotationRepo: k.URL, annotationBranch: k.Branch},
		Log:         s.cfg.Log.With("lease", name, "shard", k.String()),
	}
	if r, ok := s.leases[name]; ok {
		e.Known = &r.Record
	}
	go s.runTerm(ctx, t, e)
}

// runTerm runs the Elector of a shard until ctx ends or the Lease is lost, telling the daemon when
// this replica starts and stops owning the shard.
func (s *Set) runTerm(ctx context.Context, t *term, e *lease.Elector) {
	defer func() {
		s.mu.Lock()
		if s.terms[t.key] == t {
			delete(s.terms, t.key)
		}
		s.mu.Unlock()
		close(t.done)
		s.wake()
	}()
	held := make(chan context.Context, 1)
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		e.Run(ctx, held)
	}()
	select {
	case holding := <-held:
		s.setLeading(t, true)
		<-holding.Done()
		s.setLeading(t, false)
	case <-ended:
	}
	<-ended
}

// setLeading records that this replica started or stopped holding a shard's Lease.
func (s *Set) setLeading(t *term, leading bool) {
	s.mu.Lock()
	t.leading = leading
	leaving := t.leaving
	s.mu.Unlock()
	shard := t.key.String()
	switch {
	case leading:
		s.cfg.Metrics.Owned.WithLabelValues(shard).Set(1)
		s.cfg.Metrics.Changes.WithLabelValues("acquired").Inc()
		s.cfg.Log.Info("owning shard", "shard", shard)
	case leaving:
		s.cfg.Metrics.Owned.DeleteLabelValues(shard)
		s.cfg.Metrics.Changes.WithLabelValues("released").Inc()
		s.cfg.Log.Info("handed shard over", "shard", shard)
	default:
		s.cfg.Metrics.Owned.DeleteLabelValues(shard)
		s.cfg.Metrics.Changes.WithLabelValues("lost").Inc()
		s.cfg.Log.Warn("lost shard: its lease could not be renewed in time", "shard", shard)
	}
	s.cfg.OnChange()
}

// handOver gives a shard up: it is no longer owned at once, so the daemon stops its work and makes
// its last push; then its Lease is released for another replica. Called with s.mu held.
func (s *Set) handOver(t *term) {
	t.leaving = true
	if !t.leading {
		t.cancel()
		return
	}
	s.cfg.Log.Info("handing shard over", "shard", t.key.String())
	go func() {
		s.cfg.OnChange()
		ctx, cancel := context.WithTimeout(context.Background(), drainTimeout)
		s.cfg.Drain(ctx, t.key)
		cancel()
		t.cancel()
	}()
}

// stopAll gives every shard up and returns once their Leases are released.
func (s *Set) stopAll() {
	s.mu.Lock()
	terms := make([]*term, 0, len(s.terms))
	for _, t := range s.terms {
		t.leaving = true
		terms = append(terms, t)
	}
	s.mu.Unlock()
	if len(terms) > 0 {
		s.cfg.OnChange()
	}
	for _, t := range terms {
		t.cancel()
	}
	for _, t := range terms {
		<-t.done
	}
}
