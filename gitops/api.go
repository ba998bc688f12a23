// Package gitops owns the Git side of the mirror: one worker per (repository, branch) keeps a
// bare clone, turns batches of file-level changes into commits built directly from objects
// (blob → tree → commit → ref, never a work tree), and pushes them fast-forward only, replaying
// the pending changes on the new tip when another writer moved the branch.
package gitops

import (
	"log/slog"
	"time"

	"github.com/go-git/go-git/v5/plumbing/transport"

	"github.com/configbutler/gitops-reverser/metrics"
)

// Signature names a person or the daemon in a commit.
type Signature struct{ Name, Email string }

// IsZero reports whether the signature names nobody.
func (s Signature) IsZero() bool { return s.Name == "" && s.Email == "" }

// Change is one file-level intent: write Content at Path, or delete Path when Content is nil.
type Change struct {
	Path    string
	Content []byte    // nil = delete
	Author  Signature // zero = the bot identity
	Summary string    // e.g. "update configmaps/default/web", used in commit messages
}

// Sync declares the complete set of live paths under some scopes: every *.yaml file below a
// scope that is not live is an orphan and is deleted in the next batch.
type Sync struct {
	Scopes []string // path prefixes ending in "/"; a "*" segment matches any one folder
	Live   map[string]struct{}
}

// BatchLimits decide when a batch becomes commits: at MaxFiles changes, MaxBytes of content,
// MaxWait after the first change (the bound under constant churn) or after Quiet without a new
// change, whichever comes first. Zero fields take the defaults.
type BatchLimits struct {
	MaxFiles       int
	MaxBytes       int64
	MaxWait, Quiet time.Duration
}

// Default batch limits.
const (
	DefaultMaxFiles = 200
	DefaultMaxBytes = 1 << 20
	DefaultMaxWait  = 20 * time.Second
	DefaultQuiet    = 1500 * time.Millisecond
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
}

// WorkerConfig is everything a Worker needs. Slots, Metrics and Log may be nil.
type WorkerConfig struct {
	Remote   Remote
	WorkDir  string // the clone lives in WorkDir/WorkerKey(URL, Branch)
	Limits   BatchLimits
	Identity Identity
	Slots    *Slots
	Metrics  *metrics.Mirror
	Log      *slog.Logger
}

// WorkerStatus is a snapshot of a worker's progress.
type WorkerStatus struct {
	LastPushed string // SHA of the last commit the remote accepted (or fetched)
	LastError  error  // the last push or fetch error, nil once a push lands
	Pending    int    // changes accepted but not yet pushed
}
