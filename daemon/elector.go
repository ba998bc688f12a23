package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/configbutler/gitops-reverser/kube"
)

// retryJitter stretches each wait between two tries to take the Lease by up to 120%, as client-go's
// leader election does, so standbys that started together do not ask together.
const retryJitter = 1.2

// errHeld says another replica holds the Lease, and its record changed less than its lease duration
// ago by this replica's clock.
var errHeld = errors.New("the leader lease is held by another replica")

// elector is one term's candidacy for the leader Lease: client-go's leader election
// (tools/leaderelection with a Lease lock and ReleaseOnCancel), over kube's Lease client, which does
// not link client-go's typed clientsets. It tries to take the Lease every retry period (jittered)
// until it does; then it renews it every retry period until a round of tries finds no success
// within the renew deadline, or ctx ends; then it gives the Lease up if it still holds it. Every
// successful write is told to the fence. Its state belongs to the goroutine of Run.
type elector struct {
	leases      *kube.Client[coordinationv1.Lease]
	cfg         LeaderConfig
	identity    string
	fence       *leaseFence
	onNewLeader func(identity string) // told each time the observed holder changes
	log         *slog.Logger

	lease      *coordinationv1.Lease     // as last read or written: what the next write updates
	read       *coordinationv1.LeaseSpec // the record as last read, to notice that it changed
	observed   coordinationv1.LeaseSpec  // the record last read changed, or last written…
	observedAt time.Time                 // …and when, by this replica's clock
	reported   string                    // the holder last told to onNewLeader
}

// Run takes the Lease, sends leading (which must have room for it) a context that ends when this
// replica stops leading, and renews the Lease until a renewal fails or ctx ends; then it releases
// the Lease, ends that context and revokes the fence. Without the Lease it returns when ctx ends.
func (e *elector) Run(ctx context.Context, leading chan<- context.Context) {
	defer e.fence.revoke()
	if !e.acquire(ctx) {
		return
	}
	leadCtx, stop := context.WithCancel(ctx)
	defer stop()
	leading <- leadCtx
	e.renew(leadCtx)
	e.release(ctx)
}

// acquire tries to take the Lease at once, then after every retry period stretched by up to
// retryJitter, until it does (true) or ctx ends (false).
func (e *elector) acquire(ctx context.Context) bool {
	for ctx.Err() == nil {
		err := e.tryAcquireOrRenew(ctx)
		e.reportTransition()
		if err == nil {
			return true
		}
		e.failed(ctx, "cannot take the leader lease", err)
		if !sleep(ctx, e.cfg.RetryPeriod+time.Duration(rand.Float64()*retryJitter*float64(e.cfg.RetryPeriod))) {
			return false
		}
	}
	return false
}

// renew renews the Lease every retry period until a round of tries fails or ctx ends.
func (e *elector) renew(ctx context.Context) {
	for {
		err := e.renewRound(ctx)
		e.reportTransition()
		if err != nil {
			if ctx.Err() == nil {
				e.log.Info("no renewal of the leader lease succeeded within the renew deadline", "renewDeadline", e.cfg.RenewDeadline, "err", err)
			}
			return
		}
		if !sleep(ctx, e.cfg.RetryPeriod) {
			return
		}
	}
}

// renewRound tries to renew the Lease at once, then every retry period, until a try succeeds or
// the renew deadline has passed since the round began; it returns the last try's error.
func (e *elector) renewRound(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, e.cfg.RenewDeadline)
	defer cancel()
	tick := time.NewTicker(e.cfg.RetryPeriod)
	defer tick.Stop()
	err := ctx.Err()
	for err == nil {
		if err = e.tryAcquireOrRenew(ctx); err == nil {
			return nil
		}
		e.failed(ctx, "cannot renew the leader lease", err)
		select {
		case <-ctx.Done():
		case <-tick.C:
			err = nil
		}
	}
	return err
}

// tryAcquireOrRenew writes this replica into the Lease as its holder, once: nil when it did. The
// holder renews the Lease it last wrote without reading it first. Otherwise it reads the Lease and
// creates it when there is none; a holder other than this replica keeps it while its record
// changed less than its lease duration ago, as this replica saw it (errHeld). Renewing keeps the
// acquire time and the count of transitions; taking over counts one more. Every update is at the
// resourceVersion read, so of two replicas trying at once only one succeeds.
func (e *elector) tryAcquireOrRenew(ctx context.Context) error {
	now := time.Now()
	spec := leaseSpec(e.identity, int32(e.cfg.LeaseDuration/time.Second), now, now, 0)
	if e.leads() && e.valid(now) {
		spec.AcquireTime, spec.LeaseTransitions = e.observed.AcquireTime, e.observed.LeaseTransitions
		err := e.write(ctx, e.lease, spec)
		if err == nil {
			return nil
		}
		e.log.Debug("could not renew the leader lease as last written; reading it", "err", err)
	}
	got, err := e.leases.Get(ctx, e.cfg.ID, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return e.write(ctx, nil, spec)
	}
	if err != nil {
		return fmt.Errorf("read the leader lease: %w", err)
	}
	e.lease = got
	if e.read == nil || !equality.Semantic.DeepEqual(*e.read, got.Spec) {
		e.read = &got.Spec
		e.observed, e.observedAt = got.Spec, time.Now()
	}
	if holderOf(e.observed) != "" && e.valid(now) && !e.leads() {
		return errHeld
	}
	if e.leads() {
		spec.AcquireTime, spec.LeaseTransitions = e.observed.AcquireTime, e.observed.LeaseTransitions
	} else {
		spec.LeaseTransitions = new(transitionsOf(e.observed) + 1)
	}
	return e.write(ctx, got, spec)
}

