package notify

import (
	"sync"
	"time"
)

// maxRemembered bounds the notices remembered for their duplicate windows; past it, the oldest
// window to end is forgotten first (an early duplicate may then be sent twice, never lost).
const maxRemembered = 10000

// dedupe remembers, per key, until when a notice with that key is a duplicate.
type dedupe struct {
	mu    sync.Mutex
	until map[string]time.Time
}

func newDedupe() *dedupe { return &dedupe{until: map[string]time.Time{}} }

// first says whether key is new at now, and if so remembers it for window.
func (d *dedupe) first(key string, window time.Duration, now time.Time) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if end, ok := d.until[key]; ok && now.Before(end) {
		return false
	}
	if len(d.until) >= maxRemembered {
		d.forget(now)
	}
	d.until[key] = now.Add(window)
	return true
}

// forget drops the windows that have ended, and while still full, the one that ends first.
func (d *dedupe) forget(now time.Time) {
	for k, end := range d.until {
		if !now.Before(end) {
			delete(d.until, k)
		}
	}
	for len(d.until) >= maxRemembered {
		var oldest string
		var at time.Time
		for k, end := range d.until {
			if oldest == "" || end.Before(at) {
				oldest, at = k, end
			}
		}
		delete(d.until, oldest)
	}
}
