package receiver

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/configbutler/gitops-reverser/crds"
	"github.com/configbutler/gitops-reverser/metrics"
)

// readingBody is a request body that says when the handler first reads it: by then the handler
// holds the body's share of the budget.
type readingBody struct {
	r       io.Reader
	once    sync.Once
	reading chan struct{}
}

func (b *readingBody) Read(p []byte) (int, error) {
	b.once.Do(func() { close(b.reading) })
	return b.r.Read(p)
}

// failingBody fails every read, like a connection that breaks mid-body.
type failingBody struct{}

func (failingBody) Read([]byte) (int, error) { return 0, errors.New("connection reset") }

// waitClosed waits for ch to close, failing the test after a deadline.
func waitClosed(tb testing.TB, ch <-chan struct{}, what string) {
	tb.Helper()
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		tb.Fatalf("timed out waiting for %s", what)
	}
}

// budgetRig is a rig whose handler holds at most budget bytes of bodies, with one GitHub Receiver
// for the recorded push's repository; it returns the Receiver's path.
func budgetRig(t *testing.T, budget int64) (*rig, string) {
	r := newRig(t, func(c *HandlerConfig) { c.BodyBudget = budget })
	path := r.add(&Entry{Name: "gh", Type: TypeGitHub,
		Targets: []Target{{Namespace: "apps", Name: "d", RepoURL: "https://github.com/jessesuen/test-repo"}}})
	return r, path
}

// serveRequest sends a POST with body and Content-Length length (-1: unknown) straight to the handler.
func (r *rig) serveRequest(path string, h http.Header, body io.Reader, length int64) *httptest.ResponseRecorder {
	req := httptest.NewRequest(http.MethodPost, path, body)
	req.ContentLength = length
	for k, v := range h {
		req.Header[k] = v
	}
	rec := httptest.NewRecorder()
	r.handler.ServeHTTP(rec, req)
	return rec
}

func TestBodyBudgetRefusesWhileSpent(t *testing.T) {
	push := mustPayload(t, "github-commit-event.json")
	n := int64(len(push))
	r, path := budgetRig(t, n+n/2) // room for one push, not two

	// The first delivery reserves its bytes and waits for a body the test has not sent yet.
	pr, pw := io.Pipe()
	held := &readingBody{r: pr, reading: make(chan struct{})}
	first := httptest.NewRecorder()
	done := make(chan struct{})
	go func() {
		defer close(done)
		req := httptest.NewRequest(http.MethodPost, path, held)
		req.ContentLength = n
		for k, v := range signed(TypeGitHub, testToken, push, "push", "d-1") {
			req.Header[k] = v
		}
		r.handler.ServeHTTP(first, req)
	}()
	t.Cleanup(func() {
		pw.CloseWithError(errors.New("test ended"))
		<-done
	})
	waitClosed(t, held.reading, "the first delivery to read its body")

	rec := r.do(http.MethodPost, path, signed(TypeGitHub, testToken, push, "push", "d-2"), push)
	if rec.Code != http.StatusServiceUnavailable || !strings.Contains(rec.Body.String(), "busy") {
		t.Fatalf("second delivery: %d %q, want 503 busy", rec.Code, rec.Body)
	}
	if s, err := strconv.Atoi(rec.Header().Get("Retry-After")); err != nil || s <= 0 {
		t.Errorf("Retry-After %q, want a number of seconds", rec.Header().Get("Retry-After"))
	}
	if got := testutil.ToFloat64(r.metrics.Requests.WithLabelValues(TypeGitHub, metrics.ReceiverBusy)); got != 1 {
		t.Errorf("requests_total{github,busy} = %v, want 1", got)
	}
	if o := r.lastObserved(); o.outcome != crds.OutcomeRefused {
		t.Errorf("observed %+v, want Refused", o)
	}
	if got := r.trig.got(); len(got) != 0 {
		t.Fatalf("triggered %v while the first delivery was still being read", got)
	}

	if _, err := pw.Write(push); err != nil {
		t.Fatalf("send the first body: %v", err)
	}
	_ = pw.Close()
	waitClosed(t, done, "the first delivery to finish")
	if first.Code != http.StatusAccepted {
		t.Fatalf("first delivery: %d %q, want 202", first.Code, first.Body)
	}

	if rec := r.do(http.MethodPost, path, signed(TypeGitHub, testToken, push, "push", "d-3"), push); rec.Code != http.StatusAccepted {
		t.Fatalf("third delivery: %d %q, want 202 once the first is done", rec.Code, rec.Body)
	}
	if got := r.trig.got(); !slices.Equal(got, []string{"apps/d", "apps/d"}) {
		t.Fatalf("triggered %v, want the first and third deliveries", got)
	}
}

