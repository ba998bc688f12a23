package gitops

import (
	"context"
	"sync"
)

// Slots bound how many workers commit and push at once: globally and per repository URL. One
// Slots value is shared by all workers.
type Slots struct {
	global     chan struct{}
	maxPerRepo int

	mu      sync.Mutex
	perRepo map[string]chan struct{}
}

// NewSlots creates the semaphores; a limit ≤ 0 means unbounded.
func NewSlots(maxGlobal, maxPerRepo int) *Slots {
	s := &Slots{maxPerRepo: maxPerRepo, perRepo: map[string]chan struct{}{}}
	if maxGlobal > 0 {
		s.global = make(chan struct{}, maxGlobal)
	}
	return s
}

// acquire blocks until both a global and a per-repository slot are free, or ctx ends. The
// returned func releases them. A nil Slots never blocks.
func (s *Slots) acquire(ctx context.Context, repo string) (func(), error) {
	if s == nil {
		return func() {}, nil
	}
	repoSem := s.repoSem(repo)
	if err := take(ctx, repoSem); err != nil {
		return nil, err
	}
	if err := take(ctx, s.global); err != nil {
		give(repoSem)
		return nil, err
	}
	return func() { give(s.global); give(repoSem) }, nil
}

func (s *Slots) repoSem(repo string) chan struct{} {
	if s.maxPerRepo <= 0 {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	sem, ok := s.perRepo[repo]
	if !ok {
		sem = make(chan struct{}, s.maxPerRepo)
		s.perRepo[repo] = sem
	}
	return sem
}

func take(ctx context.Context, sem chan struct{}) error {
	if sem == nil {
		return nil
	}
	select {
	case sem <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func give(sem chan struct{}) {
	if sem != nil {
		<-sem
	}
}
