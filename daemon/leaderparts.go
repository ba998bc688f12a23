package daemon

import (
	"context"
	"errors"
	"sync"

	"github.com/configbutler/gitops-reverser/controller"
	"github.com/configbutler/gitops-reverser/gitops"
	"github.com/configbutler/gitops-reverser/kube"
	"github.com/configbutler/gitops-reverser/shard"
	"github.com/configbutler/gitops-reverser/watch"
	"github.com/configbutler/gitops-reverser/writeback"
)

// part is a long-running part of the daemon: it runs until ctx ends and returns once everything
// it started has.
type part interface {
	Run(ctx context.Context) error
}

// leaderParts are what runs while this replica leads: the cluster → Git mirror, and beside it the
// admission webhook crediting authors (unless disabled), write-back, the Receivers' webhooks (when
// --receiver-bind-address is set), the operator page (when --ui-bind-address is set) and
// notifications (unless --notifications=false).
type leaderParts struct {
	attr   *attribution // nil without the webhook
	mirror *mirror
	wb     *writeBack
	beside []part        // write-back, then the receivers and the page when they are on
	held   chan struct{} // closed once the files of waiting proposals are held
	crds   *crdInstall   // says when the mirror's kinds, then all kinds, are served
}

// leaderDeps are what the leader's parts are given by the daemon: the fences of their pushes and
// applies (nil without leader election), the shards this replica owns (nil without --shards=auto)
// and the installation of the CRDs they wait for.
type leaderDeps struct {
	fences gitops.Fences
	shards *shard.Set
	crds   *crdInstall
}

// buildLeaderParts builds every part, then connects them; nothing starts, so a failure leaves
// nothing running. Each part is built from what is built before it.
func buildLeaderParts(ctx context.Context, s shared, cfg Config, d leaderDeps) (*leaderParts, error) {
	p := &leaderParts{held: make(chan struct{}), crds: d.crds}
	if cfg.Webhook.Enabled {
		var err error
		var peers func() []string
		if d.shards != nil {
			peers = d.shards.Peers
		}
		if p.attr, err = newAttribution(s, cfg.Webhook, peers); err != nil {
			return nil, err
		}
		p.attr.registeredByLeader = d.shards != nil
	}
	credits := writeback.NewCredits()
	deps := mirrorDeps{
		authors:  creditChain{credits: credits, attr: p.attr},
		fences:   d.fences,
		shards:   d.shards,
		writable: p.held,
		sealer:   newSealer(kube.For(s.dyn, kube.Secrets, s.namespace), cfg.Webhook.ServiceName+"-sops-digest"),
	}
	if p.attr != nil {
		deps.onWatched = p.attr.onWatched
		deps.clusterAuthors = func(cluster string) watch.Authors {
			return clusterAuthors{h: p.attr.remotes, credits: credits, name: cluster}
		}
		deps.clusterAttribution = p.attr.remotes.state
	}
	var err error
	if p.mirror, err = newMirror(ctx, s, cfg.Mirror, deps); err != nil {
		return nil, err
	}
	if p.attr != nil {
		conns, inUse := clusterConns(p.mirror.manager.ClusterConn), p.mirror.manager.ClusterInUse
		p.attr.remotes.conns.Store(&conns)
		p.attr.remotes.inUse.Store(&inUse)
	}
	if p.wb, err = newWriteBack(ctx, s, cfg.WriteBack, writeBackDeps{mirror: p.mirror, attr: p.attr, credits: credits, fences: d.fences, shards: d.shards,
		approverPolicy: cfg.ApproverPolicy, sealName: cfg.Webhook.ServiceName + "-proposal-seal"}); err != nil {
		return nil, err
	}
	p.beside = []part{p.wb}
	var rcv *receivers
	if cfg.Receivers.BindAddress != "" {
		if rcv, err = newReceivers(s, cfg.Receivers, p.wb); err != nil {
			return nil, err
		}
		p.beside = append(p.beside, rcv)
	}
	if cfg.UI.BindAddress != "" {
		page, err := newOperatorPage(s, cfg.UI, p.mirror.pool)
		if err != nil {
			return nil, err
		}
		p.beside = append(p.beside, page)
	}
	if cfg.Notify.Enabled {
		recorders := []*controller.Events{p.mirror.manager.Recorder(), p.wb.ctl.Recorder()}
		if rcv != nil {
			recorders = append(recorders, rcv.ctl.Recorder())
		}
		n, err := newNotifications(s, cfg.Notify, p.mirror.manager.Consents, recorders...)
		if err != nil {
			return nil, err
		}
		p.beside = append(p.beside, n)
	}
	// Connected once both exist: the mirror tells write-back when it wanted to write a held file.
	p.mirror.pool.OnHeldChange(p.wb.ctl.HeldChanged)
	return p, nil
}

// Run runs the parts until ctx ends and every Git worker has flushed. Optional parts degrade
// instead of failing, so only the mirror's own errors end it. The mirror starts once its own kinds
// are served and the files of waiting proposals are held (where write-back is on, once the
// Proposal kind is served); the parts beside it once every CRD is established and the approver
// policies are enforced: the mirror waits for neither. The mirror stops first (it flushes its
// workers), then the parts beside it; attribution last: the mirror reads the correlation store
// until its last watch event.
func (p *leaderParts) Run(ctx context.Context) error {
	inst := p.crds
	errs := make([]error, len(p.beside)+2)
	var wg sync.WaitGroup
	sideCtx, stopSide := context.WithCancel(context.WithoutCancel(ctx))
	if p.attr != nil {
		wg.Go(func() { errs[0] = p.attr.Run(sideCtx) })
	}
	besideCtx, stopBeside := context.WithCancel(ctx)
	defer stopBeside()
	wg.Go(func() { // the mirror writes nothing before the holds, which need only the Proposal kind
		if wait(besideCtx, inst.mirror) {
			p.wb.loadHolds(besideCtx, inst.served)
		}
		close(p.held)
	})
	for i, part := range p.beside {
		wg.Go(func() {
			if wait(besideCtx, inst.all) {
				errs[i+1] = part.Run(besideCtx)
			}
		})
	}
	if wait(ctx, inst.mirror) {
		errs[len(errs)-1] = p.mirror.Run(ctx)
	}
	stopBeside()
	stopSide()
	wg.Wait()
	return errors.Join(errs...)
}