func TestBodyBudgetIsReleasedAfterRefusals(t *testing.T) {
	// Every request below has no Content-Length, so it reserves MaxBodyBytes: the whole budget. A
	// request that kept its share would make the next one busy.
	r, path := budgetRig(t, MaxBodyBytes)
	push := mustPayload(t, "github-commit-event.json")
	huge := bytes.Repeat([]byte("a"), MaxBodyBytes+1)
	notJSON := []byte("not json")
	// The budget is the handler's, shared by every Receiver's path.
	other := r.add(&Entry{Name: "other", Type: TypeGitHub, Targets: []Target{{Namespace: "apps", Name: "o", RepoURL: otherRepo}}})
	steps := []struct {
		name   string
		path   string
		header http.Header
		body   io.Reader
		length int64
		status int
	}{
		{"BadSignature", path, signed(TypeGitHub, []byte("wrong"), push, "push", "1"), bytes.NewReader(push), -1, 403},
		{"TooLarge", path, signed(TypeGitHub, testToken, huge, "push", "2"), bytes.NewReader(huge), -1, 413},
		{"DeclaredTooLarge", path, signed(TypeGitHub, testToken, push, "push", "3"), bytes.NewReader(push), MaxBodyBytes + 1, 413},
		{"Unreadable", path, signed(TypeGitHub, testToken, push, "push", "4"), failingBody{}, -1, 400},
		{"Unparseable", path, signed(TypeGitHub, testToken, notJSON, "push", "5"), bytes.NewReader(notJSON), -1, 400},
		{"RepositoryMismatch", other, signed(TypeGitHub, testToken, push, "push", "6"), bytes.NewReader(push), -1, 403},
		{"Accepted", path, signed(TypeGitHub, testToken, push, "push", "7"), bytes.NewReader(push), -1, 202},
		{"AcceptedAgain", path, signed(TypeGitHub, testToken, push, "push", "8"), bytes.NewReader(push), -1, 202},
	}
	for _, s := range steps {
		if rec := r.serveRequest(s.path, s.header, s.body, s.length); rec.Code != s.status {
			t.Fatalf("%s: %d %q, want %d", s.name, rec.Code, rec.Body, s.status)
		}
	}
	if got := testutil.ToFloat64(r.metrics.Requests.WithLabelValues(TypeGitHub, metrics.ReceiverBusy)); got != 0 {
		t.Errorf("requests_total{github,busy} = %v, want 0", got)
	}
}

func TestBodyOfUnknownLengthOverTheBudgetIsBusy(t *testing.T) {
	r, path := budgetRig(t, MaxBodyBytes-1)
	push := mustPayload(t, "github-commit-event.json")
	h := signed(TypeGitHub, testToken, push, "push", "1")
	if rec := r.serveRequest(path, h, bytes.NewReader(push), -1); rec.Code != http.StatusServiceUnavailable {
		t.Fatalf("unknown length: %d %q, want 503", rec.Code, rec.Body)
	}
	if rec := r.serveRequest(path, h, bytes.NewReader(push), int64(len(push))); rec.Code != http.StatusAccepted {
		t.Fatalf("known length: %d %q, want 202", rec.Code, rec.Body)
	}
}
