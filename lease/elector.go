// Package lease holds coordination.k8s.io Leases for this replica, as client-go's leader election
// does (tools/leaderelection with a Lease lock and ReleaseOnCancel) but over package kube's Lease
// client: an Elector takes, renews and releases one Lease, and its Fence says whether this replica
// may still act on what the Lease guards. The daemon's leader election and its shards both use it.
package lease

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
var errHeld = errors.New("the lease is held by another replica")

// Timings are how long a Lease is held without renewal (LeaseDuration), how long its holder keeps
// trying to renew it before it gives up (RenewDeadline), and how often it tries (RetryPeriod).
type Timings struct {
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
}

// Elector is one term's candidacy for a Lease. It tries to take the Lease every retry period
// (jittered) until it does; then it renews it every retry period until a round of tries finds no
// success within the renew deadline, or ctx ends; then it gives the Lease up if it still holds it.
// Every successful write is told to the fence. Its state belongs to the goroutine of Run.
type Elector struct {
	Leases   *kube.Client[coordinationv1.Lease] // of the Lease's namespace
	Name     string                             // of the Lease
	Timings  Timings
	Identity string // this replica, as the Lease names its holder
	Fence    *Fence
	// OnNewHolder, if set, is told each time the observed holder changes.
	OnNewHolder func(identity string)
	// Labels and Annotations are set on the Lease by every write, so others can find it and read
	// what it guards.
	Labels, Annotations map[string]string
	// Known, if set, is the Lease's record as the caller saw it last change, and when: a record
	// still the same when the Elector first reads it has been unchanged since then, so an expired
	// holder is taken over without waiting a whole lease duration more.
	Known *Record
	Log   *slog.Logger

	lease      *coordinationv1.Lease     // as last read or written: what the next write updates
	read       *coordinationv1.LeaseSpec // the record as last read, to notice that it changed
	observed   coordinationv1.LeaseSpec  // the record last read changed, or last written…
	observedAt time.Time                 // …and when, by this replica's clock
	reported   string                    // the holder last told to OnNewHolder
}

// Record is a Lease's record as seen to change at At, by this replica's clock.
type Record struct {
	Spec coordinationv1.LeaseSpec
	At   time.Time
}

// Valid says whether the record names a holder and is younger than its lease duration at now.
func (r Record) Valid(now time.Time) bool {
	return HolderOf(r.Spec) != "" && r.At.Add(durationOf(r.Spec)).After(now)
}

