package daemon

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/configbutler/gitops-reverser/gitops"
	"github.com/configbutler/gitops-reverser/kube"
	"github.com/configbutler/gitops-reverser/lease"
	"github.com/configbutler/gitops-reverser/metrics"
)

// leadership runs the daemon's work only while this replica holds the leader Lease, and stands by
// otherwise. While it leads it labels its own Pod (leaderLabel), which the webhook and receiver
// Services select; stepping down it removes the label first, then stops the work, then releases
// the Lease, so a graceful stop hands over at once and its last push still holds the lease. A
// replica that lost the Lease stands by again.
type leadership struct {
	cfg      LeaderConfig
	podNS    string // the namespace of this replica's Pod: the daemon's
	work     lead   // what runs while this replica leads
	identity string
	leases   *kube.Client[coordinationv1.Lease] // its own client, see newLeadership
	fence    *lease.Fence
	pods     *podLabels // nil without --pod-name
	gauge    prometheus.Gauge
	optional *optionalParts
	log      *slog.Logger

	leader atomic.Pointer[string] // the holder last observed, for /readyz
}

// lead is the work of a leader, with the fence of its pushes.
type lead func(ctx context.Context, fence gitops.Fence) error

func newLeadership(s shared, cfg LeaderConfig, identity string, work lead) (*leadership, error) {
	leases, err := leaseClient(s, cfg)
	if err != nil {
		return nil, err
	}
	fence := lease.NewFence(cfg.timings())
	l := &leadership{
		cfg: cfg, podNS: s.namespace, work: work, identity: identity, fence: fence, leases: leases, gauge: s.reg.Health.Leader, optional: s.optional,
		log: s.log.With("lease", cfg.Namespace+"/"+cfg.ID, "identity", identity),
	}
	if cfg.PodName != "" {
		l.pods = &podLabels{pods: kube.For(s.dyn, kube.Pods, s.namespace), own: cfg.PodName}
		s.optional.track(metrics.PartLeaderLabel, "the webhook and receiver Services do not route to the leader: changes are credited to "+
			s.bot.Name+" and Git host webhooks are not answered")
	}
	l.gauge.Set(0)
	return l, nil
}

// leaseClient is a client of the Leases of leader election (and of the shards): its own, so
// renewals never wait behind the mirror's requests in a rate limiter.
func leaseClient(s shared, cfg LeaderConfig) (*kube.Client[coordinationv1.Lease], error) {
	lc := rest.CopyConfig(s.kube)
	lc.Timeout = cfg.RenewDeadline
	dyn, err := dynamic.NewForConfig(lc)
	if err != nil {
		return nil, fmt.Errorf("build leases client: %w", err)
	}
	return kube.For(dyn, kube.Leases, cfg.Namespace), nil
}

// leaderIdentity names this process in the Lease: its Pod (or host) and a random suffix, so two
// processes on one host, or a restarted container, are never taken for each other.
func leaderIdentity(podName string) string {
	name := podName
	if name == "" {
		name, _ = os.Hostname()
	}
	suffix := make([]byte, 4)
	_, _ = rand.Read(suffix)
	return name + "_" + hex.EncodeToString(suffix)
}

// Run stands by, and runs work while this replica leads, until ctx ends or work fails. It
// returns work's error; losing the Lease is not an error (the replica stands by again).
func (l *leadership) Run(ctx context.Context) error {
	l.stepDownLabel(ctx) // a restarted container keeps its Pod's labels: a standby must not receive webhooks
	for ctx.Err() == nil {
		if err := l.term(ctx); err != nil {
			return err
		}
	}
	return nil
}

// term waits for the Lease, then runs work until ctx ends or the Lease is lost.
func (l *leadership) term(ctx context.Context) error {
	// The elector outlives ctx: on SIGTERM the work stops first (its last push holds the lease),
	// and only then is the Lease released.
	electCtx, stopElect := context.WithCancel(context.WithoutCancel(ctx))
	var background sync.WaitGroup // the elector and the watch of the Lease: both end with electCtx
	defer background.Wait()
	defer stopElect()
	started := make(chan context.Context, 1)
	candidate := &lease.Elector{Leases: l.leases, Name: l.cfg.ID, Timings: l.cfg.timings(), Identity: l.identity, Fence: l.fence, OnNewHolder: l.observe, Log: l.log}
	electorDone := make(chan struct{})
	background.Go(func() {
		defer close(electorDone)
		candidate.Run(electCtx, started)
	})
	l.log.Info("standing by for the leader lease")
	released := make(chan struct{})
	background.Go(func() { l.watchRelease(electCtx, released) })
	var leadCtx context.Context
	select {
	case <-ctx.Done():
		stopElect()
		<-electorDone
		return nil
	case <-electorDone:
		return nil // cannot happen before leading unless electCtx ended
	case <-released:
		// The leader let go (a graceful stop): a new elector tries at once instead of at the
		// next retry.
		stopElect()
		<-electorDone
		return nil
	case leadCtx = <-started:
	}

	l.log.Info("leading")
	l.gauge.Set(1)
	workCtx, stopWork := context.WithCancel(context.WithoutCancel(ctx))
	var wg sync.WaitGroup
	wg.Go(func() {
		select {
		case <-ctx.Done():
		case <-leadCtx.Done():
			l.log.Warn("lost the leader lease; stopping, then standing by")
		}
		l.stepDownLabel(ctx) // first: the Services stop sending webhooks here
		stopWork()
	})
	wg.Go(func() { l.labelAsLeader(workCtx) })
	err := l.work(workCtx, l.fence.Check)
	stopWork()
	wg.Wait()
	l.gauge.Set(0)
	stopElect() // releases the Lease if this replica still holds it
	<-electorDone
	l.log.Info("stopped leading")
	return err
}

