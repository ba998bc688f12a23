package testenv

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
)

// Runner is a long-running part of the daemon: Run works until its context ends.
type Runner interface {
	Run(ctx context.Context) error
}

// Run runs r on a goroutine until the returned stop is called or tb ends. stop ends r's context,
// waits for Run to return and returns its error (every call the same one). A test that never
// calls stop has r stopped when it ends, after what it registered later (cleanups run last in,
// first out), and fails if Run returned an error; one that calls stop checks the error itself.
func Run(tb testing.TB, r Runner) (stop func() error) {
	tb.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	end := sync.OnceValue(func() error {
		cancel()
		return <-done
	})
	var stopped atomic.Bool
	tb.Cleanup(func() {
		if err := end(); err != nil && !stopped.Load() {
			tb.Errorf("%T.Run: %v", r, err)
		}
	})
	return func() error {
		stopped.Store(true)
		return end()
	}
}
