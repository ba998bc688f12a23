package gitops

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/go-git/go-git/v5/plumbing"

	"github.com/configbutler/gitops-reverser/gitstore"
)

// retryPolicy is the exponential backoff between failed pushes.
type retryPolicy struct {
	min, max   time.Duration
	maxReplays int // rejections replayed at once before backing off
}

var defaultRetry = retryPolicy{min: 500 * time.Millisecond, max: 30 * time.Second, maxReplays: 5}

// pushAttemptTimeout bounds one push (fetches and replays included), so a remote that accepts a
// connection and then never answers is retried instead of holding the worker forever.
const pushAttemptTimeout = 5 * time.Minute

// delay is the wait after the n-th consecutive failure (n ≥ 1), with ±20% jitter so workers
// that failed together do not retry together.
func (p retryPolicy) delay(n int) time.Duration {
	d := p.min
	for i := 1; i < n && d < p.max; i++ {
		d *= 2
	}
	d = min(d, p.max)
	return time.Duration(float64(d) * (0.8 + 0.4*rand.Float64())) //nolint:gosec // jitter
}

// build is the chain of commits made from the pending runs on top of base.
type build struct {
	valid     bool
	base, tip plumbing.Hash
	runs      int // pending runs already turned into commits
	stats     buildStats
	author    Signature // of the newest commit built
}

// push commits the pending runs and pushes them, holding a slot. A failure schedules a retry,
// which happens even if no new change arrives; until then new batches only join the pending
// runs.
func (w *Worker) push(ctx context.Context) {
	if w.retrying {
		return
	}
	if len(w.pending) == 0 && !w.headDue {
		w.notify(nil)
		return
	}
	if w.heldBack && w.holdBack(w.fenceErr()) {
		return // still late: the commits are built once the fence allows, not at every look
	}
	release, err := w.slots.acquire(ctx, w.remote.URL)
	if err != nil {
		return // ctx ended; shutdown makes the last attempt
	}
	w.m.active(1)
	attempt, cancel := context.WithTimeout(ctx, pushAttemptTimeout)
	err = w.pushPending(attempt)
	cancel()
	w.m.active(-1)
	release()
	if err == nil {
		w.failures, w.headDue, w.heldBack = 0, false, false
		w.notify(nil)
		return
	}
	if errors.Is(err, ErrFenced) && w.holdBack(err) {
		return
	}
	w.heldBack = false
	if errors.Is(err, ErrFenced) {
		w.dropFenced(err)
		return
	}
	if !errors.Is(err, errRemoteMoved) {
		w.m.pushFailure()
	}
	wait := w.scheduleRetry()
	if asked := retryAfter(err, wait); asked != wait {
		wait = asked
		w.retryTimer.Reset(wait)
	}
	w.log.Warn("push failed, retrying", "err", err, "failures", w.failures, "retry_in", wait)
	w.setFailing(err)
}

// retryAfter is how long to wait after err: the backoff, or longer when err is a host's answer
// that says when to come back (a rate limit).
func retryAfter(err error, backoff time.Duration) time.Duration {
	var later RetryAfterError
	if errors.As(err, &later) && later.RetryAfterDelay() > backoff {
		return later.RetryAfterDelay()
	}
	return backoff
}

// scheduleRetry counts a failure and arms the retry timer with its backoff.
func (w *Worker) scheduleRetry() time.Duration {
	w.failures++
	wait := w.retry.delay(w.failures)
	w.retrying = true
	w.retryTimer.Reset(wait)
	return wait
}

// onRetry runs when a backoff has passed: push what is pending, or, with nothing pending after
// a failed fetch, fetch again so the status recovers without waiting for a change.
func (w *Worker) onRetry(ctx context.Context) {
	w.retrying = false
	if len(w.pending) == 0 && w.needFetch {
		w.fetch(ctx)
		return
	}
	w.pushWanted = true
}

// pushPending fetches when needed, builds commits and sends them; a rejection because the
// remote moved is answered by fetching and replaying the intents on the new tip.
func (w *Worker) pushPending(ctx context.Context) error {
	if w.remote.Head != "" {
		return w.pushHead(ctx)
	}
	for replays := 0; ; replays++ {
		if w.needFetch {
			tip, err := w.repo.Fetch(ctx)
			if err != nil {
				return err
			}
			w.base, w.needFetch = tip, false
		}
		if err := w.buildPending(); err != nil {
			return err
		}
		if w.built.tip == w.base {
			w.pending, w.built = nil, build{}
			return nil // nothing changes the tree
		}
		var pack gitstore.Pack
		err := w.sendRef(ctx, w.pusher.branch, w.base, w.built.tip, w.encoder(&pack))
		if err == nil {
			w.landed(pack)
			return nil
		}
		if !errors.Is(err, errRemoteMoved) {
			return err
		}
		w.m.rebaseRetry()
		w.needFetch = true
		w.log.Debug("remote moved, replaying on the new tip", "err", err)
		if replays >= w.retry.maxReplays {
			return err
		}
	}
}

