package webhook

import (
	"cmp"
	"context"
	"log/slog"
	"slices"
	"sync"
	"time"
)

// Default backoff of a Registrar whose apply failed.
const (
	DefaultRegistrarMinBackoff = 500 * time.Millisecond
	DefaultRegistrarMaxBackoff = 30 * time.Second
	registrarApplyTimeout      = 30 * time.Second
)

// RegistrarConfig configures a Registrar. Zero values take the defaults.
type RegistrarConfig struct {
	// Registration is what Run applies.
	Registration *Registration
	// OnApply, if set, is told the outcome of every apply on Run's goroutine: the error, or nil
	// once it succeeded. It must not block.
	OnApply func(error)
	// MinBackoff and MaxBackoff bound the wait before a failed apply is tried again.
	MinBackoff, MaxBackoff time.Duration
	Log                    *slog.Logger
}

// Registrar is the one goroutine that applies the webhook registration, so two writers never
// race: the mirror says which resources it watches (SetResources), the certificate source says
// its CA changed (CARotated); neither waits for the apiserver. Run applies the latest resources
// after each signal and retries a failed apply with backoff, which is also how a missing
// permission heals once it is granted.
type Registrar struct {
	cfg  RegistrarConfig
	wake chan struct{} // holds at most one pending signal

	mu        sync.Mutex
	resources []Resource
	known     bool // SetResources was called: before, there is nothing to register
}

// NewRegistrar returns a Registrar; Run does the work.
func NewRegistrar(cfg RegistrarConfig) *Registrar {
	cfg.MinBackoff = cmp.Or(cfg.MinBackoff, DefaultRegistrarMinBackoff)
	cfg.MaxBackoff = max(cmp.Or(cfg.MaxBackoff, DefaultRegistrarMaxBackoff), cfg.MinBackoff)
	if cfg.OnApply == nil {
		cfg.OnApply = func(error) {}
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	return &Registrar{cfg: cfg, wake: make(chan struct{}, 1)}
}

// SetResources makes rs the resources to register, replacing any not yet applied: the latest
// value wins. It never blocks, and may be called before Run starts.
func (r *Registrar) SetResources(rs []Resource) {
	r.mu.Lock()
	r.resources, r.known = slices.Clone(rs), true
	r.mu.Unlock()
	r.signal()
}

// CARotated has the registration applied again with the certificate source's current CA bundle.
// It never blocks.
func (r *Registrar) CARotated() { r.signal() }

func (r *Registrar) signal() {
	select {
	case r.wake <- struct{}{}:
	default: // a signal is pending already; Run reads the latest state when it takes it
	}
}

func (r *Registrar) latest() ([]Resource, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.resources, r.known
}

// Run applies the registration whenever signalled, until ctx ends. Resources set before Run
// started are applied at once.
func (r *Registrar) Run(ctx context.Context) error {
	backoff := r.cfg.MinBackoff
	var retry <-chan time.Time // set while a failed apply waits to be tried again
	select {
	case <-r.wake: // a signal from before Run: the first apply below covers it
	default:
	}
	for {
		if rs, known := r.latest(); known {
			err := r.apply(ctx, rs)
			if ctx.Err() != nil {
				return nil
			}
			r.cfg.OnApply(err)
			if err != nil {
				r.cfg.Log.Debug("webhook registration failed; retrying", "in", backoff, "err", err)
				retry = time.After(backoff)
				backoff = min(2*backoff, r.cfg.MaxBackoff)
			} else {
				retry, backoff = nil, r.cfg.MinBackoff
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-r.wake:
		case <-retry:
		}
	}
}

func (r *Registrar) apply(ctx context.Context, rs []Resource) error {
	ctx, cancel := context.WithTimeout(ctx, registrarApplyTimeout)
	defer cancel()
	if err := r.cfg.Registration.Update(ctx, rs); err != nil {
		return err
	}
	r.cfg.Log.Debug("webhook registration applied", "resources", len(rs))
	return nil
}