// release gives the Lease up if this replica holds it, as client-go's ReleaseOnCancel does: no
// holder and a lease duration of one second, so that a standby takes it at its next try. It runs
// after ctx ended, bounded by the renew deadline.
func (e *elector) release(ctx context.Context) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), e.cfg.RenewDeadline)
	defer cancel()
	got, err := e.leases.Get(ctx, e.cfg.ID, metav1.GetOptions{})
	if err != nil {
		e.log.Warn("could not release the leader lease; a standby takes it when it expires", "err", err)
		return
	}
	if !e.leads() {
		return
	}
	now := time.Now()
	if err := e.write(ctx, got, leaseSpec("", 1, now, now, transitionsOf(got.Spec))); err != nil {
		e.log.Warn("could not release the leader lease; a standby takes it when it expires", "err", err)
		return
	}
	e.log.Debug("released the leader lease")
}

// write creates the Lease (base nil) or updates base, at its resourceVersion, to spec, and
// records spec as observed. The fence is told of a success, with the time taken just before the
// write was sent: a standby cannot have seen the write earlier, so it cannot take the Lease before
// that moment + the lease duration.
func (e *elector) write(ctx context.Context, base *coordinationv1.Lease, spec coordinationv1.LeaseSpec) error {
	sent := e.fence.now()
	var got *coordinationv1.Lease
	var err error
	if base == nil {
		lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: e.cfg.Namespace, Name: e.cfg.ID}, Spec: spec}
		got, err = e.leases.Create(ctx, lease, metav1.CreateOptions{})
	} else {
		lease := base.DeepCopy()
		lease.Spec = spec
		got, err = e.leases.Update(ctx, lease, metav1.UpdateOptions{})
	}
	if err != nil {
		return fmt.Errorf("write the leader lease: %w", err)
	}
	e.lease = got
	e.fence.renewedAt(sent, holderOf(spec) == e.identity)
	e.observed, e.observedAt = spec, time.Now()
	return nil
}

// leads says whether the record last observed names this replica as the holder.
func (e *elector) leads() bool { return holderOf(e.observed) == e.identity }

// valid says whether the record last observed is younger than its lease duration at now.
func (e *elector) valid(now time.Time) bool {
	var seconds int32
	if e.observed.LeaseDurationSeconds != nil {
		seconds = *e.observed.LeaseDurationSeconds
	}
	return e.observedAt.Add(time.Duration(seconds) * time.Second).After(now)
}

// reportTransition tells onNewLeader of the observed holder when it is not the one last told.
func (e *elector) reportTransition() {
	if holder := holderOf(e.observed); holder != e.reported {
		e.reported = holder
		e.onNewLeader(holder)
	}
}

// failed logs a try that failed: the apiserver's refusals as warnings, while ctx lasts; a Lease held
// by another replica, and races with another replica's write, only for debugging.
func (e *elector) failed(ctx context.Context, msg string, err error) {
	switch {
	case ctx.Err() != nil:
	case errors.Is(err, errHeld) || apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err):
		e.log.Debug(msg, "err", err)
	default:
		e.log.Warn(msg, "err", err)
	}
}

// leaseSpec is the record a write leaves in the Lease.
func leaseSpec(holder string, seconds int32, acquired, renewed time.Time, transitions int32) coordinationv1.LeaseSpec {
	return coordinationv1.LeaseSpec{
		HolderIdentity:       &holder,
		LeaseDurationSeconds: &seconds,
		AcquireTime:          &metav1.MicroTime{Time: acquired},
		RenewTime:            &metav1.MicroTime{Time: renewed},
		LeaseTransitions:     &transitions,
	}
}

// holderOf is the holder a Lease's record names, "" for none.
func holderOf(spec coordinationv1.LeaseSpec) string {
	if spec.HolderIdentity == nil {
		return ""
	}
	return *spec.HolderIdentity
}

// transitionsOf is how often a Lease's record says the Lease changed hands.
func transitionsOf(spec coordinationv1.LeaseSpec) int32 {
	if spec.LeaseTransitions == nil {
		return 0
	}
	return *spec.LeaseTransitions
}

// sleep waits d, and says false when ctx ended first.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
