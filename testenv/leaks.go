package testenv

import (
	"fmt"
	"os"
	"testing"

	"go.uber.org/goleak"
)

// LeakIgnores are the goroutines a leak check of a package that talks to the control plane must
// ignore: they are not the package's, but net/http's (idle keep-alive connections) and klog's,
// kept per process.
func LeakIgnores() []goleak.Option {
	return []goleak.Option{
		goleak.IgnoreTopFunction("net/http.(*persistConn).readLoop"),
		goleak.IgnoreTopFunction("net/http.(*persistConn).writeLoop"),
		goleak.IgnoreTopFunction("internal/poll.runtime_pollWait"),
		goleak.IgnoreAnyFunction("k8s.io/klog/v2.(*flushDaemon).run.func1"),
	}
}

// RunMainNoLeaks is RunMain followed by a leak check (goleak.Find with ignores): the package
// fails when a goroutine it started outlives its tests (every part's Run must join what it starts).
func RunMainNoLeaks(m *testing.M, cp **ControlPlane, ignores ...goleak.Option) int {
	code := RunMain(m, cp)
	if code == 0 {
		if err := goleak.Find(ignores...); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			return 1
		}
	}
	return code
}
