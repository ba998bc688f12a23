package testenv

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
)

// Planes lends control planes to tests that run in parallel. A test has its plane to itself until
// it ends, so what it changes cluster-wide (a webhook configuration, CRDs, the approver policy,
// an apiserver restart) and the daemons it starts, which watch every namespace, never meet another
// running test. Planes are started when first needed, at most max of them, and lent again to the
// tests that come after, reset by the package's own reset first: that removes what would make a
// later test's daemon act on an earlier test's leftovers.
type Planes struct {
	free    chan *ControlPlane
	mu      sync.Mutex
	all     []*ControlPlane
	started int                      // planes running or starting
	lent    map[string]*ControlPlane // by top-level test name
	max     int
	reset   func(*ControlPlane) error
}

// NewPlanes makes a pool of at most maxPlanes control planes; none runs until a test asks for
// one. reset runs on a plane each time a test gives it back.
func NewPlanes(maxPlanes int, reset func(*ControlPlane) error) *Planes {
	return &Planes{free: make(chan *ControlPlane, maxPlanes), lent: map[string]*ControlPlane{}, max: maxPlanes, reset: reset}
}

// Lend gives tb a control plane of its own, waiting for one to come free when max are lent, and
// takes it back when tb ends. A *testing.T runs in parallel with the other tests that borrow one
// (Lend calls t.Parallel, so call it first); a benchmark runs alone, as benchmarks do.
func (p *Planes) Lend(tb testing.TB) *ControlPlane {
	tb.Helper()
	if t, ok := tb.(*testing.T); ok {
		t.Parallel()
	}
	cp, err := p.take()
	if err != nil {
		tb.Fatal(err)
	}
	p.mu.Lock()
	p.lent[tb.Name()] = cp
	p.mu.Unlock()
	tb.Cleanup(func() { // the first cleanup registered runs last, after the test's own
		if err := p.reset(cp); err != nil {
			tb.Errorf("testenv: reset the control plane after the test: %v", err)
		}
		p.mu.Lock()
		delete(p.lent, tb.Name())
		p.mu.Unlock()
		p.free <- cp
	})
	return cp
}

// Of is the control plane lent to tb, or to the test tb is a subtest of. It fails tb when none is:
// the test forgot to call Lend.
func (p *Planes) Of(tb testing.TB) *ControlPlane {
	tb.Helper()
	top, _, _ := strings.Cut(tb.Name(), "/")
	p.mu.Lock()
	cp := p.lent[top]
	p.mu.Unlock()
	if cp == nil {
		tb.Fatalf("testenv: %s has no control plane: call Lend at its start", top)
	}
	return cp
}

func (p *Planes) take() (*ControlPlane, error) {
	select {
	case cp := <-p.free:
		return cp, nil
	default:
	}
	p.mu.Lock()
	if p.started >= p.max {
		p.mu.Unlock()
		return <-p.free, nil
	}
	p.started++
	p.mu.Unlock()
	cp, err := Start(context.Background())
	p.mu.Lock()
	defer p.mu.Unlock()
	if err != nil {
		p.started--
		return nil, fmt.Errorf("start a control plane: %w", err)
	}
	p.all = append(p.all, cp)
	return cp, nil
}

// Stop stops every plane started. Call it after the tests, when none is lent.
func (p *Planes) Stop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	var wg sync.WaitGroup
	for _, cp := range p.all {
		wg.Go(cp.Stop)
	}
	wg.Wait()
	p.all, p.started = nil, 0
}
