package httpserver

import "time"

// Limits bound what one client may cost the server. A zero field takes the package default, so
// a caller names only what it needs differently (the admission webhook: larger bodies, shorter
// timeouts).
type Limits struct {
	// ReadHeaderTimeout bounds reading a request's headers: a client that trickles them in
	// (slowloris) is cut off.
	ReadHeaderTimeout time.Duration
	// ReadTimeout bounds reading a whole request, body included.
	ReadTimeout time.Duration
	// WriteTimeout bounds the time from the end of the request headers to the end of the answer.
	WriteTimeout time.Duration
	// IdleTimeout is how long a kept-alive connection may wait for its next request.
	IdleTimeout time.Duration
	// MaxHeaderBytes caps the request headers; more is answered 431.
	MaxHeaderBytes int
	// MaxBodyBytes, when set, caps every request body: reading past it fails and the answer is
	// 413. Zero (the default) leaves the cap to the handler, which knows what it expects.
	MaxBodyBytes int64
}

// defaultLimits suit requests from people and Git hosts: small headers, answers within seconds.
var defaultLimits = Limits{
	ReadHeaderTimeout: 5 * time.Second,
	ReadTimeout:       30 * time.Second,
	WriteTimeout:      30 * time.Second,
	IdleTimeout:       90 * time.Second,
	MaxHeaderBytes:    64 << 10,
}

// shutdownTimeout is how long Run lets requests in flight finish once its context ended.
const shutdownTimeout = 5 * time.Second

// withDefaults fills every zero field of l from defaultLimits.
func (l Limits) withDefaults() Limits {
	d := defaultLimits
	pick := func(v, def time.Duration) time.Duration {
		if v > 0 {
			return v
		}
		return def
	}
	l.ReadHeaderTimeout = pick(l.ReadHeaderTimeout, d.ReadHeaderTimeout)
	l.ReadTimeout = pick(l.ReadTimeout, d.ReadTimeout)
	l.WriteTimeout = pick(l.WriteTimeout, d.WriteTimeout)
	l.IdleTimeout = pick(l.IdleTimeout, d.IdleTimeout)
	if l.MaxHeaderBytes <= 0 {
		l.MaxHeaderBytes = d.MaxHeaderBytes
	}
	if l.MaxBodyBytes < 0 {
		l.MaxBodyBytes = 0
	}
	return l
}
