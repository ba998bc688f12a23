package notify

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Severities of a Notice: an Event of type Normal is SeverityInfo, Warning is SeverityError.
const (
	SeverityInfo  = "info"
	SeverityError = "error"
)

// Ref is the object a Notice is about.
type Ref struct {
	APIVersion string `json:"apiVersion,omitempty"`
	Kind       string `json:"kind"`
	Namespace  string `json:"namespace,omitempty"`
	Name       string `json:"name"`
}

func (r Ref) String() string {
	if r.Namespace == "" {
		return r.Kind + " " + r.Name
	}
	return r.Kind + " " + r.Namespace + "/" + r.Name
}

// Notice is one thing to tell: an Event the daemon recorded, with what the daemon knows around
// it. It never holds a Secret's value: Diff names the fields a proposal changes and shows values
// only of fields no Secret-like name guards (see Summarize).
type Notice struct {
	Time     time.Time `json:"time"`
	Severity string    `json:"severity"` // SeverityInfo or SeverityError
	Reason   string    `json:"reason"`   // the Event's reason: Opened, Applied, PushFailing, ...
	Message  string    `json:"message"`  // the Event's message
	Object   Ref       `json:"object"`   // what the Event is about

	// Destination is the GitDestination (in Object's namespace) the Event concerns, when one does.
	Destination string `json:"destination,omitempty"`
	// Repository is the destination's repository URL, when known.
	Repository string `json:"repository,omitempty"`
	// Commit is the commit the Event is about (a proposal's source commit), when there is one.
	Commit string `json:"commit,omitempty"`
	// Author is who: the Git author of Commit, or the person who made the change.
	Author string `json:"author,omitempty"`
	// File is the file in the repository, for a proposal.
	File string `json:"file,omitempty"`
	// Diff is a proposal's change, summarized (see Summarize).
	Diff string `json:"diff,omitempty"`
	// Link is the object's place on the operator page, when the daemon knows the page's URL.
	Link string `json:"link,omitempty"`
	// Summary is the NotifyRule's spec.summary, when it has one.
	Summary string `json:"summary,omitempty"`

	// scope is the namespace whose rules may read the notice: the object's, or the daemon's own
	// for a cluster-scoped object (a ClusterWatchRule).
	scope string
}

// Title is the one line every channel leads with.
func (n Notice) Title() string {
	if n.Summary != "" {
		return n.Summary + ": " + n.Reason + " " + n.Object.String()
	}
	return n.Reason + " " + n.Object.String()
}

// Sender delivers a Notice to one channel. Send must honour ctx (the channel's timeout per send)
// and return a *SendError for an answer that was not a success.
type Sender interface {
	Send(ctx context.Context, n Notice) error
}

// SendError is a channel's answer that was not a success. Retry says whether trying again may
// help: a timeout, no answer, 429 or 5xx may; any other 4xx will not.
type SendError struct {
	Status int // the HTTP status; 0 when no answer came
	Retry  bool
	Err    error
}

func (e *SendError) Error() string {
	if e.Status == 0 {
		return fmt.Sprintf("no answer: %v", e.Err)
	}
	return fmt.Sprintf("HTTP %d: %v", e.Status, e.Err)
}

func (e *SendError) Unwrap() error { return e.Err }

// retryable says whether err (from Send) may succeed when tried again.
func retryable(err error) bool {
	var se *SendError
	if errors.As(err, &se) {
		return se.Retry
	}
	return true
}
