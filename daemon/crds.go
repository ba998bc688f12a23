package daemon

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/dynamic"
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
	// policyInstallTimeout bounds the one attempt to apply the approver policies.
	policyInstallTimeout = 30 * time.Second
)

// crdInstall applies the CRDs (or, with --install-crds=false, waits for another tool to): first
// those of the mirror's kinds, then every other, retrying with backoff until they are established
// or its context ends. The daemon is unready until all are.
type crdInstall struct {
	kube    *rest.Config
	install bool
	policy  crds.ApproverPolicy // the admission policies applied with the CRDs
	// namespace is the daemon's, where the record of its policies lives.
	namespace string
	self      *daemonUser // the daemon's user, written into the policies
	log       *slog.Logger
	// mirror is closed once the mirror's kinds are served, served once every kind is, all once
	// the approver policies the daemon applied are enforced too (or found not to be).
	mirror, served, all chan struct{}
	done                atomic.Bool
}

func newCRDInstall(kube *rest.Config, install bool, policy crds.ApproverPolicy, namespace string, self *daemonUser, log *slog.Logger) *crdInstall {
	return &crdInstall{kube: kube, install: install, policy: policy, namespace: namespace, self: self, log: log,
		mirror: make(chan struct{}), served: make(chan struct{}), all: make(chan struct{})}
}

// Run installs the mirror's kinds, then the approver policies, then the rest, and returns once
// all are established or ctx ends. The policies come before the Proposal CRD, whose schema has
// the spec.decidedBy they guard.
func (c *crdInstall) Run(ctx context.Context) error {
	if !c.ensure(ctx, mirrorKinds) {
		return nil
	}
	close(c.mirror)
	installed := c.installPolicies(ctx) // also with --install-crds=false: --approver-policy governs them

	if !c.ensure(ctx, nil) {
		return nil
	}
	close(c.served)
	if installed {
		c.waitPolicies(ctx)
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

// installPolicies applies the approver policies --approver-policy asks for, once, and says
// whether it did. Without them write-back falls back on the webhook's record of who decided, and
// its Ready condition says so; nothing waits for policies that were not applied.
func (c *crdInstall) installPolicies(ctx context.Context) bool {
	ctx, cancel := context.WithTimeout(ctx, policyInstallTimeout)
	defer cancel()
	dyn, err := dynamic.NewForConfig(c.kube)
	var self string
	if err == nil {
		self, err = c.self.get(ctx)
	}
	if err == nil {
		var installed []string
		var drawn bool
		installed, drawn, err = crds.InstallApproverPolicies(ctx, dyn, c.policy, crds.ApproverParams{Namespace: c.namespace, Daemon: self})
		if err == nil {
			c.log.Info("approver policies in place", "policy", c.policy, "installed", installed, "newEpoch", drawn, "creator", self)
			return len(installed) > 0
		}
	}
	fix := "grant the daemon create, patch and delete on its admission policies and their ConfigMap (deploy/rbac.yaml), or set --approver-policy=none"
	if apierrors.IsNotFound(err) {
		fix = "create the namespace " + c.namespace + " (their record lives there), or set --namespace"
	}
	c.log.Warn("approver policies not applied: who approves a Proposal is known from the admission webhook only",
		"policy", c.policy, "err", err, "fix", fix)
	return false
}

// waitPolicies waits, bounded, until the apiserver enforces the policies just applied, so that
// write-back, which starts next, finds approvals stamped by them (and the Proposal kind, which
// the check needs, is served by now).
func (c *crdInstall) waitPolicies(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, policyInstallTimeout)
	defer cancel()
	dyn, err := dynamic.NewForConfig(c.kube)
	if err == nil {
		err = crds.WaitApproverPolicies(ctx, dyn, c.policy, c.namespace)
	}
	if err != nil {
		c.log.Warn("approver policies not enforced yet: approvals stamped meanwhile are asked again", "policy", c.policy, "err", err)
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
