package notify

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/configbutler/gitops-reverser/metrics"
)

// Bounds of a channel's sending.
const (
	// queueSize is how many notices wait for a channel; beyond, new ones are dropped (counted).
	queueSize = 64
	// DefaultTimeout bounds one send when the channel does not say; MaxTimeout whatever it says.
	DefaultTimeout = 10 * time.Second
	MaxTimeout     = time.Minute
	// DefaultPerMinute caps a channel's sends a minute when it does not say.
	DefaultPerMinute = 60
	// attempts is how many times a notice is tried; retryBase the wait before the second try,
	// multiplied by four before each next one.
	attempts  = 3
	retryBase = time.Second
)

// outbox is one channel's queue and the goroutine that empties it: a channel that is down or
// slow holds up only its own notices, and drops, counted, what its queue cannot hold.
type outbox struct {
	name    string // namespace/name of the NotifyChannel
	typ     string
	metrics *metrics.Notify
	queue   chan Notice

	settings atomic.Pointer[sending] // swapped whole when the channel's spec or Secret changes

	sent, failed, dropped atomic.Int64
	mu                    sync.Mutex
	lastSent              time.Time
	lastErr               string // "" after a success
	changed               bool   // since the status was last written

	// the cap's window: when the current minute began, and how many were sent in it
	windowStart time.Time
	inWindow    int
}

// sending is how an outbox sends: through which Sender, with which timeout and cap.
type sending struct {
	sender    Sender
	timeout   time.Duration
	perMinute int
}

func newOutbox(name, typ string, how sending, m *metrics.Notify) *outbox {
	o := &outbox{name: name, typ: typ, metrics: m, queue: make(chan Notice, queueSize)}
	o.settings.Store(&how)
	return o
}

// offer queues n without ever waiting; a full queue drops it.
func (o *outbox) offer(n Notice) {
	select {
	case o.queue <- n:
	default:
		o.drop(metrics.DropQueue)
	}
}

func (o *outbox) drop(reason string) {
	o.dropped.Add(1)
	o.metrics.Dropped.WithLabelValues(o.name, reason).Inc()
	o.touch("")
}

// run sends what is queued until ctx ends; what is still queued then is dropped, counted.
func (o *outbox) run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			for range len(o.queue) {
				<-o.queue
				o.drop(metrics.DropStopped)
			}
			return
		case n := <-o.queue:
			if !o.allowed(time.Now()) {
				o.drop(metrics.DropCap)
				continue
			}
			o.deliver(ctx, n)
		}
	}
}

// allowed counts a send against the cap of the minute that began at windowStart.
func (o *outbox) allowed(now time.Time) bool {
	if now.Sub(o.windowStart) >= time.Minute {
		o.windowStart, o.inWindow = now, 0
	}
	if o.inWindow >= o.settings.Load().perMinute {
		return false
	}
	o.inWindow++
	return true
}

// deliver tries n up to attempts times, waiting longer before each retry, unless the channel's
// answer says that trying again cannot help.
func (o *outbox) deliver(ctx context.Context, n Notice) {
	wait := retryBase
	for try := 1; ; try++ {
		err := o.send(ctx, n)
		if err == nil {
			o.sent.Add(1)
			o.metrics.Sent.WithLabelValues(o.name).Inc()
			o.succeeded(time.Now())
			return
		}
		if try == attempts || !retryable(err) || ctx.Err() != nil {
			o.failed.Add(1)
			o.metrics.Failed.WithLabelValues(o.name).Inc()
			o.touch(err.Error())
			return
		}
		select {
		case <-ctx.Done():
		case <-time.After(wait):
		}
		wait *= 4
	}
}

func (o *outbox) send(ctx context.Context, n Notice) error {
	how := o.settings.Load()
	ctx, cancel := context.WithTimeout(ctx, how.timeout)
	defer cancel()
	start := time.Now()
	err := how.sender.Send(ctx, n)
	o.metrics.SendSeconds.WithLabelValues(o.typ).Observe(time.Since(start).Seconds())
	return err
}

// touch records a send's outcome for the channel's status: errText "" is a success (or a drop,
// which leaves the last error as it was when nothing was sent).
func (o *outbox) touch(errText string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.changed = true
	if errText != "" {
		o.lastErr = errText
	}
}

// succeeded is touch for a success: it clears the last error.
func (o *outbox) succeeded(at time.Time) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.changed, o.lastSent, o.lastErr = true, at, ""
}

// outboxState is what a channel's status says of its sending.
type outboxState struct {
	sent, failed, dropped int64
	lastSent              time.Time
	lastErr               string
}

// state is the channel's sending as its status should say it, and whether it changed since the
// last call.
func (o *outbox) state() (outboxState, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	changed := o.changed
	o.changed = false
	return outboxState{sent: o.sent.Load(), failed: o.failed.Load(), dropped: o.dropped.Load(), lastSent: o.lastSent, lastErr: o.lastErr}, changed
}

// hasNews says whether the channel's sending changed since its status was last written.
func (o *outbox) hasNews() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.changed
}
