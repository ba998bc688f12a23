// Package gitops owns the Git side of the mirror: one worker per (repository, branch) keeps a
// bare clone (package gitstore, the object store below it), turns batches of file-level changes
// into commits built directly from objects (blob → tree → commit → ref, never a work tree), signs
// them, and pushes them fast-forward only, replaying the pending changes on the new tip when
// another writer moved the branch. The Pool owns the workers and keeps the mirror off the files
// held for write-back's review. It is Git only: it is handed parsed credentials and Signers
// (package gitsecrets reads them from Secrets and checks that the remotes answer), the path of an
// object's file is package layout's, and write-back reads history through Reader (package
// gitedits).
package gitops

import (
	"errors"
	"log/slog"
	"time"

	"github.com/go-git/go-git/v5/plumbing/transport"

	"github.com/configbutler/gitops-reverser/gitstore"
	"github.com/configbutler/gitops-reverser/metrics"
)

// Signature names a person or the daemon in a commit.
type Signature struct{ Name, Email string }

// IsZero reports whether the signature names nobody.
func (s Signature) IsZero() bool { return s.Name == "" && s.Email == "" }

// Credit is who a change is committed as and the trailers its commit carries. It is the one
// answer to "whose change is this": the admission webhook and write-back give it, the watch
// passes it on in the Change, and the worker writes it into the commit as it is, only cleaned
// (Signature.Clean) so that it is a valid Git ident.
type Credit struct {
	Author Signature // zero, or nothing left once cleaned = the bot identity
	// Trailers are appended after the identity's trailers in the message of the commit that
	// holds the change; changes with different trailers never share a commit.
	Trailers [][2]string
}

// credited is who a commit of the credit names as its author: the author, cleaned (see
// Signature.Clean), or bot when that names nobody.
func (c Credit) credited(bot Signature) Signature {
	if a := c.Author.Clean(); !a.IsZero() {
		return a
	}
	return bot
}

// MaxFileBytes caps one file the mirror writes. etcd keeps objects under ~1.5 MiB of JSON, whose
// canonical YAML stays below this; an object whose YAML would still exceed it is reported and
// not written, so one object can neither bloat the history for good nor the daemon's memory.
const MaxFileBytes = 2 << 20

// Change is one file-level intent: write Content at Path, or delete Path when Content is nil.
type Change struct {
	Path    string
	Content []byte // nil = delete
	Credit
	Summary string // e.g. "update configmaps/default/web", used in commit messages
	// Keep, when set, is asked about the file the tree holds at Path when its bytes differ from
	// Content: true keeps it, as it already says the same (an encrypted document of the same
	// plaintext: encryption is randomised, so equal bytes cannot tell).
	Keep func(current []byte) bool
	// Adopt, when set, makes this a change to an object of an adopted folder: the worker finds
	// and edits its document (Content is then nil and Path the object's canonical path).
	Adopt *Adoption
}

// Sync declares the complete set of live paths under some scopes: every *.yaml file below a
// scope that is not live is an orphan and is deleted in the next batch.
type Sync struct {
	Scopes []string // path prefixes ending in "/"; a "*" segment matches any one folder
	Live   map[string]struct{}
	// Adopted, when set, declares the live objects of one kind of an adopted folder instead:
	// Scopes and Live are then empty, and no file is an orphan.
	Adopted *AdoptedLive
}

// BatchLimits decide when a batch becomes commits: at MaxFiles changes, MaxBytes of content,
// MaxWait after the first change (the bound under constant churn) or after a quiet period
// without a new change, whichever comes first. The quiet period adapts: IdleQuiet after a
// change that follows a spell of at least Quiet without one (a lone change is pushed at once),
// else twice the gap between the last two changes, within [IdleQuiet, Quiet] (a stream stays in
// one batch). Zero fields take the defaults; IdleQuiet ≥ Quiet turns the adaptation off.
type BatchLimits struct {
	MaxFiles                  int
	MaxBytes                  int64
	MaxWait, Quiet, IdleQuiet time.Duration
}

// Default batch limits.
const (
	DefaultMaxFiles  = 200
	DefaultMaxBytes  = 1 << 20
	DefaultMaxWait   = 20 * time.Second
	DefaultQuiet     = 1500 * time.Millisecond
	DefaultIdleQuiet = 50 * time.Millisecond
)

func (l BatchLimits) withDefaults() BatchLimits {
	if l.MaxFiles <= 0 {
		l.MaxFiles = DefaultMaxFiles
	}
	if l.MaxBytes <= 0 {
		l.MaxBytes = DefaultMaxBytes
	}
	if l.MaxWait <= 0 {
		l.MaxWait = DefaultMaxWait
	}
	if l.Quiet <= 0 {
		l.Quiet = DefaultQuiet
	}
	if l.IdleQuiet <= 0 {
		l.IdleQuiet = DefaultIdleQuiet
	}
	l.IdleQuiet = min(l.IdleQuiet, l.Quiet)
	return l
}

