package httpserver

import (
	"sync"
	"time"
)

// Throttle lets one message per key (a source address, a peer) through every interval and counts
// the ones it held back. It remembers at most capacity keys, so a crowd of keys cannot grow
// memory. Safe for concurrent use.
type Throttle struct {
	interval time.Duration
	capacity int

	mu   sync.Mutex
	keys map[string]*window
}

// window is one key's current interval.
type window struct {
	since   time.Time // when its last message was let through
	dropped int       // messages held back since
}

// NewThrottle lets one message per key through every interval, remembering up to capacity keys.
func NewThrottle(interval time.Duration, capacity int) *Throttle {
	return &Throttle{interval: interval, capacity: capacity, keys: map[string]*window{}}
}

// Admit says whether a message of key may pass at now, and how many of its messages were held
// back before this one.
func (t *Throttle) Admit(key string, now time.Time) (dropped int, pass bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	w := t.keys[key]
	if w != nil && now.Sub(w.since) < t.interval {
		w.dropped++
		return 0, false
	}
	if w == nil {
		t.makeRoomLocked(now)
		w = &window{}
		t.keys[key] = w
	}
	dropped = w.dropped
	w.since, w.dropped = now, 0
	return dropped, true
}

// makeRoomLocked forgets the keys whose window ended, and when every one is still current, the
// one whose window started first, so there is room for one more.
func (t *Throttle) makeRoomLocked(now time.Time) {
	if len(t.keys) < t.capacity {
		return
	}
	var oldest string
	for k, w := range t.keys {
		if now.Sub(w.since) >= t.interval {
			delete(t.keys, k)
			continue
		}
		if oldest == "" || w.since.Before(t.keys[oldest].since) {
			oldest = k
		}
	}
	if len(t.keys) >= t.capacity {
		delete(t.keys, oldest)
	}
}

// droppedFrom is how many messages of key were held back in its current window.
func (t *Throttle) droppedFrom(key string) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	if w := t.keys[key]; w != nil {
		return w.dropped
	}
	return 0
}
