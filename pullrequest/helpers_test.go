package pullrequest

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// testNow is the clock of every host under test, so waits read from reset times are exact.
var testNow = time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC)

// callLog records Settings.OnCall as "host op status" lines.
type callLog struct {
	mu    sync.Mutex
	calls []string
}

func (c *callLog) record(host, op string, status int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls = append(c.calls, fmt.Sprintf("%s %s %d", host, op, status))
}

func (c *callLog) list() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.calls...)
}

// mustNew builds the Host of s, on the fixed clock testNow, and records its calls in log (when
// not nil).
func mustNew(tb testing.TB, s Settings, log *callLog) Host {
	tb.Helper()
	if log != nil {
		s.OnCall = log.record
	}
	h, err := New(s)
	if err != nil {
		tb.Fatalf("New(%+v): %v", s, err)
	}
	clock := func() time.Time { return testNow }
	switch h := h.(type) {
	case *gitHub:
		h.now = clock
	case *gitLab:
		h.now = clock
	case *giteaHost:
		h.now = clock
	}
	return h
}

// mustAPIError fails tb unless err is an *Error.
func mustAPIError(tb testing.TB, err error) *Error {
	tb.Helper()
	var e *Error
	if !errors.As(err, &e) {
		tb.Fatalf("error %v (%T): want an *Error", err, err)
	}
	return e
}

// answer is a recorded error answer of a host: status, headers and JSON body.
type answer struct {
	status int
	header map[string]string
	body   string
}

func (a answer) write(w http.ResponseWriter) {
	for k, v := range a.header {
		w.Header().Set(k, v)
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(a.status)
	_, _ = w.Write([]byte(a.body))
}

// wantError is what an answer must be classified as.
type wantError struct {
	reason     string
	temporary  bool
	retryAfter time.Duration
	hint       string // a part of Hint
}

// checkError compares e with want, for the call op that got status.
func checkError(tb testing.TB, e *Error, host, op string, status int, want wantError) {
	tb.Helper()
	tb.Log(e)
	if e.Host != host || e.Op != op || e.Status != status {
		tb.Errorf("error names %s %s %d, want %s %s %d", e.Host, e.Op, e.Status, host, op, status)
	}
	if e.ConditionReason() != want.reason || e.Temporary() != want.temporary || e.RetryAfterDelay() != want.retryAfter {
		tb.Errorf("error %q: reason %s, temporary %v, retry after %v; want %s, %v, %v",
			e, e.ConditionReason(), e.Temporary(), e.RetryAfterDelay(), want.reason, want.temporary, want.retryAfter)
	}
	if !strings.Contains(e.Hint, want.hint) || !strings.Contains(e.Error(), e.Hint) {
		tb.Errorf("error %q: want its hint to say %q", e, want.hint)
	}
	if e.Unwrap() == nil {
		tb.Errorf("error %q wraps no cause", e)
	}
}

// writeJSON answers v as JSON with status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// blockUntilGone holds a request until the client gives up on it, or the test ends.
func blockUntilGone(tb testing.TB) http.HandlerFunc {
	release := make(chan struct{})
	tb.Cleanup(func() { close(release) })
	return func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}
}

// errorCase is one answer a host gives to a call, and the *Error the call must return.
type errorCase struct {
	name string
	op   string
	ans  answer
	want wantError
}

// runErrorCases makes each case's call of a host that always answers as the case says (start
// builds it), and checks the error and that exactly one call was made: no retries inside.
func runErrorCases(t *testing.T, kind string, cases []errorCase, start func(*testing.T, http.HandlerFunc, *callLog) Host) {
	for _, tt := range cases {
		t.Run(tt.name, func(t *testing.T) {
			log := &callLog{}
			h := start(t, func(w http.ResponseWriter, _ *http.Request) { tt.ans.write(w) }, log)
			err := callOp(h, tt.op)
			checkError(t, mustAPIError(t, err), kind, tt.op, tt.ans.status, tt.want)
			if calls := log.list(); len(calls) != 1 || calls[0] != fmt.Sprintf("%s %s %d", kind, tt.op, tt.ans.status) {
				t.Errorf("calls %v, want one %s answered %d (no retries)", calls, tt.op, tt.ans.status)
			}
		})
	}
}
