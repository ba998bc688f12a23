package receiver

import (
	"crypto/sha256"
	"sync"
	"time"
)

// Defaults for NewDeliveries.
const (
	// DefaultDeliveryTTL is how long a delivery id is remembered.
	DefaultDeliveryTTL = 10 * time.Minute
	// DefaultDeliveryCapacity bounds how many ids are remembered (some 15 MB when full).
	DefaultDeliveryCapacity = 100_000
)

// Deliveries remembers delivery ids for a TTL to refuse replays. It is bounded: when full, the
// oldest id is forgotten first. Ids are kept as hashes, so memory does not depend on how long a
// sender's ids are. It is safe for concurrent use.
type Deliveries struct {
	ttl      time.Duration
	capacity int
	now      func() time.Time

	mu   sync.Mutex
	seen map[deliveryKey]time.Time // when each id was recorded
	fifo ring                      // the same ids in the order they were recorded
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
	return &Deliveries{ttl: ttl, capacity: capacity, now: now, seen: make(map[deliveryKey]time.Time)}
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
	if at, ok := d.seen[key]; ok && now.Sub(at) < d.ttl {
		return true
	}
	if d.fifo.len() == d.capacity {
		d.forget(d.fifo.pop())
	}
	d.seen[key] = now
	d.fifo.push(recorded{key: key, at: now})
	return false
}

// expire forgets the ids recorded a TTL or more ago, oldest first.
func (d *Deliveries) expire(now time.Time) {
	for d.fifo.len() > 0 && now.Sub(d.fifo.peek().at) >= d.ttl {
		d.forget(d.fifo.pop())
	}
}

// forget drops an id unless it was recorded again since (then a later entry in fifo stands for it).
func (d *Deliveries) forget(r recorded) {
	if at, ok := d.seen[r.key]; ok && at.Equal(r.at) {
		delete(d.seen, r.key)
	}
}

// recorded is one id and when it was recorded.
type recorded struct {
	key deliveryKey
	at  time.Time
}

// ring is a FIFO queue that grows as needed and reuses its space.
type ring struct {
	buf   []recorded
	start int
	n     int
}

func (q *ring) len() int { return q.n }

func (q *ring) peek() recorded { return q.buf[q.start] }

func (q *ring) push(r recorded) {
	if q.n == len(q.buf) {
		grown := make([]recorded, max(16, 2*len(q.buf)))
		for i := range q.n {
			grown[i] = q.buf[(q.start+i)%len(q.buf)]
		}
		q.buf, q.start = grown, 0
	}
	q.buf[(q.start+q.n)%len(q.buf)] = r
	q.n++
}

func (q *ring) pop() recorded {
	r := q.buf[q.start]
	q.buf[q.start] = recorded{}
	q.start = (q.start + 1) % len(q.buf)
	q.n--
	return r
}