// Run takes the Lease, sends leading (which must have room for it) a context that ends when this
// replica stops leading, and renews the Lease until a renewal fails or ctx ends; then it releases
// the Lease, ends that context and revokes the fence. Without the Lease it returns when ctx ends.
func (e *Elector) Run(ctx context.Context, leading chan<- context.Context) {
	defer e.Fence.revoke()
	if e.Known != nil {
		e.read = &e.Known.Spec
		e.observed, e.observedAt = e.Known.Spec, e.Known.At
	}
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
func (e *Elector) acquire(ctx context.Context) bool {
	for ctx.Err() == nil {
		err := e.tryAcquireOrRenew(ctx)
		e.reportTransition()
		if err == nil {
			return true
		}
		e.failed(ctx, "cannot take the lease", err)
		if !sleep(ctx, e.Timings.RetryPeriod+time.Duration(rand.Float64()*retryJitter*float64(e.Timings.RetryPeriod))) {
			return false
		}
	}
	return false
}

// renew renews the Lease every retry period until a round of tries fails or ctx ends.
func (e *Elector) renew(ctx context.Context) {
	for {
		err := e.renewRound(ctx)
		e.reportTransition()
		if err != nil {
			if ctx.Err() == nil {
				e.Log.Info("no renewal of the lease succeeded within the renew deadline", "renewDeadline", e.Timings.RenewDeadline, "err", err)
			}
			return
		}
		if !sleep(ctx, e.Timings.RetryPeriod) {
			return
		}
	}
}

// renewRound tries to renew the Lease at once, then every retry period, until a try succeeds or
// the renew deadline has passed since the round began; it returns the last try's error.
func (e *Elector) renewRound(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, e.Timings.RenewDeadline)
	defer cancel()
	tick := time.NewTicker(e.Timings.RetryPeriod)
	defer tick.Stop()
	err := ctx.Err()
	for err == nil {
		if err = e.tryAcquireOrRenew(ctx); err == nil {
			return nil
		}
		e.failed(ctx, "cannot renew the lease", err)
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
func (e *Elector) tryAcquireOrRenew(ctx context.Context) error {
	now := time.Now()
	spec := leaseSpec(e.Identity, int32(e.Timings.LeaseDuration/time.Second), now, now, 0)
	if e.leads() && e.valid(now) {
		spec.AcquireTime, spec.LeaseTransitions = e.observed.AcquireTime, e.observed.LeaseTransitions
		err := e.write(ctx, e.lease, spec)
		if err == nil {
			return nil
		}
		e.Log.Debug("could not renew the lease as last written; reading it", "err", err)
	}
	got, err := e.Leases.Get(ctx, e.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return e.write(ctx, nil, spec)
	}
	if err != nil {
		return fmt.Errorf("read lease %s: %w", e.Name, err)
	}
	e.lease = got
	if e.read == nil || !equality.Semantic.DeepEqual(*e.read, got.Spec) {
		e.read = &got.Spec
		e.observed, e.observedAt = got.Spec, time.Now()
	}
	if HolderOf(e.observed) != "" && e.valid(now) && !e.leads() {
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
func (e *Elector) release(ctx context.Context) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), e.Timings.RenewDeadline)
	defer cancel()
	got, err := e.Leases.Get(ctx, e.Name, metav1.GetOptions{})
	if err != nil {
		e.Log.Warn("could not release the lease; another replica takes it when it expires", "err", err)
		return
	}
	if !e.leads() {
		return
	}
	now := time.Now()
	if err := e.write(ctx, got, leaseSpec("", 1, now, now, transitionsOf(got.Spec))); err != nil {
		e.Log.Warn("could not release the lease; another replica takes it when it expires", "err", err)
		return
	}
	e.Log.Debug("released the lease")
}

// write creates the Lease (base nil) or updates base, at its resourceVersion, to spec, and
// records spec as observed. The fence is told of a success, with the time taken just before the
// write was sent: a standby cannot have seen the write earlier, so it cannot take the Lease before
// that moment + the lease duration.
func (e *Elector) write(ctx context.Context, base *coordinationv1.Lease, spec coordinationv1.LeaseSpec) error {
	sent := e.Fence.now()
	var got *coordinationv1.Lease
	var err error
	if base == nil {
		lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: e.Name}, Spec: spec}
		e.stamp(&lease.ObjectMeta)
		got, err = e.Leases.Create(ctx, lease, metav1.CreateOptions{})
	} else {
		lease := base.DeepCopy()
		lease.Spec = spec
		e.stamp(&lease.ObjectMeta)
		got, err = e.Leases.Update(ctx, lease, metav1.UpdateOptions{})
	}
	if err != nil {
		return fmt.Errorf("write lease %s: %w", e.Name, err)
	}
	e.lease = got
	e.Fence.renewedAt(sent, HolderOf(spec) == e.Identity)
	e.observed, e.observedAt = spec, time.Now()
	return nil
}

// stamp sets the Elector's labels and annotations on the Lease about to be written.
func (e *Elector) stamp(m *metav1.ObjectMeta) {
	for k, v := range e.Labels {
		metav1.SetMetaDataLabel(m, k, v)
	}
	for k, v := range e.Annotations {
		metav1.SetMetaDataAnnotation(m, k, v)
	}
}

// leads says whether the record last observed names this replica as the holder.
func (e *Elector) leads() bool { return HolderOf(e.observed) == e.Identity }

// valid says whether the record last observed is younger than its lease duration at now.
func (e *Elector) valid(now time.Time) bool {
	return e.observedAt.Add(durationOf(e.observed)).After(now)
}

// durationOf is how long a Lease's record says it is held without renewal.
func durationOf(spec coordinationv1.LeaseSpec) time.Duration {
	if spec.LeaseDurationSeconds == nil {
		return 0
	}
	return time.Duration(*spec.LeaseDurationSeconds) * time.Second
}

// reportTransition tells onNewLeader of the observed holder when it is not the one last told.
func (e *Elector) reportTransition() {
	if holder := HolderOf(e.observed); holder != e.reported {
		e.reported = holder
		if e.OnNewHolder != nil {
			e.OnNewHolder(holder)
		}
	}
}

// failed logs a try that failed: the apiserver's refusals as warnings, while ctx lasts; a Lease held
// by another replica, and races with another replica's write, only for debugging.
func (e *Elector) failed(ctx context.Context, msg string, err error) {
	switch {
	case ctx.Err() != nil:
	case errors.Is(err, errHeld) || apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err):
		e.Log.Debug(msg, "err", err)
	default:
		e.Log.Warn(msg, "err", err)
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
func HolderOf(spec coordinationv1.LeaseSpec) string {
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
