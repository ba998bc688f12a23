package webhook

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/jellydator/ttlcache/v3"
	"github.com/prometheus/client_golang/prometheus"
	authenticationv1 "k8s.io/api/authentication/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/configbutler/gitops-reverser/gitops"
	"github.com/configbutler/gitops-reverser/metrics"
	"github.com/configbutler/gitops-reverser/sanitize"
)

// Defaults of StoreConfig.
const (
	DefaultTTL      = 60 * time.Second
	DefaultCapacity = 10000
)

// StoreConfig configures a Store. Zero values take the defaults.
type StoreConfig struct {
	TTL      time.Duration    // how long an admission record waits for its watch event; default 60s
	Capacity int              // records kept at most; the least recently used goes first; default 10000
	Now      func() time.Time // the clock that ages records; default time.Now (tests inject one)
	Metrics  *metrics.Attribution
	Bot      gitops.Signature // the author Author returns on a miss
}

// Store correlates the two signals of one change: the admission webhook says who asked for it
// (Record), the watch says it persisted (Author). Both sides key it by group/kind, namespace/name,
// operation and the hash of the sanitized object (DELETE: identity and operation only), so the
// pairing needs no ordering between the two streams, whose resourceVersions are not comparable.
// A record is used at most once. Safe for concurrent use.
type Store struct {
	cache *ttlcache.Cache[key, entry]
	ttl   time.Duration
	now   func() time.Time
	bot   gitops.Signature

	hits, misses, expired prometheus.Counter
	unsubscribe           func()       // ends the eviction subscription, waiting for running callbacks
	last                  atomic.Int64 // unix nanoseconds of the newest record, made here or imported
}

// LastRecord is when the newest record was made here or imported from a peer; zero for never.
func (s *Store) LastRecord() time.Time {
	if n := s.last.Load(); n != 0 {
		return time.Unix(0, n)
	}
	return time.Time{}
}

// key identifies one change. Version is left out: the object's apiVersion is in the hashed bytes.
type key struct {
	op, group, kind, namespace, name, hash string
}

// entry is what the admission side knew about the change.
type entry struct {
	author gitops.Signature
	groups []string
	at     time.Time // by Store.now, so tests age records without waiting
}

// NewStore returns a Store; call Start to have expired records removed in the background.
func NewStore(cfg StoreConfig) *Store {
	if cfg.TTL <= 0 {
		cfg.TTL = DefaultTTL
	}
	if cfg.Capacity <= 0 {
		cfg.Capacity = DefaultCapacity
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Metrics == nil {
		cfg.Metrics = metrics.New().Attribution // counted, but in a registry nobody serves
	}
	s := &Store{
		cache: ttlcache.New(
			ttlcache.WithTTL[key, entry](cfg.TTL),
			ttlcache.WithCapacity[key, entry](uint64(cfg.Capacity)),
			ttlcache.WithDisableTouchOnHit[key, entry](),
		),
		ttl:     cfg.TTL,
		now:     cfg.Now,
		bot:     cfg.Bot,
		hits:    cfg.Metrics.EnrichHits,
		misses:  cfg.Metrics.EnrichMisses,
		expired: cfg.Metrics.Evictions.WithLabelValues(metrics.EvictedExpired),
	}
	capacity := cfg.Metrics.Evictions.WithLabelValues(metrics.EvictedCapacity)
	s.unsubscribe = s.cache.OnEviction(func(_ context.Context, r ttlcache.EvictionReason, _ *ttlcache.Item[key, entry]) {
		switch r {
		case ttlcache.EvictionReasonCapacityReached:
			capacity.Inc()
		case ttlcache.EvictionReasonExpired:
			s.expired.Inc()
		}
	})
	return s
}

// Change is one change the admission webhook saw: the operation, the object, and the canonical
// JSON of the sanitized object (sanitize.JSON(sanitize.Object(obj))), which is hashed, not kept,
// and ignored for DELETE.
type Change struct {
	Op              string
	GK              schema.GroupKind
	Namespace, Name string
	Content         []byte
}

// Record notes that user made the change. A second record of the same change replaces the first:
// the last writer is the author. It returns the record as peer replicas import it (Import), and
// false when there was no one to record.
func (s *Store) Record(c Change, user authenticationv1.UserInfo) (Correlation, bool) {
	op, gk, namespace, name, content := c.Op, c.GK, c.Namespace, c.Name, c.Content
	author := signatureOf(user)
	if author.IsZero() {
		return Correlation{}, false
	}
	k := s.key(op, gk, namespace, name, content)
	now := s.now()
	s.cache.Set(k, entry{author: author, groups: user.Groups, at: now}, ttlcache.DefaultTTL)
	s.last.Store(now.UnixNano())
	return correlationOf(k, author, user.Groups), true
}

// Author returns the credit of the change the watch saw, and removes the record: on a hit the
// admission user and true; on a miss (never recorded, already used, expired, evicted) the bot
// and false. content is as for Record, computed from the watched object.
func (s *Store) Author(op string, gk schema.GroupKind, namespace, name string, content []byte) (gitops.Credit, bool) {
	item, ok := s.cache.GetAndDelete(s.key(op, gk, namespace, name, content))
	if ok && s.now().Sub(item.Value().at) > s.ttl {
		s.expired.Inc() // aged out by our clock before ttlcache's own removed it
		ok = false
	}
	if !ok {
		s.misses.Inc()
		return gitops.Credit{Author: s.bot}, false
	}
	s.hits.Inc()
	return gitops.Credit{Author: item.Value().author}, true
}

// Len is the number of records waiting for their watch event.
func (s *Store) Len() int { return s.cache.Len() }

// Run removes expired records until ctx ends; then it ends the eviction subscription and waits
// for the callbacks in flight, so the counters are final when it returns. Records and lookups
// still work afterwards, but evictions are no longer counted. Call it once.
func (s *Store) Run(ctx context.Context) error {
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.cache.Start()
	}()
	<-ctx.Done()
	for stopped := false; !stopped; {
		// ttlcache's Stop is a no-op until Start's goroutine has begun; ask again until it ends.
		s.cache.Stop()
		select {
		case <-done:
			stopped = true
		case <-time.After(time.Millisecond):
		}
	}
	s.unsubscribe()
	return nil
}

func (s *Store) key(op string, gk schema.GroupKind, namespace, name string, content []byte) key {
	k := key{op: op, group: gk.Group, kind: gk.Kind, namespace: namespace, name: name}
	if op != "DELETE" {
		k.hash = sanitize.Hash(content)
	}
	return k
}
