package gitops

import (
	"context"
	"time"
)

// Delivery keeps one pull request open from a worker's head branch into its target, through a
// Git host's API (package pullrequest). The worker calls it on its goroutine, with a bounded
// context, only after asking its Fence, and never twice at once.
type Delivery interface {
	// Deliver opens the request for head, or updates the open one so that it describes head,
	// and returns it. It makes no write when the request already says what head would.
	Deliver(ctx context.Context, head Head) (Request, error)
	// Withdraw is told that the head branch holds nothing its target lacks and was deleted:
	// an open request is closed, a merged one stays merged.
	Withdraw(ctx context.Context, head Head) (Request, error)
	// Check returns the request as the host has it now, to learn whether it was merged and at
	// which head commit; a zero Request when none is known.
	Check(ctx context.Context, head Head) (Request, error)
}

// Head is what a head branch holds that its target lacks: the commits, oldest first, and the
// files they change.
type Head struct {
	Branch, Target string
	Commit         string // the head branch's tip
	Commits        []HeadCommit
	Files          []HeadFile // sorted by Path
}

// HeadCommit is one commit of a head branch.
type HeadCommit struct {
	Hash    string
	Author  Signature
	When    time.Time // author time
	Subject string
}

// HeadFile is one file a head branch changes, against its target.
type HeadFile struct {
	Path    string
	Deleted bool
	Added   bool // not in the target
}

// States of a Request.
const (
	RequestOpen   = "open"
	RequestMerged = "merged"
	RequestClosed = "closed"
)

// Request is a pull (merge) request as its host says it is.
type Request struct {
	Number     int64
	URL        string // its web page
	State      string // RequestOpen, RequestMerged or RequestClosed
	HeadCommit string // the head commit it shows (for a merged one: the commit merged)
	OpenedAt   time.Time
	// Event says what the call did, for the owner's Events and logs: "opened", "updated",
	// "closed", or "" for nothing.
	Event string
	// Warnings are what the call could not do but did not fail for (a label the repository
	// lacks, a draft its plan does not offer); the worker logs them.
	Warnings []string
}

// RetryAfterError is implemented by a Delivery error that says when to try again (a rate limit).
type RetryAfterError interface {
	error
	RetryAfterDelay() time.Duration
}

// failedDelivery fails every call with the reason its Delivery could not be built.
type failedDelivery struct{ err error }

func (f failedDelivery) Deliver(context.Context, Head) (Request, error)  { return Request{}, f.err }
func (f failedDelivery) Withdraw(context.Context, Head) (Request, error) { return Request{}, f.err }
func (f failedDelivery) Check(context.Context, Head) (Request, error)    { return Request{}, f.err }
