package testenv

import (
	"testing"
	"time"
)

// pollInterval is short enough that a test waits little past the moment its condition holds,
// long enough that polling an apiserver or a Git remote does not load a shared machine.
const pollInterval = 50 * time.Millisecond

// PollOption changes how Eventually waits.
type PollOption func(*poll)

type poll struct{ abort func() error }

// FailFast makes Eventually fail at once, with abort's error, when abort returns one: waiting
// longer cannot help once, say, the process under test has exited.
func FailFast(abort func() error) PollOption {
	return func(p *poll) { p.abort = abort }
}

// Eventually polls cond until it holds. It fails tb, naming what it waited for and cond's last
// detail (why it did not hold yet), when timeout passes or a FailFast check fails. Tests poll
// with a deadline instead of sleeping, so they are as fast as the system allows and never
// depend on how fast it is.
func Eventually(tb testing.TB, timeout time.Duration, what string, cond func() (bool, string), opts ...PollOption) {
	tb.Helper()
	var p poll
	for _, o := range opts {
		o(&p)
	}
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(pollInterval)
	defer tick.Stop()
	for {
		ok, detail := cond()
		if ok {
			return
		}
		if detail != "" {
			detail = " (last: " + detail + ")"
		}
		if p.abort != nil {
			if err := p.abort(); err != nil {
				tb.Fatalf("waiting for %s: %v%s", what, err, detail)
			}
		}
		if time.Now().After(deadline) {
			tb.Fatalf("%s: not within %v%s", what, timeout, detail)
		}
		<-tick.C
	}
}
