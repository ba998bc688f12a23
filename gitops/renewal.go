package gitops

import (
	"cmp"
	"context"

	"github.com/configbutler/gitops-reverser/gitstore"
)

// A clone keeps every object each push adds to it, so the worker renews it (see
// gitstore.KeptCommits for what a renewed clone keeps, and why). Once the clone has doubled since
// it was last made, and is past renewFloor, a shallow clone of the newest commits of the branch
// is fetched beside it in the background, and swapped in between two pushes, which go on
// meanwhile.

// renewFloor: a clone smaller than this is never renewed.
const renewFloor = 256 << 20

// renewal is the state of a worker's renewals of its clone; owned by the Run goroutine.
type renewal struct {
	keep    int   // commits a renewed clone keeps: gitstore.KeptCommits
	floor   int64 // renewFloor
	at      int64 // the clone's size that starts the next renewal
	running bool
	done    chan error // the background fetch's result
}

func newRenewal(keep int, floor int64) renewal {
	keep, floor = cmp.Or(keep, gitstore.KeptCommits), cmp.Or(floor, renewFloor)
	return renewal{keep: keep, floor: floor, at: floor, done: make(chan error, 1)}
}

// maybeRenew starts a renewal in the background when the clone reached its size for one.
func (w *Worker) maybeRenew(ctx context.Context) {
	if w.renew.running {
		return
	}
	size, err := w.repo.Size()
	if err != nil {
		w.log.Warn("measure the clone", "err", err)
		return
	}
	if size < w.renew.at {
		return
	}
	w.renew.running = true
	renew := w.repo.Renewal()
	w.log.Info("renewing the clone", "bytes", size, "commits", w.renew.keep)
	go func() { w.renew.done <- renew(ctx) }()
}

// onRenewed swaps the renewed clone in, then fetches what was pushed while it was made. The
// commits built and not pushed are built again on it. A renewal that failed leaves the clone as
// it is until it doubles again.
func (w *Worker) onRenewed(ctx context.Context, err error) {
	w.renew.running = false
	before, _ := w.repo.Size()
	if err == nil {
		err = w.repo.Swap()
		w.built = build{} // on a new store, whatever happened
	}
	if err != nil {
		w.repo.DropRenewal()
		w.renew.at = max(w.renew.floor, 2*before)
		w.log.Warn("renew the clone; keeping it as it is", "err", err)
		return
	}
	w.fetch(ctx)
	after, _ := w.repo.Size()
	w.renew.at = max(w.renew.floor, 2*after)
	w.log.Info("renewed the clone", "before", before, "after", after, "commits", w.renew.keep)
}

// stopRenewal waits for a renewal under way (its fetch ends with ctx) and removes what it left.
func (w *Worker) stopRenewal() {
	if w.renew.running {
		if err := <-w.renew.done; err != nil {
			w.log.Debug("renewal stopped with the worker", "err", err)
		}
		w.renew.running = false
	}
	w.repo.DropRenewal()
}
