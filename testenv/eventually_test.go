package testenv

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"
)

// fatalRecorder is a testing.TB whose Fatal ends only the goroutine it runs on, recording the
// message, so a test can check how a helper fails.
type fatalRecorder struct {
	testing.TB
	msg string
}

func (r *fatalRecorder) Helper() {}

func (r *fatalRecorder) Fatalf(format string, args ...any) {
	r.msg = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

func (r *fatalRecorder) Fatal(args ...any) {
	r.msg = fmt.Sprint(args...)
	runtime.Goexit()
}

// failure runs f with a fatalRecorder and returns its failure message, "" when f passed.
func failure(tb testing.TB, f func(testing.TB)) string {
	r := &fatalRecorder{TB: tb}
	done := make(chan struct{})
	go func() {
		defer close(done)
		f(r)
	}()
	<-done
	return r.msg
}

func TestEventuallyReturnsOnceTheConditionHolds(t *testing.T) {
	calls := 0
	msg := failure(t, func(tb testing.TB) {
		Eventually(tb, time.Hour, "the third call", func() (bool, string) {
			calls++
			return calls == 3, fmt.Sprintf("call %d", calls)
		})
	})
	if msg != "" || calls != 3 {
		t.Fatalf("failure %q after %d calls, want none after 3", msg, calls)
	}
}

func TestEventuallyFailures(t *testing.T) {
	cases := []struct {
		name    string
		timeout time.Duration
		opts    []PollOption
		want    []string
	}{
		{"timeout names what and the last detail", 0, nil,
			[]string{"the remote to converge", "not within", "last: 3 files, want 4"}},
		{"fail fast without waiting for the timeout", time.Hour, []PollOption{FailFast(func() error { return errors.New("daemon exited") })},
			[]string{"waiting for the remote to converge", "daemon exited", "last: 3 files, want 4"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			msg := failure(t, func(tb testing.TB) {
				Eventually(tb, c.timeout, "the remote to converge", func() (bool, string) { return false, "3 files, want 4" }, c.opts...)
			})
			for _, w := range c.want {
				if !strings.Contains(msg, w) {
					t.Errorf("failure %q lacks %q", msg, w)
				}
			}
		})
	}
}
