package lease

import (
	"errors"
	"fmt"
	"sync"
	"time"
)

// Fence says whether this replica may still act on what a Lease guards (push, apply): only while
// it renewed the Lease less than the renew deadline ago, which leaves lease duration − renew
// deadline to spare before another replica may take over; an action is cut off at the end of the
// lease. The Elector of the Lease tells it every write.
type Fence struct {
	renewDeadline, leaseDuration time.Duration
	now                          func() time.Time

	mu      sync.Mutex
	renewed time.Time // when the last successful renewal was sent; zero while not holding
}

// NewFence makes the fence of a Lease held with timings t; it allows nothing until a renewal.
func NewFence(t Timings) *Fence {
	return &Fence{renewDeadline: t.RenewDeadline, leaseDuration: t.LeaseDuration, now: time.Now}
}

// Check says until when this replica may act, or why it may not; it is a gitops.Fence.
func (f *Fence) Check() (time.Time, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.renewed.IsZero() {
		return time.Time{}, errors.New("this replica does not hold the lease")
	}
	if since := f.now().Sub(f.renewed); since >= f.renewDeadline {
		return time.Time{}, renewalLate{since: since, deadline: f.renewDeadline}
	}
	return f.renewed.Add(f.leaseDuration), nil
}

// Holds says whether this replica may act now.
func (f *Fence) Holds() bool {
	_, err := f.Check()
	return err == nil
}

// renewedAt records a successful write of the Lease sent at sent: held is false when the write
// gave the Lease up.
func (f *Fence) renewedAt(sent time.Time, held bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if held {
		f.renewed = sent
	} else {
		f.renewed = time.Time{}
	}
}

// revoke forbids everything until the next successful renewal: the Elector stopped holding.
func (f *Fence) revoke() { f.renewedAt(time.Time{}, false) }

// renewalLate is the Fence's answer while this replica holds the Lease but has not renewed it
// within the renew deadline (a busy machine): whoever asked may ask again, because the Elector
// either renews the Lease, and the Fence allows again, or gives it up, and the Fence says so.
type renewalLate struct{ since, deadline time.Duration }

func (e renewalLate) Error() string {
	return fmt.Sprintf("the lease was last renewed %s ago, beyond the renew deadline of %s",
		e.since.Round(time.Millisecond), e.deadline)
}

// Temporary says that the Lease may still be this replica's: see gitops.Fence.
func (renewalLate) Temporary() bool { return true }
