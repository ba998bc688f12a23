package pullrequest

import (
	"fmt"
	"net/http"
	"strings"
	"time"
)

// Condition reasons of an Error, in the CamelCase a Kubernetes condition's reason takes.
const (
	ReasonUnauthorized       = "Unauthorized"       // 401: the token is wrong or expired
	ReasonForbidden          = "Forbidden"          // 403 that is not a rate limit: the token lacks a scope or role
	ReasonRepositoryNotFound = "RepositoryNotFound" // 404 on find or open: no such repository, or the token cannot see it
	ReasonRequestNotFound    = "RequestNotFound"    // 404 on get, update or close: no such request (or repository)
	ReasonCommitNotFound     = "CommitNotFound"     // 404 on status, or the host's own "no such commit": no such commit (or repository)
	ReasonConflict           = "Conflict"           // 409 or 422 that is not "already exists"
	ReasonRateLimited        = "RateLimited"        // 429, or a 403 GitHub sends for its primary or secondary rate limit
	ReasonHostUnavailable    = "HostUnavailable"    // 5xx, or the host could not be reached
	ReasonTimeout            = "Timeout"            // no answer in time, connection refused or reset
	ReasonCanceled           = "Canceled"           // the caller's context was canceled
	ReasonRejected           = "Rejected"           // any other 4xx, or a call the client would not send
	ReasonBadResponse        = "BadResponse"        // a 2xx the client could not read
)

// Error is an API call that failed. Every error a Host returns is one.
type Error struct {
	Host   string // KindGitea, KindGitHub or KindGitLab
	Op     string // OpFind, OpOpen, ...
	Status int    // the HTTP status; 0 when no answer came
	Reason string // one of the Reason constants
	// RetryAfter is how long the host asked us to wait (Retry-After, or the rate limit's
	// reset time minus now); 0 when it did not say.
	RetryAfter time.Duration
	Hint       string // what the user should do about it
	Err        error  // the client library's error
}

// Error tells host, operation, status, the host's message and the hint, on one line.
func (e *Error) Error() string {
	var b strings.Builder
	if e.Op == OpStatus {
		fmt.Fprintf(&b, "%s set commit status: ", e.Host)
	} else {
		fmt.Fprintf(&b, "%s %s pull request: ", e.Host, e.Op)
	}
	if e.Status != 0 {
		fmt.Fprintf(&b, "%d %s: ", e.Status, http.StatusText(e.Status))
	}
	if e.Err != nil {
		b.WriteString(strings.Join(strings.Fields(e.Err.Error()), " ")) // one line, for logs and conditions
	} else {
		b.WriteString(strings.ToLower(e.Reason))
	}
	if e.Hint != "" {
		b.WriteString("; hint: ")
		b.WriteString(e.Hint)
	}
	return b.String()
}

// Unwrap returns the client library's error.
func (e *Error) Unwrap() error { return e.Err }

// Temporary reports whether the same call may succeed later without anyone changing anything:
// a rate limit, a host that is down, a timeout.
func (e *Error) Temporary() bool {
	switch e.Reason {
	case ReasonRateLimited, ReasonHostUnavailable, ReasonTimeout:
		return true
	}
	return false
}

// ConditionReason returns Reason, for a status condition.
func (e *Error) ConditionReason() string { return e.Reason }

// RetryAfterDelay returns RetryAfter: how long to wait before calling again, 0 when unknown.
func (e *Error) RetryAfterDelay() time.Duration { return e.RetryAfter }

// reasonForStatus maps an HTTP error status to a reason; rate limits hidden in a 403 are told
// apart by the caller, which sees the headers and message.
func reasonForStatus(op string, status int) string {
	switch {
	case status == http.StatusUnauthorized:
		return ReasonUnauthorized
	case status == http.StatusForbidden:
		return ReasonForbidden
	case status == http.StatusNotFound && (op == OpGet || op == OpUpdate || op == OpClose):
		return ReasonRequestNotFound
	case status == http.StatusNotFound && op == OpStatus:
		return ReasonCommitNotFound
	case status == http.StatusNotFound:
		return ReasonRepositoryNotFound
	case status == http.StatusConflict || status == http.StatusUnprocessableEntity:
		return ReasonConflict
	case status == http.StatusTooManyRequests:
		return ReasonRateLimited
	case status >= 500:
		return ReasonHostUnavailable
	case status >= 200 && status < 300:
		return ReasonBadResponse
	default:
		return ReasonRejected
	}
}

// hint tells the user what to do about reason on host kind.
func hint(kind, reason string) string {
	switch reason {
	case ReasonUnauthorized:
		return "the token in the GitRepoConfig's Secret (key token or password) is invalid or expired"
	case ReasonForbidden:
		return "the token lacks a permission: " + scopes[kind]
	case ReasonRepositoryNotFound:
		return "check the repository URL; a host also answers 404 for a private repository the token cannot read"
	case ReasonRequestNotFound:
		return "the request no longer exists (deleted, or its repository moved); find the open one by its branches"
	case ReasonCommitNotFound:
		return "the host has no such commit (not pushed yet, or gone with a force push), or check the repository URL; a host also answers 404 for a private repository the token cannot read"
	case ReasonConflict:
		return "the host refused the request as it stands (e.g. no difference between the branches, or the branch is missing)"
	case ReasonRateLimited:
		return "the host's API rate limit is reached; retry after the wait"
	case ReasonHostUnavailable:
		return "the host's API is failing or unreachable; check the API URL and the host's status, and retry"
	case ReasonTimeout:
		return "the host's API did not answer in time; check the API URL and the network, and retry"
	case ReasonRejected, ReasonBadResponse:
		return "the call was refused or its answer unreadable as it stands; please report it with this message"
	}
	return ""
}

// scopes are the permissions each host's token needs to open, edit and close requests and to
// set commit statuses.
var scopes = map[string]string{
	KindGitea:  "a Gitea token needs the write:repository scope (and read:issue to look labels up), and its user write access to the repository",
	KindGitHub: `a GitHub fine-grained token needs "Pull requests: read and write", "Contents: read and write" and "Commit statuses: read and write" on the repository (a classic token: the repo scope)`,
	KindGitLab: "a GitLab token needs the api scope, and its user at least the Developer role in the project",
}