// watchRelease closes released when the Lease is given up (an update that leaves no holder), so
// a standby takes over within moments of a graceful stop. A Lease that is already released when
// the watch starts is not reported: the elector takes it at its first try, and reporting it would
// restart the elector before it could. It watches again when the apiserver ends a watch, until
// ctx ends; without a watch (no permission) it returns, and the standby finds out at its next retry.
func (l *leadership) watchRelease(ctx context.Context, released chan<- struct{}) {
	for {
		w, err := l.leases.Watch(ctx, metav1.ListOptions{
			FieldSelector: fields.OneTermEqualSelector("metadata.name", l.cfg.ID).String(),
		})
		if err != nil {
			l.log.Debug("cannot watch the leader lease; a released lease is noticed at the next retry", "err", err)
			return
		}
		for ev := range w.ResultChan() {
			if ev.Type != watch.Modified {
				continue
			}
			got, err := kube.Convert[coordinationv1.Lease](ev.Object)
			if err == nil && lease.HolderOf(got.Spec) == "" {
				w.Stop()
				close(released)
				return
			}
		}
		w.Stop()
		select {
		case <-ctx.Done():
			return
		case <-time.After(l.cfg.RetryPeriod): // the apiserver ended the watch; not in a tight loop
		}
	}
}

// observe records the holder of the Lease each time it changes.
func (l *leadership) observe(identity string) {
	l.leader.Store(&identity)
	if identity != l.identity {
		l.log.Info("new leader observed", "leader", identity)
	}
}

// role is this replica's line on /readyz.
func (l *leadership) role() string {
	if l.fence.Holds() {
		return "leader (lease " + l.cfg.Namespace + "/" + l.cfg.ID + ")"
	}
	leader := "none yet"
	if p := l.leader.Load(); p != nil && *p != "" && *p != l.identity {
		leader = *p
	}
	if l.cfg.Shards { // this replica works on its shards; only the cluster-wide work is the leader's
		return "not the leader: the cluster-wide work is done by " + leader + " (lease " + l.cfg.Namespace + "/" + l.cfg.ID + ")"
	}
	return "standby: the leader is " + leader + " (lease " + l.cfg.Namespace + "/" + l.cfg.ID + ")"
}

// labelAsLeader labels this replica's Pod, then takes the label off any other Pod that still
// carries it (a leader that was killed cannot remove its own), retrying until it works or ctx ends.
// Without --pod-name there is no Pod to label.
func (l *leadership) labelAsLeader(ctx context.Context) {
	if l.pods == nil {
		return
	}
	if !l.optional.retry(ctx, metrics.PartLeaderLabel, func() (problem, bool) {
		err := l.pods.lead(ctx)
		return problem{
			what: "label the leader's Pod " + l.podNS + "/" + l.cfg.PodName + ": " + fmt.Sprint(err),
			fix:  "grant the daemon list and patch on pods in its namespace (deploy/rbac.yaml, the Helm chart), and set --" + keyPodName + " to its Pod's name",
		}, err == nil
	}) {
		return
	}
	l.optional.fine(metrics.PartLeaderLabel)
	l.log.Info("labelled the leader's Pod", "pod", l.cfg.PodName, "label", leaderLabel)
}

// stepDownLabel takes the label off this replica's Pod: one bounded attempt; should it fail, the
// next leader takes it off.
func (l *leadership) stepDownLabel(ctx context.Context) {
	if l.pods == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := l.pods.standBy(ctx); err != nil {
		l.log.Warn("could not remove the leader label from this replica's Pod; the next leader removes it", "pod", l.cfg.PodName, "err", err)
	}
}
