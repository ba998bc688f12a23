// Command gitops-reverser mirrors a live Kubernetes cluster into Git. All of it lives in package
// daemon; main only turns signals into a cancelled context and errors into an exit code.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/configbutler/gitops-reverser/daemon"
)

func main() {
	useFallbackRoots()
	ctx, cancel := context.WithCancel(context.Background())
	signals := make(chan os.Signal, 2)
	signal.Notify(signals, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		<-signals
		cancel() // first signal: shut down gracefully
		<-signals
		os.Exit(1) // second signal: stop at once
	}()
	err := daemon.Run(ctx, os.Args, os.Stdout, os.Stderr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "gitops-reverser:", err)
	}
	os.Exit(daemon.ExitCode(err))
}
