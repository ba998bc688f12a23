// Package pullrequest delivers the mirror's changes to a protected branch as one pull/merge
// request per destination: the daemon (package gitops) pushes to a head branch it owns, and this
// package keeps exactly one request open from that head branch into the target branch on the
// Git host. It owns only the host side, the hosts' REST APIs behind one small interface (Host),
// with one file per host: Gitea (and Forgejo, which speaks the same API), GitHub and GitLab,
// each through its maintained Go client. Every API failure comes back as an *Error that names a
// condition reason and tells the user what to do; Describe renders the request's title and body
// from a Summary of the waiting changes, byte for byte the same for the same summary. SetStatus
// marks a commit on the host with a commit status (see status.go).
package pullrequest

import (
	"context"
	"time"
)

// States of a Request.
const (
	StateOpen   = "open"
	StateMerged = "merged"
	StateClosed = "closed" // closed without being merged
)

// Host is one Git host's API for the requests of one repository. Implementations are safe for
// concurrent use. Every error a method returns is an *Error.
type Host interface {
	// Find returns the open request whose head branch is head and whose base branch is base,
	// both in this repository, or nil when there is none. It pages through every open request
	// (filtering server-side where the API can), so a match on any page is found.
	Find(ctx context.Context, head, base string) (*Request, error)
	// Open opens a request. When the host answers that one already exists for the head
	// branch, Open returns the existing one (found with Find), never a second request.
	Open(ctx context.Context, r NewRequest) (*Request, error)
	// Update sets the title and body of request number and returns the request as the host
	// now has it: its State tells one that was merged or closed meanwhile. Gitea and GitLab
	// mark drafts by a title prefix, so there Update reads the request first, keeps the prefix
	// on a draft, and leaves a request that is no longer open unchanged.
	Update(ctx context.Context, number int64, title, body string) (*Request, error)
	// Get returns request number.
	Get(ctx context.Context, number int64) (*Request, error)
	// Close closes an open request without merging it.
	Close(ctx context.Context, number int64) error
	// SetStatus sets a status on commit sha of this repository: state is StatusPending,
	// StatusSuccess or StatusFailure; context names it (several statuses of other contexts may sit
	// on the same commit; a later one of the same context replaces it); description is shown beside
	// it (cut to MaxStatusDescription characters: keep it short); targetURL is where it links (""
	// for none). GitLab refuses a pending status on a pending one; SetStatus takes that as done,
	// and the first one's description stays.
	SetStatus(ctx context.Context, sha string, s Status) error
}

// NewRequest is what Open asks for.
type NewRequest struct {
	Head, Base  string // branch names in this repository
	Title, Body string
	// Labels are label names. GitHub and GitLab take names (and create a label that does not
	// exist yet); Gitea takes IDs, so there a name the repository has no label for is skipped
	// and reported in Request.Warnings.
	Labels []string
	// Draft opens the request as a draft: GitHub's draft flag (or a ready request, with a
	// warning, where the repository's plan has no drafts), a "Draft: " title prefix on GitLab,
	// and a "WIP: " title prefix on Gitea (its default WORK_IN_PROGRESS_PREFIXES).
	Draft bool
}

// Request is a pull/merge request as the host has it.
type Request struct {
	Number     int64  // the number users see: GitHub/Gitea's number, GitLab's IID
	URL        string // the web page
	State      string // StateOpen, StateMerged or StateClosed
	Draft      bool
	Head, Base string // branch names
	HeadCommit string // the commit the head branch pointed at when the host last looked
	Title      string
	Body       string
	OpenedAt   time.Time
	// Warnings are what Open could not do but did not fail for: labels that do not exist on
	// Gitea, labels GitHub refused, a draft GitHub's plan does not allow. Only Open sets them.
	Warnings []string
}

// Operations, as Error.Op and as the op given to Settings.OnCall.
const (
	OpFind   = "find"
	OpOpen   = "open"
	OpUpdate = "update"
	OpGet    = "get"
	OpClose  = "close"
	OpLabels = "labels" // Gitea's label lookup and GitHub's labelling after Open
	OpStatus = "status" // SetStatus
)
