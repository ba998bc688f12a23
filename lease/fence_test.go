package lease

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// TestFenceAllowsPushesOnlyWithinTheRenewDeadline: a replica may push only while its last
// renewal is younger than the renew deadline, with the push cut off at the end of the lease;
// never before its first renewal, never after it gave the lease up.
func TestFenceAllowsPushesOnlyWithinTheRenewDeadline(t *testing.T) {
	now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	f := &Fence{renewDeadline: 10 * time.Second, leaseDuration: 15 * time.Second, now: func() time.Time { return now }}
	if _, err := f.Check(); err == nil || !strings.Contains(err.Error(), "does not hold") {
		t.Fatalf("before any renewal: err = %v, want refused", err)
	}
	renewed := now
	f.renewedAt(renewed, true)
	now = renewed.Add(9 * time.Second)
	until, err := f.Check()
	if err != nil || !until.Equal(renewed.Add(15*time.Second)) {
		t.Fatalf("9s after renewal: until %v, err %v; want allowed until the lease ends", until, err)
	}
	now = renewed.Add(10 * time.Second)
	_, err = f.Check()
	if err == nil || !strings.Contains(err.Error(), "renew deadline") {
		t.Fatalf("at the renew deadline: err = %v, want refused", err)
	}
	if !temporary(err) {
		t.Errorf("a late renewal is refused for good (%v): the lease may still be this replica's, so a push must wait, not be dropped", err)
	}
	f.renewedAt(now, true)
	if !f.Holds() {
		t.Fatal("a new renewal did not allow pushes again")
	}
	f.renewedAt(now, false) // the write gave the lease up
	if _, err := f.Check(); err == nil || temporary(err) {
		t.Fatalf("after releasing the lease: err = %v, want refused for good", err)
	}
	f.renewedAt(now, true)
	f.revoke()
	if f.Holds() {
		t.Fatal("allowed after the elector stopped leading")
	}
}

// temporary says whether err says the lease may still be held (gitops.Fence's convention).
func temporary(err error) bool {
	var t interface{ Temporary() bool }
	return errors.As(err, &t) && t.Temporary()
}
