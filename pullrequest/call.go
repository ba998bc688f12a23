package pullrequest

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// caller is what every host shares: it reports each call to Settings.OnCall and turns a failed
// call into an *Error.
type caller struct {
	kind   string
	onCall func(host, op string, status int)
	now    func() time.Time
	// refine, when set, corrects the classification from the client's own error types.
	refine func(e *Error, now time.Time)
}

// done reports one API call, answered by resp (nil when no answer came), and returns its
// failure as an *Error, or nil when err is nil.
func (c caller) done(op string, resp *http.Response, err error) error {
	status := 0
	if resp != nil {
		status = resp.StatusCode
	}
	if c.onCall != nil {
		c.onCall(c.kind, op, status)
	}
	if err == nil {
		return nil
	}
	return c.fail(op, resp, err)
}

// fail classifies the failure err of a call answered by resp (nil when no answer came).
func (c caller) fail(op string, resp *http.Response, err error) *Error {
	now := c.now()
	e := &Error{Host: c.kind, Op: op, Err: err}
	if resp == nil {
		e.Reason = transportReason(err)
	} else {
		e.Status = resp.StatusCode
		e.Reason = reasonForStatus(op, e.Status)
		if e.Status == http.StatusForbidden && rateLimited403(resp.Header, err) {
			e.Reason = ReasonRateLimited
		}
		e.RetryAfter = retryAfter(resp.Header, e.Reason == ReasonRateLimited, now)
	}
	if c.refine != nil {
		c.refine(e, now)
	}
	e.Hint = hint(c.kind, e.Reason)
	return e
}

// transportReason classifies a call that got no answer.
func transportReason(err error) string {
	var ue *url.Error
	var ne net.Error
	switch {
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, os.ErrDeadlineExceeded):
		return ReasonTimeout
	case errors.Is(err, context.Canceled):
		return ReasonCanceled
	case errors.As(err, &ne) && ne.Timeout():
		return ReasonTimeout
	case errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET),
		errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return ReasonHostUnavailable // refused or dropped: down, or restarting
	case strings.HasPrefix(err.Error(), "rate: Wait"):
		return ReasonRateLimited // client-go's own limiter would wait past the deadline
	case errors.As(err, &ue):
		return ReasonHostUnavailable // DNS, TLS, a proxy
	default:
		return ReasonRejected // the client refused the call before sending it
	}
}

// rateLimited403 tells GitHub's rate-limit 403s from a missing permission: the primary limit
// sets X-RateLimit-Remaining to 0, the secondary one says so in its message (GitHub's REST
// docs, "Rate limits for the REST API").
func rateLimited403(h http.Header, err error) bool {
	if h.Get("X-RateLimit-Remaining") == "0" {
		return true
	}
	msg := strings.ToLower(err.Error())
	return strings.Contains(msg, "secondary rate limit") || strings.Contains(msg, "abuse detection")
}

// retryAfter reads how long the host asks us to wait: Retry-After (seconds or an HTTP date)
// always; the rate limit's reset time (GitHub's X-RateLimit-Reset, GitLab's RateLimit-Reset,
// both Unix seconds) only when rateLimited, as both hosts send it on every answer.
func retryAfter(h http.Header, rateLimited bool, now time.Time) time.Duration {
	if v := strings.TrimSpace(h.Get("Retry-After")); v != "" {
		if secs, err := strconv.ParseInt(v, 10, 64); err == nil {
			return max(time.Duration(secs)*time.Second, 0)
		}
		if t, err := http.ParseTime(v); err == nil {
			return max(t.Sub(now), 0)
		}
	}
	if !rateLimited {
		return 0
	}
	for _, k := range []string{"X-RateLimit-Reset", "RateLimit-Reset"} {
		v, err := strconv.ParseInt(strings.TrimSpace(h.Get(k)), 10, 64)
		if err != nil || v <= 0 {
			continue
		}
		if v < 1_000_000_000 { // a delta in seconds, as the IETF RateLimit header draft has it
			return time.Duration(v) * time.Second
		}
		return max(time.Unix(v, 0).Sub(now), 0)
	}
	return 0
}

// maxPages bounds a listing, so a host whose paging never ends cannot hold a call forever.
const maxPages = 100

// alreadyExists reports whether err is the host saying an open request for the head branch
// exists already: GitHub's 422 "A pull request already exists for owner:head.", Gitea's 409
// "pull request already exists for these targets", GitLab's 409 "Another open merge request
// already exists for this source branch".
func alreadyExists(err error) bool {
	var e *Error
	if !errors.As(err, &e) || (e.Status != http.StatusConflict && e.Status != http.StatusUnprocessableEntity) {
		return false
	}
	return e.Err != nil && strings.Contains(strings.ToLower(e.Err.Error()), "already exists")
}

// existing answers an Open the host refused with cause, as one for r's head exists already,
// with that request; cause stands when Find does not see it.
func existing(ctx context.Context, h Host, r NewRequest, cause error) (*Request, error) {
	found, err := h.Find(ctx, r.Head, r.Base)
	switch {
	case err != nil:
		return nil, err
	case found == nil:
		return nil, cause
	default:
		return found, nil
	}
}
