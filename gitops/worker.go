package gitops

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"time"

	"github.com/go-git/go-git/v5/plumbing"

	"github.com/configbutler/gitops-reverser/gitstore"
	"github.com/configbutler/gitops-reverser/placement"
)

// Bot is the daemon in Git: the committer of every commit and the author of every change nobody
// can be credited with, unless Identity says otherwise.
var Bot = Signature{Name: "gitops-reverser", Email: "gitops-reverser@configbutler.ai"}

// shutdownTimeout bounds the last push attempt when a worker stops.
const shutdownTimeout = 10 * time.Second

// ErrStopped is returned by calls on a worker whose Run has returned.
var ErrStopped = errors.New("git worker stopped")

// Worker mirrors changes into one branch of one repository. Run owns the clone; every other
// method only leaves work in the worker's inbox, never blocks on the remote, and is safe from
// any goroutine.
type Worker struct {
	remote      Remote
	dir         string
	limits      BatchLimits
	identity    Identity
	slots       *Slots
	log         *slog.Logger
	m           instruments
	in          *inbox
	done        chan struct{}
	retry       retryPolicy
	onStatus    func()                    // told when the failing state flips or the queue was coalesced
	holds       *keyHolds                 // the pool's holds of this branch; nil for a worker outside a pool
	fence       Fence                     // nil: always push
	signer      Signer                    // nil: commits are not signed; replaced by setSigner
	delivery    Delivery                  // set when remote.Head is: the pull request's host
	ours        func(message string) bool // the daemon's own commits; nil: all are
	requestPoll time.Duration             // 0: DefaultRequestPoll

	// Owned by the Run goroutine.
	repo        *gitstore.Repo
	store       *gitstore.Store // the repo's
	pusher      pusher
	base        plumbing.Hash // the remote tip our commits start from
	needFetch   bool
	batch       batch
	lastArrival time.Time    // of the latest change, for the adaptive quiet period
	pending     []run        // committed intents not yet accepted by the remote
	coalesceAt  pendingBound // pending past this is coalesced
	built       build
	waiters     []chan error
	batchTimer  *time.Timer
	retryTimer  *time.Timer
	retrying    bool // a retry is scheduled: new batches wait for it
	pushWanted  bool // a batch was flushed since the last push
	failures    int
	heldBack    bool // a push waits for the lease's late renewal (said once per wait)
	// With a head branch (remote.Head) only.
	headTip       plumbing.Hash // the remote head branch, zero when it does not exist
	headDue       bool          // look at the branches even with nothing pending
	deliverWanted bool          // the request may not describe the head branch yet
	emptySince    time.Time     // when the target was first seen to hold all of an open request (mergeGrace)
	headDeletedAt time.Time     // when the worker last deleted its head branch (recreatedWatch)
	renew         renewal
	adopted       map[string]*adoptedFolder // the index of each adopted folder, made on its first change
	overlays      map[string]*overlayState  // the render of each overlay a destination points at, by its folder
	unrenderable  map[placement.Key]string  // while a run is resolved again: the edits its render refused
	runs          uint64                    // the runs resolved so far, numbering them for the indexes
	lastRead      struct {                  // the file Document read last, which its next call likely reads again
		hash plumbing.Hash
		data []byte
	}

	mu     sync.Mutex
	status WorkerStatus
}

// NewWorker creates a worker; nothing happens until Run.
func NewWorker(cfg WorkerConfig) *Worker {
	id := cfg.Identity
	id.Bot, id.Committer = id.Bot.Clean(), id.Committer.Clean()
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
	onStatus := cfg.OnStatus
	if onStatus == nil {
		onStatus = func() {}
	}
	return &Worker{
		remote:      cfg.Remote,
		dir:         filepath.Join(cfg.WorkDir, WorkerKey(cfg.Remote.URL, cfg.Remote.Lane())),
		limits:      cfg.Limits.withDefaults(),
		identity:    id,
		slots:       cfg.Slots,
		log:         log.With("repo", redactURL(cfg.Remote.URL), "branch", cfg.Remote.Branch),
		m:           newInstruments(cfg.Metrics, cfg.Remote),
		in:          newInbox(),
		done:        make(chan struct{}),
		retry:       defaultRetry,
		onStatus:    onStatus,
		fence:       cfg.Fence,
		signer:      cfg.Signer,
		delivery:    cfg.Delivery,
		ours:        cfg.Ours,
		requestPoll: cfg.RequestPoll,
		pusher:      newPusher(cfg.Remote),
		renew:       newRenewal(cfg.KeepCommits, cfg.RenewFloor),
		status:      WorkerStatus{URL: redactURL(cfg.Remote.URL), Branch: cfg.Remote.Branch, Head: cfg.Remote.Head},
	}
}

