package testenv

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
)

// cleanupRecorder is a testing.TB that keeps its cleanups and errors for the test to look at.
type cleanupRecorder struct {
	testing.TB
	cleanups []func()
	errors   []string
}

func (r *cleanupRecorder) Helper()          {}
func (r *cleanupRecorder) Cleanup(f func()) { r.cleanups = append(r.cleanups, f) }
func (r *cleanupRecorder) Errorf(format string, args ...any) {
	r.errors = append(r.errors, fmt.Sprintf(format, args...))
}

// end runs the cleanups as a test's end does: last in, first out.
func (r *cleanupRecorder) end() {
	for _, f := range slices.Backward(r.cleanups) {
		f()
	}
}

// failsOnStop works until its context ends, then returns err.
type failsOnStop struct{ err error }

func (f failsOnStop) Run(ctx context.Context) error {
	<-ctx.Done()
	return f.err
}

func TestRunReportsAFailureNobodyAskedFor(t *testing.T) {
	boom := errors.New("boom")

	left := &cleanupRecorder{TB: t}
	Run(left, failsOnStop{boom})
	left.end()
	if len(left.errors) != 1 {
		t.Errorf("a Run that failed at the end of the test reported %q, want one error", left.errors)
	}

	stopped := &cleanupRecorder{TB: t}
	stop := Run(stopped, failsOnStop{boom})
	if err := stop(); !errors.Is(err, boom) {
		t.Errorf("stop returned %v, want Run's error", err)
	}
	if err := stop(); !errors.Is(err, boom) {
		t.Errorf("a second stop returned %v, want Run's error again", err)
	}
	stopped.end()
	if len(stopped.errors) != 0 {
		t.Errorf("a Run the test stopped (and so checked) reported %q at its end", stopped.errors)
	}

	clean := &cleanupRecorder{TB: t}
	Run(clean, failsOnStop{nil})
	clean.end()
	if len(clean.errors) != 0 {
		t.Errorf("a Run that ended cleanly reported %q", clean.errors)
	}
}
