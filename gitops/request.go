package gitops

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/go-git/go-git/v5/plumbing"

	"github.com/configbutler/gitops-reverser/gitstore"
)

// DefaultRequestPoll is how often a worker that delivers by pull request looks at its branches
// when nothing else makes it: a merge, or a push to the target, is then acted on within this
// time. Each look lists the remote's references: one request when nothing moved.
const DefaultRequestPoll = time.Minute

// deliveryTimeout bounds one call of the Delivery.
const deliveryTimeout = time.Minute

// DeliveryError is a Delivery call that failed; the commits stay on the head branch and the
// call is retried.
type DeliveryError struct {
	Op  string // deliver, withdraw or check
	Err error
}

func (e *DeliveryError) Error() string { return "pull request: " + e.Op + ": " + e.Err.Error() }
func (e *DeliveryError) Unwrap() error { return e.Err }

// pushHead is pushPending for a worker that delivers by pull request: it looks at both
// branches, rebuilds the head branch on the target when the target moved, commits the pending
// runs on the head, pushes it, and has the request describe it; a head that holds nothing the
// target lacks is deleted and its request closed (a merged one stays merged). It never pushes
// to the target.
func (w *Worker) pushHead(ctx context.Context) error {
	for replays := 0; ; replays++ {
		err := w.pushHeadOnce(ctx)
		if err == nil {
			w.setOK("", Signature{}) // the remote and the host both answered
		}
		if !errors.Is(err, errRemoteMoved) || replays >= w.retry.maxReplays {
			return err
		}
		w.m.rebaseRetry()
		w.log.Debug("head branch moved, looking again", "err", err)
	}
}

func (w *Worker) pushHeadOnce(ctx context.Context) error {
	target, head, err := w.repo.FetchRefs(ctx)
	if err != nil {
		w.needFetch = true
		return err
	}
	if head != w.headTip || target != w.base && !head.IsZero() {
		w.deliverWanted = true // without a head branch, a move of the target asks nothing of the host
	}
	w.base, w.headTip, w.needFetch = target, head, false
	start, open, err := w.headStart(ctx)
	if err != nil {
		return err
	}
	if err := w.buildOn(start); err != nil {
		return err
	}
	tip := w.built.tip
	if tip != w.base || !open {
		w.emptySince = time.Time{}
	}
	switch {
	case tip == w.base && open && w.mergeUnderWay():
		w.pending, w.built = nil, build{} // the next poll looks again
		return nil
	case tip == w.base:
		return w.dropHead(ctx)
	case tip != w.headTip:
		var pack gitstore.Pack
		if err := w.sendRef(ctx, w.pusher.head, w.headTip, tip, w.encoder(&pack)); err != nil {
			return err
		}
		w.headLanded(tip, pack)
	default:
		w.pending, w.built = nil, build{}
	}
	if w.recreated() {
		req, err := w.callDelivery(ctx, "check", w.delivery.Check, Head{Branch: w.remote.Head, Target: w.remote.Branch})
		if err != nil {
			return err
		}
		w.deliverWanted = w.deliverWanted || req.State == RequestClosed
	}
	if w.deliverWanted {
		return w.deliver(ctx)
	}
	return nil
}

// recreatedWatch is how long after deleting its head branch a worker that made it again checks
// at each look that its new request is still open: a host may close the requests of a deleted
// branch a while after the deletion (Gitea does, from a queue), and so close the one just opened
// from the branch made again. One read per look, only then.
const recreatedWatch = 2 * time.Minute

// recreated says whether the head branch exists again within recreatedWatch of its deletion.
func (w *Worker) recreated() bool {
	return !w.headTip.IsZero() && !w.headDeletedAt.IsZero() && time.Since(w.headDeletedAt) < recreatedWatch
}

// mergeGrace is how long a head branch whose changes the target has while the host still says
// its request is open is left as it is: a merge moves the target a moment before the host marks
// the request merged, and closing it in that moment would close the request being merged.
const mergeGrace = 30 * time.Second

