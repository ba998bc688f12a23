package controller

import (
	"fmt"
	"time"

	"golang.org/x/time/rate"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/lru"
)

// Bounds of the correlation of Events, client-go's defaults: an object may have floodBurst
// Events, then one per floodRefill; the last correlationEntries Events and objects are remembered.
const (
	floodBurst         = 25
	floodRefill        = 5 * time.Minute
	correlationEntries = 4096
)

// correlator does what client-go's event correlator does for the daemon's few reasons, without
// its dependencies (strategic merge patches and OpenAPI models, several MB of binary): an Event
// that repeats one already written (same object, type, reason and message) is counted on that
// Event instead of written anew, and an object that floods is throttled.
type correlator struct {
	written *lru.Cache // repeat key → *corev1.Event last written
	floods  *lru.Cache // object key → *rate.Limiter
}

func newCorrelator() *correlator {
	return &correlator{written: lru.New(correlationEntries), floods: lru.New(correlationEntries)}
}

// correlate returns what to write for ev: ev itself, or the Event it repeats with its count
// raised (repeat true: patch that one). skip is true when ev's object is flooding.
func (c *correlator) correlate(ev *corev1.Event) (out *corev1.Event, repeat, skip bool) {
	object := objectKey(ev)
	limiter, ok := c.floods.Get(object)
	if !ok {
		limiter = rate.NewLimiter(rate.Every(floodRefill), floodBurst)
		c.floods.Add(object, limiter)
	}
	if !limiter.(*rate.Limiter).Allow() {
		return nil, false, true
	}
	last, ok := c.written.Get(repeatKey(ev))
	if !ok {
		return ev, false, false
	}
	again := last.(*corev1.Event).DeepCopy()
	again.Count++
	again.LastTimestamp = ev.LastTimestamp
	return again, true, false
}

// remember records an Event written, for its repeats.
func (c *correlator) remember(ev *corev1.Event) { c.written.Add(repeatKey(ev), ev) }

// objectKey names the object an Event is about.
func objectKey(ev *corev1.Event) string {
	obj := ev.InvolvedObject
	return fmt.Sprintf("%s/%s/%s/%s/%s", obj.Kind, obj.Namespace, obj.Name, obj.UID, obj.APIVersion)
}

// repeatKey is the same for two Events that say the same of the same object.
func repeatKey(ev *corev1.Event) string {
	return objectKey(ev) + "\x00" + ev.Type + "\x00" + ev.Reason + "\x00" + ev.Message
}

// countPatch is the merge patch that counts a repeat on the Event written before.
func countPatch(ev *corev1.Event) []byte {
	return fmt.Appendf(nil, `{"count":%d,"lastTimestamp":%q}`, ev.Count, ev.LastTimestamp.UTC().Format(time.RFC3339))
}
