package daemon

import (
	"context"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// problem is why an optional part cannot do its job, said so that an operator can act on it.
type problem struct {
	what string // what does not work, with the error
	fix  string // what to do about it
	// final means retrying cannot help: the part waits for a restart with other settings.
	final bool
}

func (p problem) String() string { return p.what + "; fix: " + p.fix }

// optionalParts tracks the parts the mirror can run without (attribution). A degraded part is
// reported on /readyz, which stays 200: a missing optional part must not take the Pod out of its
// Services. Each distinct problem is logged once as a warning, and the recovery once as info, so a
// part that retries every 30 s does not flood the log. Safe for concurrent use.
type optionalParts struct {
	gauge *prometheus.GaugeVec
	log   *slog.Logger

	mu    sync.Mutex
	parts map[string]*partState
}

type partState struct {
	effect   string // what users miss while the part is degraded
	current  *problem
	attempts int             // failed attempts since the part was last fine
	warned   map[string]bool // problems already logged in this degraded spell
}

func newOptionalParts(gauge *prometheus.GaugeVec, log *slog.Logger) *optionalParts {
	return &optionalParts{gauge: gauge, log: log, parts: map[string]*partState{}}
}

func (o *optionalParts) state(part string) *partState {
	s := o.parts[part]
	if s == nil {
		s = &partState{warned: map[string]bool{}}
		o.parts[part] = s
		o.gauge.WithLabelValues(part).Set(0)
	}
	return s
}

// track makes part known as fine, so its gauge reads 0 from the start; effect says what users
// miss while it is degraded.
func (o *optionalParts) track(part, effect string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.state(part).effect = effect
}

// degraded records that an attempt of part failed with p.
func (o *optionalParts) degraded(part string, p problem) {
	o.mu.Lock()
	defer o.mu.Unlock()
	s := o.state(part)
	s.current = &p
	s.attempts++
	o.gauge.WithLabelValues(part).Set(1)
	if s.warned[p.String()] {
		return
	}
	s.warned[p.String()] = true
	retry := "retrying with backoff"
	if p.final {
		retry = "not retried: restart with the fix"
	}
	o.log.Warn(part+" degraded; the mirror keeps running",
		"part", part, "problem", p.what, "fix", p.fix, "retry", retry, "effect", s.effect)
}

// retry calls try until it works, with backoff from optionalMinBackoff to optionalMaxBackoff;
// every failed attempt makes part degraded with the problem try returns. It returns false when ctx
// ended first. It does not mark part fine: the caller does, once the part really works.
func (o *optionalParts) retry(ctx context.Context, part string, try func() (problem, bool)) bool {
	backoff := optionalMinBackoff
	for {
		p, ok := try()
		if ok {
			return true
		}
		if ctx.Err() != nil {
			return false
		}
		o.degraded(part, p)
		o.log.Debug(part+" not started; retrying", "in", backoff, "problem", p.what)
		select {
		case <-ctx.Done():
			return false
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, optionalMaxBackoff)
	}
}

// fine records that part works (again).
func (o *optionalParts) fine(part string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	s := o.state(part)
	if s.current == nil {
		return
	}
	o.log.Info(part+" recovered", "part", part, "failedAttempts", s.attempts)
	s.current, s.attempts, s.warned = nil, 0, map[string]bool{}
	o.gauge.WithLabelValues(part).Set(0)
}

// report is one line per degraded part, for the /readyz body.
func (o *optionalParts) report() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	var lines []string
	for part, s := range o.parts {
		if s.current == nil {
			continue
		}
		retry := fmt.Sprintf("%d failed attempts, retrying", s.attempts)
		if s.current.final {
			retry = "not retried"
		}
		lines = append(lines, fmt.Sprintf("%s degraded (%s): %s", part, retry, s.current))
	}
	sort.Strings(lines)
	return lines
}