// mergeUnderWay says whether the target holding every change of an open request is still within
// mergeGrace of being first seen.
func (w *Worker) mergeUnderWay() bool {
	if w.emptySince.IsZero() {
		w.emptySince = time.Now()
		w.log.Info("the target holds every change of the head branch while its request is open: waiting for the host to tell a merge",
			"head", w.remote.Head, "grace", mergeGrace)
	}
	return time.Since(w.emptySince) < mergeGrace
}

// headStart is the commit the pending runs go on: the head branch, the target when there is
// none, or, when the target moved since the head was built, the head's own commits that are
// still not merged, made again on the new target. open says the target moved while the host
// still calls the request open.
func (w *Worker) headStart(ctx context.Context) (start plumbing.Hash, open bool, err error) {
	if w.headTip.IsZero() {
		return w.base, false, nil
	}
	chain, onto, err := w.headChain(w.headTip, w.base)
	if err != nil {
		return plumbing.ZeroHash, false, err
	}
	if onto == w.base && w.headTip != w.base { // built on the target as it is: nothing moved
		return w.headTip, false, nil
	}
	head, err := w.describe(chain, onto)
	if err != nil {
		return plumbing.ZeroHash, false, err
	}
	chain, open, err = w.unmerged(ctx, chain, head)
	if err != nil {
		return plumbing.ZeroHash, false, err
	}
	w.store.DropOverlay()
	if start, err = w.replay(w.base, chain); err != nil {
		w.built = build{}
		return plumbing.ZeroHash, false, err
	}
	w.built = build{valid: true, base: start, tip: start}
	if start != w.base {
		w.log.Info("the target moved: head branch rebuilt on it", "target", w.base, "commits", len(chain))
	}
	return start, open, nil
}

// unmerged drops from chain the commits of a request the host says was merged: a squash or a
// rebase merge leaves no trace of them in the target's history, and their files, changed since
// by someone, must not be made again. open says the host calls the request open.
func (w *Worker) unmerged(ctx context.Context, chain []commitInfo, head Head) (_ []commitInfo, open bool, err error) {
	req, err := w.callDelivery(ctx, "check", w.delivery.Check, head)
	if err != nil {
		return nil, false, err
	}
	if req.State != RequestMerged {
		return chain, req.State == RequestOpen, nil
	}
	for i, c := range chain {
		if c.hash.String() == req.HeadCommit {
			return chain[i+1:], false, nil
		}
	}
	return chain, false, nil
}

// dropHead deletes a head branch that holds nothing the target lacks, and withdraws its request.
func (w *Worker) dropHead(ctx context.Context) error {
	w.pending, w.built = nil, build{}
	w.store.DropOverlay()
	if !w.headTip.IsZero() {
		if err := w.sendRef(ctx, w.pusher.head, w.headTip, plumbing.ZeroHash, nil); err != nil {
			return err
		}
		w.log.Info("the target has every change of the head branch: head branch deleted", "head", w.remote.Head)
		w.headLanded(plumbing.ZeroHash, gitstore.Pack{})
		w.headDeletedAt = time.Now()
	}
	if !w.deliverWanted {
		return nil
	}
	gone := Head{Branch: w.remote.Head, Target: w.remote.Branch} // holds nothing now
	if _, err := w.callDelivery(ctx, "withdraw", w.delivery.Withdraw, gone); err != nil {
		return err
	}
	w.deliverWanted = false
	return nil
}

// deliver has the request describe the head branch.
func (w *Worker) deliver(ctx context.Context) error {
	head, err := w.headSummary()
	if err != nil {
		return err
	}
	if _, err := w.callDelivery(ctx, "deliver", w.delivery.Deliver, head); err != nil {
		return err
	}
	w.deliverWanted = false
	return nil
}

// callDelivery asks the fence, then calls the Delivery with head, what the head branch holds, and
// records the request it answers.
func (w *Worker) callDelivery(ctx context.Context, op string, call func(context.Context, Head) (Request, error), head Head) (Request, error) {
	ctx, cancel := context.WithTimeout(ctx, deliveryTimeout)
	defer cancel()
	ctx, cancelFence, err := w.fenced(ctx)
	defer cancelFence()
	if err != nil {
		return Request{}, err
	}
	req, err := call(ctx, head)
	if err != nil {
		return Request{}, &DeliveryError{Op: op, Err: err}
	}
	if req.Event != "" {
		w.log.Info("pull request "+req.Event, "number", req.Number, "url", req.URL, "state", req.State)
	}
	for _, warning := range req.Warnings {
		w.log.Warn("pull request: "+warning, "number", req.Number, "url", req.URL)
	}
	w.setStatus(func(s *WorkerStatus) {
		s.Request = &req
		if op != "check" { // a check looks at the request, not at what the head holds
			s.Waiting = len(head.Files)
		}
	})
	w.onStatus()
	return req, nil
}

