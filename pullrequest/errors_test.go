package pullrequest

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestRetryAfterReadsEveryForm reads the wait from Retry-After (seconds or a date) on any answer,
// and from the reset headers only on a rate limit, since GitHub and GitLab send those always.
func TestRetryAfterReadsEveryForm(t *testing.T) {
	epoch := func(d time.Duration) string { return strconv.FormatInt(testNow.Add(d).Unix(), 10) }
	tests := []struct {
		name        string
		header      map[string]string
		rateLimited bool
		want        time.Duration
	}{
		{"seconds", map[string]string{"Retry-After": "120"}, false, 2 * time.Minute},
		{"a date", map[string]string{"Retry-After": testNow.Add(time.Minute).Format(http.TimeFormat)}, false, time.Minute},
		{"a date gone by", map[string]string{"Retry-After": testNow.Add(-time.Minute).Format(http.TimeFormat)}, false, 0},
		{"garbage", map[string]string{"Retry-After": "soon"}, true, 0},
		{"github reset on a rate limit", map[string]string{"X-RateLimit-Reset": epoch(10 * time.Minute)}, true, 10 * time.Minute},
		{"github reset on another error", map[string]string{"X-RateLimit-Reset": epoch(10 * time.Minute)}, false, 0},
		{"gitlab reset", map[string]string{"RateLimit-Reset": epoch(30 * time.Second)}, true, 30 * time.Second},
		{"a reset as seconds to wait", map[string]string{"RateLimit-Reset": "42"}, true, 42 * time.Second},
		{"retry-after wins over the reset", map[string]string{"Retry-After": "5", "X-RateLimit-Reset": epoch(time.Hour)}, true, 5 * time.Second},
		{"nothing said", nil, true, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := http.Header{}
			for k, v := range tt.header {
				h.Set(k, v)
			}
			if got := retryAfter(h, tt.rateLimited, testNow); got != tt.want {
				t.Errorf("retryAfter(%v, %v) = %v, want %v", tt.header, tt.rateLimited, got, tt.want)
			}
		})
	}
}

// TestTransportFailuresTellTimeoutFromCancel classifies calls that got no answer.
func TestTransportFailuresTellTimeoutFromCancel(t *testing.T) {
	tests := []struct {
		err  error
		want string
	}{
		{context.DeadlineExceeded, ReasonTimeout},
		{fmt.Errorf("dial tcp: %w", syscall.ECONNREFUSED), ReasonHostUnavailable},
		{fmt.Errorf("read: %w", syscall.ECONNRESET), ReasonHostUnavailable},
		{context.Canceled, ReasonCanceled},
		{&url.Error{Op: "Get", URL: "https://h/", Err: errors.New("tls: failed to verify certificate")}, ReasonHostUnavailable},
		{errors.New("rate: Wait(n=1) would exceed context deadline"), ReasonRateLimited},
		{errors.New("title is empty"), ReasonRejected},
	}
	for _, tt := range tests {
		if got := transportReason(tt.err); got != tt.want {
			t.Errorf("transportReason(%v) = %s, want %s", tt.err, got, tt.want)
		}
	}
}

// TestErrorSaysHostOpStatusMessageAndHint shows the error text carries all a user needs.
func TestErrorSaysHostOpStatusMessageAndHint(t *testing.T) {
	c := caller{kind: KindGitLab, now: func() time.Time { return testNow }}
	resp := &http.Response{StatusCode: http.StatusForbidden, Header: http.Header{}}
	e := c.fail(OpOpen, resp, errors.New("403 insufficient_scope"))
	want := "gitlab open pull request: 403 Forbidden: 403 insufficient_scope; hint: the token lacks a permission: " +
		"a GitLab token needs the api scope, and its user at least the Developer role in the project"
	if e.Error() != want {
		t.Errorf("Error() = %q\nwant      %q", e.Error(), want)
	}
	if e.Temporary() || e.ConditionReason() != ReasonForbidden {
		t.Errorf("403 without a rate limit: temporary %v, reason %s", e.Temporary(), e.ConditionReason())
	}
	timeout := c.fail(OpFind, nil, context.DeadlineExceeded)
	if s := timeout.Error(); !strings.HasPrefix(s, "gitlab find pull request: context deadline exceeded; hint: ") || !errors.Is(timeout, context.DeadlineExceeded) {
		t.Errorf("timeout error %q: want host, op and the wrapped cause", s)
	}
}