// Identity is who the daemon is in Git: the committer of every commit, the author when a change
// has none, and the trailers appended to every commit message (ordered key, value pairs).
type Identity struct {
	Committer, Bot Signature
	Trailers       [][2]string
}

// Remote is the repository and branch a worker mirrors into.
type Remote struct {
	URL, Branch string
	Auth        transport.AuthMethod // nil = none
	// Head, when set, is the branch the worker commits to instead of Branch, which it never
	// pushes to: the head of the one pull request that delivers its changes into Branch (see
	// Delivery). The daemon owns it, and it is the one branch ever force-pushed, when Branch
	// moved and the head is rebuilt on it.
	Head string
}

// Lane is the branch the worker pushes to, which names it in the pool: Head when set, else
// Branch.
func (r Remote) Lane() string {
	if r.Head != "" {
		return r.Head
	}
	return r.Branch
}

// clone is the remote as the worker's clone follows it.
func (r Remote) clone() gitstore.Remote {
	return gitstore.Remote{URL: r.URL, Branch: r.Branch, Head: r.Head, Auth: r.Auth}
}

// WorkerConfig is everything a Worker needs. Slots, Metrics, Log and OnStatus may be nil.
type WorkerConfig struct {
	Remote   Remote
	WorkDir  string // the clone lives in WorkDir/WorkerKey(URL, Branch)
	Limits   BatchLimits
	Identity Identity
	Slots    *Slots
	Metrics  *metrics.Mirror
	Log      *slog.Logger
	// OnStatus is called from the worker's goroutine when it starts or stops failing, or when
	// a bound made it coalesce waiting changes. It must not block; Status tells the rest.
	OnStatus func()
	// Fence, when set, is asked just before every push whether this replica may still push; see
	// PoolConfig.Fences.
	Fence Fence
	// Signer signs every commit; nil means unsigned.
	Signer Signer
	// Delivery opens and updates the pull request of Remote.Head; it must be set when Head is.
	Delivery Delivery
	// Ours recognises the daemon's own commits by their message: a head branch holding another
	// commit is not rebuilt or deleted. Nil takes every commit for the daemon's.
	Ours func(message string) bool
	// RequestPoll is how often a worker with a head branch looks at the remote when nothing else
	// makes it; 0 is DefaultRequestPoll.
	RequestPoll time.Duration
	// KeepCommits is how many commits of history the clone keeps (0 is gitstore.KeptCommits),
	// and RenewFloor the size in bytes below which it is never renewed (0 is 256 MiB): see
	// gitstore.KeptCommits. Tests and benchmarks make them small.
	KeepCommits int
	RenewFloor  int64
}

// Fence says whether this replica may push now, and until when: a replica that lost its lease
// must never push again, because another replica leads and writes the same changes. A push that
// cannot prove it may is dropped with its commits (ErrFenced), and one still under way at until
// is cut off. An error with a Temporary method that returns true says the lease may still be this
// replica's (its renewal is late): the push is then held back and tried again, never dropped, as
// the replica would otherwise lose changes it still owns.
type Fence func() (until time.Time, err error)

// Fences gives the Fence of each branch of a repository: the one leader's for all of them, or
// the Lease of the branch's own shard.
type Fences func(url, branch string) Fence

// ErrFenced is why a push was dropped: the Fence refused it.
var ErrFenced = errors.New("push fenced: this replica does not hold the lease")

// WorkerStatus is a snapshot of a worker's progress.
type WorkerStatus struct {
	URL, Branch      string    // the remote (credentials removed) and branch
	LastPushed       string    // SHA of the last commit the remote accepted
	LastPushedAuthor Signature // who that commit names as its author
	LastPushTime     time.Time // when it was accepted
	LastFetched      string    // SHA of the remote tip at the last fetch
	LastError        error     // the last push or fetch error, nil once one works again
	FailingSince     time.Time // when LastError went from nil to an error
	Failures         int       // pushes and fetches that failed in a row since the last that worked
	Pending          int       // changes accepted but not yet pushed
	Coalesced        int       // times a bound merged waiting changes per file (their authors are lost)
	Head             string    // the head branch of the pull request that delivers (Remote.Head)
	Request          *Request  // the pull request, once one is known
	Waiting          int       // files the head branch changes that the target lacks
	// Adopted is what the worker knows of the adopted folders it writes, by folder.
	Adopted map[string]AdoptedStatus
}

// FetchResult is the remote tip after a fetch.
type FetchResult struct {
	Tip string // SHA of the branch, "" when the remote has no such branch yet
	Err error
}

// Sink takes a destination's file changes. Enqueue and Sync never block.
type Sink interface {
	Enqueue(c Change) error
	Sync(s Sync) error
}