// headSummary describes what the head branch holds that the target lacks.
func (w *Worker) headSummary() (Head, error) {
	if w.headTip.IsZero() {
		return Head{Branch: w.remote.Head, Target: w.remote.Branch}, nil
	}
	chain, onto, err := w.headChain(w.headTip, w.base)
	if err != nil {
		return Head{}, err
	}
	return w.describe(chain, onto)
}

// describe is the Head of the head branch's tip, whose own commits, built on onto, are chain.
func (w *Worker) describe(chain []commitInfo, onto plumbing.Hash) (Head, error) {
	h := Head{Branch: w.remote.Head, Target: w.remote.Branch, Commit: hashString(w.headTip)}
	for _, c := range chain {
		subject, _, _ := strings.Cut(c.message, "\n")
		h.Commits = append(h.Commits, HeadCommit{Hash: c.hash.String(), Author: c.author, When: c.when, Subject: subject})
	}
	var err error
	h.Files, err = w.filesBetween(onto, w.headTip)
	return h, err
}

// headFiles lists the files the head branch's own commits change: against the commit of the
// target they were built on, so a target that moved since does not count.
func (w *Worker) headFiles() ([]HeadFile, error) {
	if w.headTip.IsZero() {
		return nil, nil
	}
	_, onto, err := w.headChain(w.headTip, w.base)
	if err != nil {
		return nil, err
	}
	return w.filesBetween(onto, w.headTip)
}

// filesBetween lists the files that differ between the trees of two commits.
func (w *Worker) filesBetween(from, to plumbing.Hash) ([]HeadFile, error) {
	a, err := w.store.CommitTree(from)
	if err != nil {
		return nil, err
	}
	b, err := w.store.CommitTree(to)
	if err != nil {
		return nil, err
	}
	var files []HeadFile
	err = w.store.DiffFiles(a, b, "", func(path string, was, now *gitstore.TreeEntry) {
		files = append(files, HeadFile{Path: path, Deleted: now == nil, Added: was == nil})
	})
	return files, err
}

// sendRef asks the fence, then moves the remote reference ref from old to tip, sending the pack
// encode makes (nil: none).
func (w *Worker) sendRef(ctx context.Context, ref plumbing.ReferenceName, old, tip plumbing.Hash, encode packFunc) error {
	ctx, cancel, err := w.fenced(ctx)
	defer cancel()
	if err != nil {
		return err
	}
	return w.pusher.updateRef(ctx, ref, old, tip, encode)
}

// encoder encodes the commits built for a push into *pack, thin or not as the remote takes them.
func (w *Worker) encoder(pack *gitstore.Pack) packFunc {
	return func(thin bool) ([]byte, error) {
		var err error
		*pack, err = w.store.Pack(thin)
		return pack.Bytes(), err
	}
}

// headLanded records a head branch the remote accepted (zero: deleted).
func (w *Worker) headLanded(tip plumbing.Hash, pack gitstore.Pack) {
	stats, author := w.built.stats, w.built.author
	w.m.landed(stats)
	w.pending, w.built, w.headTip = nil, build{}, tip
	w.deliverWanted = true
	var err error
	if pack.Bytes() != nil {
		err = w.repo.KeepPushed(pack)
	}
	w.store.DropOverlay()
	if err == nil {
		err = w.repo.SetHeadTip(tip)
	}
	if err != nil {
		w.log.Error("record the pushed head branch", "err", err)
		w.needFetch = true
	} else if err := w.repo.Compact(); err != nil {
		w.log.Warn("compact clone", "err", err)
	}
	if !tip.IsZero() {
		w.log.Info("pushed the head branch", "head", w.remote.Head, "tip", tip.String(), "commits", stats.commits)
		w.setOK(tip.String(), author)
	}
}