// Run opens (or clones) the repository and processes intents until ctx ends; then it commits
// and pushes what it holds, bounded by a short deadline, and returns.
func (w *Worker) Run(ctx context.Context) error {
	defer close(w.done)
	rp, err := gitstore.Open(w.dir, w.remote.clone(), w.renew.keep, w.log)
	if err != nil {
		w.in.close()
		w.setFailing(err)
		return err
	}
	defer rp.Close()
	w.repo, w.store = rp, rp.Store()
	defer w.stopRenewal()
	if w.base, err = rp.Tip(); err != nil {
		w.in.close()
		return err
	}
	w.batchTimer, w.retryTimer = stoppedTimer(), stoppedTimer()
	defer w.batchTimer.Stop()
	defer w.retryTimer.Stop()
	w.needFetch = true
	var poll <-chan time.Time // nil without a head branch: never ready
	if w.remote.Head != "" {
		if w.headTip, err = rp.HeadTip(); err != nil {
			w.in.close()
			return err
		}
		ticker := time.NewTicker(cmp.Or(w.requestPoll, DefaultRequestPoll))
		defer ticker.Stop()
		poll, w.headDue, w.deliverWanted = ticker.C, true, true
	}
	w.fetch(ctx)
	for {
		select {
		case <-ctx.Done():
			return w.shutdown(ctx)
		case <-poll:
			w.headDue, w.pushWanted = true, true
		case <-w.in.wake:
			items, controls := w.in.take()
			w.absorb(ctx, items, controls)
		case <-w.batchTimer.C:
			w.onBatchDeadline()
		case <-w.retryTimer.C:
			w.onRetry(ctx)
		case err := <-w.renew.done:
			w.onRenewed(ctx, err)
		}
		if w.pushWanted && !w.retrying {
			w.takeAll(ctx)
			w.pushWanted = false
			w.push(ctx)
			w.maybeRenew(ctx)
		}
		w.report()
	}
}

// absorb moves what was taken from the inbox into the batch, then answers the controls.
func (w *Worker) absorb(ctx context.Context, items []item, controls []control) {
	for _, it := range items {
		w.add(it)
	}
	for _, c := range controls {
		switch {
		case c.flush != nil:
			w.waiters = append(w.waiters, c.flush)
			w.flushBatch()
		case c.fetch != nil:
			c.fetch <- w.fetch(ctx)
		case c.run != nil:
			c.run(ctx)
		case c.auth != nil:
			w.repo.SetAuth(c.auth.auth)
			w.pusher.setAuth(c.auth.auth)
			if w.retrying { // the failure may have been the old credentials: try again now
				w.retryTimer.Stop()
				w.retrying, w.pushWanted = false, true
			}
		}
	}
}

// takeAll joins to the push about to start what waits: in the inbox (what arrived during the
// last push) and in the batch. A push costs the remote about as much for a few files as for
// thousands (it checks the whole folder's tree), so what is already here does not follow alone:
// after a long push both the batch's deadline and the inbox are ready, and select picks either.
func (w *Worker) takeAll(ctx context.Context) {
	select {
	case <-w.in.wake:
		items, controls := w.in.take()
		w.absorb(ctx, items, controls)
	default:
	}
	if !w.batch.empty() {
		w.flushBatch()
	}
}

// fetch brings the clone up to date with the remote branch. When it fails and nothing is
// pending, a retry fetches again, so the status recovers even without new changes.
func (w *Worker) fetch(ctx context.Context) FetchResult {
	tip, err := w.fetchTips(ctx)
	if err != nil {
		w.log.Warn("fetch failed; retrying", "err", err)
		w.setFailing(err)
		w.needFetch = true
		if len(w.pending) == 0 && !w.retrying {
			_ = w.scheduleRetry()
		}
		return FetchResult{Err: err}
	}
	w.base, w.needFetch, w.failures = tip, false, 0
	w.setStatus(func(s *WorkerStatus) { s.LastFetched = hashString(tip) })
	if len(w.pending) == 0 {
		w.setOK("", Signature{})
	}
	return FetchResult{Tip: hashString(tip)}
}

// fetchTips fetches the branch, or with a head branch both; a move of either asks the worker
// to look at the head branch (rebuild it, or delete it once merged) at the next push.
func (w *Worker) fetchTips(ctx context.Context) (plumbing.Hash, error) {
	if w.remote.Head == "" {
		return w.repo.Fetch(ctx)
	}
	target, head, err := w.repo.FetchRefs(ctx)
	if err != nil {
		return plumbing.ZeroHash, err
	}
	if target != w.base || head != w.headTip {
		w.headDue, w.pushWanted = true, true
	}
	w.headTip = head
	return target, nil
}

