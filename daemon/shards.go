package daemon

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/configbutler/gitops-reverser/gitops"
	"github.com/configbutler/gitops-reverser/shard"
)

// runSharded runs the daemon's parts on this replica for the shards it owns (--shards=auto), until
// ctx ends: the mirror, write-back, the receivers and the page run on every replica, each for the
// (repository, branch) pairs whose Lease it holds. Leader election stays for the cluster-wide work:
// the admission webhook's registration and the leader label of the Pod. When ctx ends, the parts
// stop first (the mirror's last pushes are made while the shards are still held), then the shards
// are released, so the other replicas take them at once.
func runSharded(ctx context.Context, s shared, cfg Config, ready *readiness, inst *crdInstall) error {
	leases, err := leaseClient(s, cfg.Leader)
	if err != nil {
		return err
	}
	identity := leaderIdentity(cfg.Leader.PodName)
	set := shard.New(shard.Config{
		Leases: leases, Prefix: cfg.Leader.ID, Identity: identity, Address: cfg.Leader.PeerAddress,
		Timings: cfg.Leader.timings(), Metrics: s.reg.Shards, Log: s.log.With("part", "shards"),
	})
	fences := func(url, branch string) gitops.Fence { return set.Fence(shard.Key{URL: url, Branch: branch}) }
	parts, err := buildLeaderParts(ctx, s, cfg, leaderDeps{fences: fences, shards: set, crds: inst})
	if err != nil {
		return err
	}
	set.Connect(
		func(ctx context.Context, k shard.Key) { wait(ctx, parts.mirror.pool.Drained(k.URL, k.Branch)) },
		func() {
			parts.mirror.changes.Notify()
			parts.wb.ctl.Resync()
		},
	)
	if cfg.Leader.PeerAddress == "" && parts.attr != nil {
		s.log.Warn("no --" + keyPeerAddress + ": changes to this replica's shards made through another replica are credited to the bot")
	}
	l, err := newLeadership(s, cfg.Leader, identity, func(ctx context.Context, _ gitops.Fence) error {
		if parts.attr != nil {
			return parts.attr.register(ctx)
		}
		<-ctx.Done()
		return nil
	})
	if err != nil {
		return err
	}
	ready.role.Store(l)
	ready.shards.Store(set)

	var wg sync.WaitGroup
	var setErr, leaderErr error
	setCtx, stopSet := context.WithCancel(context.WithoutCancel(ctx))
	wg.Go(func() { setErr = set.Run(setCtx) })
	leaderCtx, stopLeading := context.WithCancel(ctx)
	wg.Go(func() { leaderErr = l.Run(leaderCtx) })
	err = parts.Run(ctx)
	stopLeading()
	stopSet()
	wg.Wait()
	return errors.Join(err, setErr, leaderErr)
}

// shardsLine is what /readyz says of the shards this replica owns.
func shardsLine(set *shard.Set) string {
	st := set.Status()
	owned := make([]string, len(st.Owned))
	for i, k := range st.Owned {
		owned[i] = k.String()
	}
	line := fmt.Sprintf("shards: %s owns %d of %d (%d replicas)", set.Identity(), len(st.Owned), st.Shards, st.Members)
	if len(owned) > 0 {
		line += ": " + strings.Join(owned, ", ")
	}
	return line
}