// fenced asks the fence whether this replica may still write, and returns ctx cut off when the
// fence's time is up.
func (w *Worker) fenced(ctx context.Context) (context.Context, context.CancelFunc, error) {
	if w.fence == nil {
		return ctx, func() {}, nil
	}
	until, err := w.fence()
	if err != nil {
		return ctx, func() {}, fmt.Errorf("%w: %w", ErrFenced, err)
	}
	ctx, cancel := context.WithDeadline(ctx, until)
	return ctx, cancel, nil
}

// holdBack holds the pending push back for fenceRecheck when err, the fence's refusal, says the
// lease may still be this replica's (see Fence), and says whether it did.
func (w *Worker) holdBack(err error) bool {
	if !leaseUnsure(err) {
		return false
	}
	w.retrying = true
	w.retryTimer.Reset(fenceRecheck)
	if !w.heldBack {
		w.log.Info("push held back until the lease is renewed", "err", err)
	}
	w.heldBack = true
	return true
}

// fenceErr is the fence's refusal now, nil when it allows or there is none.
func (w *Worker) fenceErr() error {
	if w.fence == nil {
		return nil
	}
	_, err := w.fence()
	return err
}

// fenceRecheck is how soon a push held back by a late lease renewal asks the fence again.
const fenceRecheck = 250 * time.Millisecond

// leaseUnsure says whether the fence refused because the lease's renewal is late, not because
// the lease is gone (see Fence).
func leaseUnsure(err error) bool {
	var t interface{ Temporary() bool }
	return errors.As(err, &t) && t.Temporary()
}

// dropFenced forgets the commits the fence refused: the replica that holds the lease now writes
// the same changes from the cluster, the source of truth. The next push, should this replica hold
// it again, starts from a fetch.
func (w *Worker) dropFenced(err error) {
	runs := len(w.pending)
	w.m.fenced()
	w.pending, w.built = nil, build{}
	w.store.DropOverlay()
	w.needFetch = true
	w.log.Warn("push dropped: this replica no longer holds the lease of this branch; the replica that does writes these changes", "runs", runs, "err", err)
	w.notify(err)
}

// buildPending extends the commit chain with the runs not built yet on the remote tip.
func (w *Worker) buildPending() error { return w.buildOn(w.base) }

// buildOn extends the commit chain with the runs not built yet, starting over on start when the
// chain was built on another commit.
func (w *Worker) buildOn(start plumbing.Hash) error {
	if !w.built.valid || w.built.base != start {
		w.store.DropOverlay()
		w.built = build{valid: true, base: start, tip: start}
	}
	w.pending = append(w.pending[:w.built.runs], joinBotRuns(w.pending[w.built.runs:], w.identity.Bot)...)
	for w.built.runs < len(w.pending) {
		r := w.pending[w.built.runs]
		tip, err := w.commitRun(w.built.tip, r, &w.built.stats)
		if err != nil {
			w.built.valid = false
			w.needFetch = true // a missing object is repaired by fetching
			return err
		}
		if tip != w.built.tip { // a run that changes nothing makes no commit
			w.built.author = cmp.Or(r.author, w.identity.Bot)
		}
		w.built.tip = tip
		w.built.runs++
	}
	return nil
}

// landed records a push the remote accepted: the objects join the clone as one pack.
func (w *Worker) landed(pack gitstore.Pack) {
	tip, stats, author := w.built.tip, w.built.stats, w.built.author
	w.m.landed(stats)
	w.pending, w.built, w.base = nil, build{}, tip
	err := w.repo.KeepPushed(pack)
	w.store.DropOverlay()
	if err != nil {
		w.log.Error("keep pushed objects in the clone", "err", err)
		w.needFetch = true
	} else if err := w.repo.SetTip(tip); err != nil {
		w.log.Error("record pushed tip", "err", err)
		w.needFetch = true
	} else if err := w.repo.Compact(); err != nil {
		w.log.Warn("compact clone", "err", err) // lookups get slower, nothing is lost
	}
	w.log.Info("pushed", "tip", tip.String(), "commits", stats.commits, "written", stats.written, "deleted", stats.deleted)
	w.setOK(tip.String(), author)
}