// add puts one intent into the batch. The quiet period adapts to the traffic: a change after a
// quiet spell is committed almost at once, while changes that keep coming are batched.
func (w *Worker) add(it item) {
	now := time.Now()
	at := it.at
	if at.IsZero() || at.After(now) {
		at = now
	}
	w.batch.add(it, at, at.Add(w.quietAfter(at)))
	if w.batch.full(w.limits) {
		w.flushBatch()
		return
	}
	w.batchTimer.Reset(w.batch.deadline(w.limits).Sub(now))
}

// quietAfter is how long to wait for more changes after one that arrived at (see BatchLimits).
func (w *Worker) quietAfter(at time.Time) time.Duration {
	short := w.limits.IdleQuiet
	gap := at.Sub(w.lastArrival)
	first := w.lastArrival.IsZero()
	w.lastArrival = at
	if first || gap >= w.limits.Quiet {
		return short
	}
	return min(max(2*gap, short), w.limits.Quiet)
}

// onBatchDeadline commits the batch when its deadline passed; a change that arrived since the
// timer was set moved the deadline, so the timer is set again instead.
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

// flushBatch turns the batch into pending runs, to be pushed once the inbox is taken.
func (w *Worker) flushBatch() {
	w.batchTimer.Stop()
	if !w.batch.empty() {
		if len(w.pending) == 0 {
			w.coalesceAt = pendingBound{maxPendingItems, maxPendingBytes}
		}
		w.pending = append(w.pending, w.batch.take(w.identity.Bot)...)
		if n, b := pendingSize(w.pending); n > w.coalesceAt.items || b > w.coalesceAt.bytes {
			lost := creditsAt(w.pending, w.identity.Bot)
			w.pending = coalesce(w.pending, w.identity.Bot)
			w.built.valid = false
			if lost {
				w.noteCoalesced("unpushed")
			}
			// What coalescing could not shrink (a seed writes each path once) is merged again only
			// once it doubled, so that a seed that outruns the remote is not copied at every batch.
			n, b = pendingSize(w.pending)
			w.coalesceAt = pendingBound{max(maxPendingItems, 2*n), max(maxPendingBytes, 2*b)}
		}
	}
	w.pushWanted = true
}

// noteCoalesced reports that a bound was reached and which changes (waiting in the inbox, or
// committed and unpushed) were merged per file, losing their attribution. It is counted, logged
// and the owner is told. Safe from any goroutine.
func (w *Worker) noteCoalesced(which string) {
	w.m.coalesced()
	var times int
	w.setStatus(func(s *WorkerStatus) { s.Coalesced++; times = s.Coalesced })
	w.log.Warn("the remote is not keeping up: "+which+" changes were merged per file and are credited to the bot", "times", times)
	w.onStatus()
}

// report publishes the queue depth and pending count.
func (w *Worker) report() {
	n, _ := pendingSize(w.pending)
	n += len(w.batch.items)
	w.m.queue(n + w.in.depth())
	w.setStatus(func(s *WorkerStatus) { s.Pending = n })
}

func (w *Worker) setStatus(f func(*WorkerStatus)) {
	w.mu.Lock()
	defer w.mu.Unlock()
	f(&w.status)
}

// setFailing records err; the owner is told when the worker starts failing.
func (w *Worker) setFailing(err error) {
	var flipped bool
	w.setStatus(func(s *WorkerStatus) {
		flipped = s.LastError == nil
		s.LastError = err
		s.Failures++
		if flipped {
			s.FailingSince = time.Now()
		}
	})
	if flipped {
		w.onStatus()
	}
}

// setOK records a push that landed (tip, whose commit author wrote) or a fetch that worked
// (""); the owner is told when the worker stops failing.
func (w *Worker) setOK(tip string, author Signature) {
	var flipped bool
	w.setStatus(func(s *WorkerStatus) {
		flipped = s.LastError != nil
		s.LastError, s.FailingSince, s.Failures = nil, time.Time{}, 0
		if tip != "" {
			s.LastPushed, s.LastPushTime, s.LastPushedAuthor = tip, time.Now(), author
		}
	})
	if flipped {
		w.onStatus()
	}
}

// shutdown takes what is already queued and makes a last, bounded attempt to push it.
func (w *Worker) shutdown(runCtx context.Context) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(runCtx), shutdownTimeout)
	defer cancel()
	items, controls := w.in.close()
	w.absorb(ctx, items, controls)
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

// WorkerKey is a stable short hash of a repository and branch, used as the clone's folder name.
func WorkerKey(repoURL, branch string) string {
	sum := sha256.Sum256([]byte(repoURL + "\x00" + branch))
	return hex.EncodeToString(sum[:8])
}
