package receiver

import (
	"crypto/sha256"
	"sync"
	"time"

	"github.com/jellydator/ttlcache/v3"
)

// Defaults for NewDeliveries.
const (
	// DefaultDeliveryTTL is how long a delivery id is remembered.
	DefaultDeliveryTTL = 10 * time.Minute
	// DefaultDeliveryCapacity bounds how many ids are remembered (some 15 MB when full).
	DefaultDeliveryCapacity = 100_000
)

// Deliveries remembers delivery ids for a TTL to refuse replays. It is bounded: when full, the id
// least recently recorded or replayed is forgotten first. Ids are kept as hashes, so memory does
// not depend on how long a sender's ids are. It is safe for concurrent use and needs no goroutine:
// expired ids go when the next call looks.
type Deliveries struct {
	ttl time.Duration
	now func() time.Time

	// mu makes look-up and record one step, so two copies of a delivery racing in are not both new.
	mu sync.Mutex
	// seen holds when each id was recorded. It is given no TTL of its own: ttlcache ages items by
	// the wall clock, and expiry here follows now (which tests move by hand). It brings the bound
	// and the order of eviction.
	seen *ttlcache.Cache[deliveryKey, time.Time]
}

type deliveryKey [sha256.Size]byte

// NewDeliveries returns a Deliveries that remembers ids for ttl, at most capacity of them, reading
// the time from now. Zero values take the defaults (DefaultDeliveryTTL, DefaultDeliveryCapacity,
// time.Now).
func NewDeliveries(ttl time.Duration, capacity int, now func() time.Time) *Deliveries {
	if ttl <= 0 {
		ttl = DefaultDeliveryTTL
	}
	if capacity <= 0 {
		capacity = DefaultDeliveryCapacity
	}
	if now == nil {
		now = time.Now
	}
	return &Deliveries{ttl: ttl, now: now,
		seen: ttlcache.New(ttlcache.WithCapacity[deliveryKey, time.Time](uint64(capacity)))}
}

// Seen records (receiver, id) and reports whether it was already recorded within the TTL. A
// replay does not extend the TTL: it runs from the first delivery. An empty id is never seen and
// not recorded.
func (d *Deliveries) Seen(receiver, id string) bool {
	if id == "" {
		return false
	}
	h := sha256.New()
	h.Write([]byte(receiver))
	h.Write([]byte{0})
	h.Write([]byte(id))
	var key deliveryKey
	h.Sum(key[:0])

	d.mu.Lock()
	defer d.mu.Unlock()
	now := d.now()
	d.expire(now)
	if it := d.seen.Get(key); it != nil && now.Sub(it.Value()) < d.ttl {
		return true
	}
	d.seen.Set(key, now, ttlcache.DefaultTTL)
	return false
}

// expire forgets the ids recorded a TTL or more ago, from the least recently used end, and stops
// at the first one still fresh. One that a replay moved up (or recorded while the clock was
// behind) waits there until it comes to that end, is replaced by Seen, or is evicted.
func (d *Deliveries) expire(now time.Time) {
	var old []deliveryKey
	d.seen.RangeBackwards(func(it *ttlcache.Item[deliveryKey, time.Time]) bool {
		if now.Sub(it.Value()) < d.ttl {
			return false
		}
		old = append(old, it.Key())
		return true
	})
	for _, k := range old {
		d.seen.Delete(k)
	}
}
