package gitops

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
)

// Bot is the daemon in Git: the committer of every commit and the author of every change nobody
// can be credited with, unless Identity says otherwise.
var Bot = Signature{Name: "gitops-reverser", Email: "gitops-reverser@configbutler.ai"}

// Bounds of a worker's queue and shutdown.
const (
	queueSize       = 1024
	shutdownTimeout = 10 * time.Second
)

// ErrStopped is returned by calls on a worker whose Run has returned.
var ErrStopped = errors.New("git worker stopped")

// Worker mirrors changes into one branch of one repository. Run owns the clone; every other
// method only talks to Run over a bounded channel and is safe from any goroutine.
type Worker struct {
	remote   Remote
	dir      string
	limits   BatchLimits
	identity Identity
	slots    *Slots
	log      *slog.Logger
	m        instruments
	in       chan request
	done     chan struct{}
	retry    retryPolicy

	// Owned by the Run goroutine.
	repo       *repo
	store      *store
	base       plumbing.Hash // the remote tip our commits start from
	needFetch  bool
	batch      batch
	pending    []run // committed intents not yet accepted by the remote
	built      build
	waiters    []chan error
	batchTimer *time.Timer
	retryTimer *time.Timer
	retrying   bool // a retry is scheduled: new batches wait for it
	pushWanted bool // a batch was flushed since the last push
	failures   int

	mu     sync.Mutex
	status WorkerStatus
}

// request is an intent, or a flush when flush is set.
type request struct {
	item  item
	flush chan error
}

// NewWorker creates a worker; nothing happens until Run.
func NewWorker(cfg WorkerConfig) *Worker {
	id := cfg.Identity
	if id.Bot.IsZero() {
		id.Bot = Bot
	}
	if id.Committer.IsZero() {
		id.Committer = id.Bot
	}
	log := cfg.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Worker{
		remote:   cfg.Remote,
		dir:      filepath.Join(cfg.WorkDir, WorkerKey(cfg.Remote.URL, cfg.Remote.Branch)),
		limits:   cfg.Limits.withDefaults(),
		identity: id,
		slots:    cfg.Slots,
		log:      log.With("repo", redactURL(cfg.Remote.URL), "branch", cfg.Remote.Branch),
		m:        newInstruments(cfg.Metrics, cfg.Remote),
		in:       make(chan request, queueSize),
		done:     make(chan struct{}),
		retry:    defaultRetry,
	}
}

// Run opens (or clones) the repository and processes intents until ctx ends; then it commits
// and pushes what it holds, bounded by a short deadline, and returns.
func (w *Worker) Run(ctx context.Context) error {
	defer close(w.done)
	rp, err := openRepo(w.dir, w.remote, w.log)
	if err != nil {
		w.setStatus(func(s *WorkerStatus) { s.LastError = err })
		return err
	}
	defer rp.close()
	w.repo, w.store = rp, newStore(rp.sto)
	if w.base, err = rp.tip(); err != nil {
		return err
	}
	w.batchTimer, w.retryTimer = stoppedTimer(), stoppedTimer()
	defer w.batchTimer.Stop()
	defer w.retryTimer.Stop()
	w.needFetch = true
	w.fetchAtStart(ctx)
	for {
		select {
		case <-ctx.Done():
			return w.shutdown()
		case req := <-w.in:
			w.handle(req)
			w.drain()
		case <-w.batchTimer.C:
			w.onBatchDeadline()
		case <-w.retryTimer.C:
			w.retrying, w.pushWanted = false, true
		}
		if w.pushWanted && !w.retrying {
			w.pushWanted = false
			w.push(ctx)
		}
		w.report()
	}
}

// drain handles the requests already waiting, so that batches flushed back to back under load
// travel in one push instead of one push each.
func (w *Worker) drain() {
	for range queueSize {
		select {
		case req := <-w.in:
			w.handle(req)
		default:
			return
		}
	}
}

// fetchAtStart brings the clone up to date; on failure the first push fetches again.
func (w *Worker) fetchAtStart(ctx context.Context) {
	tip, err := w.repo.fetch(ctx)
	if err != nil {
		w.log.Warn("initial fetch failed, will retry before the first push", "err", err)
		w.setStatus(func(s *WorkerStatus) { s.LastError = err })
		return
	}
	w.base, w.needFetch = tip, false
	w.setStatus(func(s *WorkerStatus) { s.LastPushed = hashString(tip) })
}

func (w *Worker) handle(req request) {
	if req.flush != nil {
		w.waiters = append(w.waiters, req.flush)
		w.flushBatch()
		return
	}
	now := time.Now()
	first := w.batch.empty()
	w.batch.add(req.item, now)
	switch {
	case w.batch.full(w.limits):
		w.flushBatch()
	case first:
		w.batchTimer.Reset(w.batch.deadline(w.limits).Sub(now))
	}
}

// onBatchDeadline commits the batch when its deadline passed; a change that arrived since the
// timer was set moved the quiet deadline, so the timer is set again instead.
func (w *Worker) onBatchDeadline() {
	if w.batch.empty() {
		return
	}
	if wait := time.Until(w.batch.deadline(w.limits)); wait > 0 {
		w.batchTimer.Reset(wait)
		return
	}
	w.flushBatch()
}

// flushBatch turns the batch into pending runs, to be pushed once the queue is drained.
func (w *Worker) flushBatch() {
	w.batchTimer.Stop()
	if !w.batch.empty() {
		w.pending = append(w.pending, w.batch.take(w.identity.Bot)...)
		if n, b := pendingSize(w.pending); n > maxPendingItems || b > maxPendingBytes {
			w.pending = coalesce(w.pending, w.identity.Bot)
			w.built.valid = false
		}
	}
	w.pushWanted = true
}

// report publishes the queue depth and pending count.
func (w *Worker) report() {
	n, _ := pendingSize(w.pending)
	n += len(w.batch.items)
	w.m.queue(n + len(w.in))
	w.setStatus(func(s *WorkerStatus) { s.Pending = n })
}

func (w *Worker) setStatus(f func(*WorkerStatus)) {
	w.mu.Lock()
	defer w.mu.Unlock()
	f(&w.status)
}

// shutdown takes what is already queued and makes a last, bounded attempt to push it.
func (w *Worker) shutdown() error {
	ctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	w.drain()
	w.retrying = false
	w.flushBatch()
	w.push(ctx)
	w.report()
	if len(w.pending) == 0 {
		return nil
	}
	last := w.Status().LastError
	if last == nil {
		last = errors.New("push did not land before the deadline")
	}
	err := fmt.Errorf("stop git worker: %d runs not pushed: %w", len(w.pending), last)
	w.notify(err)
	return err
}

// notify answers every Flush waiting for the pending runs.
func (w *Worker) notify(err error) {
	for _, c := range w.waiters {
		c <- err
	}
	w.waiters = nil
}

func stoppedTimer() *time.Timer {
	t := time.NewTimer(time.Hour)
	t.Stop()
	return t
}

func hashString(h plumbing.Hash) string {
	if h.IsZero() {
		return ""
	}
	return h.String()
}
