package testenv

import "go.uber.org/goleak"

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
