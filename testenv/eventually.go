package testenv

import (
	"testing"
	"time"
)

// Eventually polls cond until it holds, failing the test with what and cond's last detail when
// timeout passes first.
func Eventually(tb testing.TB, timeout time.Duration, what string, cond func() (bool, string)) {
	tb.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok, detail := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			tb.Fatalf("%s: not within %s; last: %s", what, timeout, detail)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
