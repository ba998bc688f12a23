package testenv

import (
	"flag"
	"fmt"
	"os"
	"strconv"
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
	return noLeaks(RunMain(m, cp), ignores)
}

// RunPlanesNoLeaks is the body of the TestMain of a package whose tests borrow their control
// planes from p (Planes.Lend): it runs the tests, as many side by side as p has planes unless
// -test.parallel says otherwise, stops the planes and checks for leaks as RunMainNoLeaks does.
func RunPlanesNoLeaks(m *testing.M, p *Planes, ignores ...goleak.Option) int {
	flag.Parse()
	parallelSet := false
	flag.Visit(func(f *flag.Flag) { parallelSet = parallelSet || f.Name == "test.parallel" })
	if !parallelSet {
		_ = flag.Set("test.parallel", strconv.Itoa(p.max))
	}
	code := m.Run()
	p.Stop()
	return noLeaks(code, ignores)
}

func noLeaks(code int, ignores []goleak.Option) int {
	if code == 0 {
		if err := goleak.Find(ignores...); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			return 1
		}
	}
	return code
}
