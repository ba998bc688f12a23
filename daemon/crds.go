package daemon

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"

	"k8s.io/client-go/rest"

	"github.com/configbutler/gitops-reverser/crds"
)

// mirrorKinds are the kinds the mirror reads: it starts as soon as these are served, without
// waiting for the CRDs of write-back and the receivers.
var mirrorKinds = []string{crds.KindGitRepoConfig, crds.KindGitDestination, crds.KindWatchRule, crds.KindClusterWatchRule}

// Backoff of the CRD installation while the apiserver refuses or cannot be reached.
const (
	crdMinBackoff = 500 * time.Millisecond
	crdMaxBackoff = 30 * time.Second
)

// crdInstall applies the CRDs (or, with --install-crds=false, waits for another tool to): first
// those of the mirror's kinds, then every other, retrying with backoff until they are established
// or its context ends. The daemon is unready until all are.
type crdInstall struct {
	kube    *rest.Config
	install bool
	log     *slog.Logger
	// mirror is closed once the mirror's kinds are served, all once every kind is.
	mirror, all chan struct{}
	done        atomic.Bool
}

func newCRDInstall(kube *rest.Config, install bool, log *slog.Logger) *crdInstall {
	return &crdInstall{kube: kube, install: install, log: log, mirror: make(chan struct{}), all: make(chan struct{})}
}

// Run installs the mirror's kinds, then the rest, and returns once all are established or ctx ends.
func (c *crdInstall) Run(ctx context.Context) error {
	if !c.ensure(ctx, mirrorKinds) {
		return nil
	}
	close(c.mirror)
	if !c.ensure(ctx, nil) {
		return nil
	}
	c.done.Store(true)
	close(c.all)
	return nil
}

// ensure tries until the CRDs of kinds (nil: every kind) are established; false when ctx ended first.
func (c *crdInstall) ensure(ctx context.Context, kinds []string) bool {
	backoff := crdMinBackoff
	for {
		var err error
		if c.install {
			err = crds.Install(ctx, c.kube, c.log, kinds...)
		} else {
			err = crds.WaitEstablished(ctx, c.kube, c.log, kinds...)
		}
		if err == nil {
			return true
		}
		if ctx.Err() != nil {
			return false
		}
		c.log.Error("CRDs not established; retrying", "install", c.install, "err", err, "in", backoff)
		select {
		case <-ctx.Done():
			return false
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, crdMaxBackoff)
	}
}

// wait blocks until ch is closed (true) or ctx ends (false).
func wait(ctx context.Context, ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	case <-ctx.Done():
		return false
	}
}
