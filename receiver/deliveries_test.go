package receiver

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/configbutler/gitops-reverser/testenv"
)

// newFakeClock is a clock the tests move by hand.
func newFakeClock() *testenv.Clock {
	return testenv.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
}

func TestDeliverySeenTwiceWithinTTL(t *testing.T) {
	clock := newFakeClock()
	d := NewDeliveries(10*time.Minute, 100, clock.Now)
	if d.Seen("ns/r", "id-1") {
		t.Fatal("a new delivery is seen")
	}
	clock.Advance(9 * time.Minute)
	if !d.Seen("ns/r", "id-1") {
		t.Fatal("a replay within the TTL is not seen")
	}
	// A replay does not extend the TTL: it runs from the first delivery.
	clock.Advance(time.Minute)
	if d.Seen("ns/r", "id-1") {
		t.Fatal("a delivery is still seen a TTL after it was first recorded")
	}
	if !d.Seen("ns/r", "id-1") {
		t.Fatal("a delivery recorded again after its TTL is not seen")
	}
}

func TestDeliveryIsPerReceiver(t *testing.T) {
	d := NewDeliveries(time.Minute, 100, newFakeClock().Now)
	d.Seen("ns/a", "id")
	if d.Seen("ns/b", "id") {
		t.Error("an id seen by one receiver is seen by another")
	}
	// The key is not a plain concatenation.
	d.Seen("ns/a", "bc")
	if d.Seen("ns/ab", "c") {
		t.Error(`("ns/a","bc") and ("ns/ab","c") are the same delivery`)
	}
}

func TestEmptyDeliveryIsNeverSeen(t *testing.T) {
	d := NewDeliveries(time.Minute, 100, newFakeClock().Now)
	for range 3 {
		if d.Seen("ns/r", "") {
			t.Fatal("an empty delivery id is seen")
		}
	}
	if n := d.seen.Len(); n != 0 {
		t.Errorf("an empty id was recorded (%d entries)", n)
	}
}

func TestDeliveriesEvictOldestWhenFull(t *testing.T) {
	clock := newFakeClock()
	d := NewDeliveries(time.Hour, 3, clock.Now)
	for i := range 4 {
		clock.Advance(time.Second)
		if d.Seen("r", fmt.Sprint(i)) {
			t.Fatalf("new id %d is seen", i)
		}
	}
	// 0 was evicted to make room for 3; 1, 2, 3 are remembered.
	for _, id := range []string{"3", "2", "1"} {
		if !d.Seen("r", id) {
			t.Errorf("id %s is forgotten while the set is not over capacity", id)
		}
	}
	if d.Seen("r", "0") {
		t.Error("the oldest id is still seen after eviction")
	}
	if n := d.seen.Len(); n > 3 {
		t.Errorf("%d ids remembered, capacity 3", n)
	}
}

func TestDeliveriesExpireAndStayBounded(t *testing.T) {
	clock := newFakeClock()
	d := NewDeliveries(time.Minute, 1000, clock.Now)
	for i := range 10_000 {
		d.Seen("r", fmt.Sprint(i))
		clock.Advance(time.Second)
		if n := d.seen.Len(); n > 61 {
			t.Fatalf("after %d ids, %d remembered with a TTL of 60 ids", i, n)
		}
	}
}

func TestDeliveriesClockGoingBack(t *testing.T) {
	clock := newFakeClock()
	d := NewDeliveries(time.Minute, 10, clock.Now)
	d.Seen("r", "a")
	clock.Advance(-time.Hour)
	if !d.Seen("r", "a") {
		t.Error("a delivery is forgotten when the clock goes back")
	}
}

func TestNewDeliveriesDefaults(t *testing.T) {
	d := NewDeliveries(0, 0, nil)
	if d.ttl != DefaultDeliveryTTL || d.now == nil {
		t.Fatalf("defaults: ttl %v", d.ttl)
	}
	if d.Seen("r", "x") || !d.Seen("r", "x") {
		t.Error("with real time, a replay is not seen")
	}
	// The default capacity: full, the next id makes room by forgetting the first.
	for i := range DefaultDeliveryCapacity {
		d.Seen("r", fmt.Sprint(i))
	}
	if n := d.seen.Len(); n != DefaultDeliveryCapacity {
		t.Fatalf("%d ids remembered; want the default capacity, %d", n, DefaultDeliveryCapacity)
	}
	if !d.Seen("r", "1") || d.Seen("r", "x") {
		t.Errorf("at the default capacity %d, the oldest id was kept or the newest dropped", DefaultDeliveryCapacity)
	}
}

// TestDeliveriesConcurrentUse runs under -race: each id is reported new exactly once.
func TestDeliveriesConcurrentUse(t *testing.T) {
	d := NewDeliveries(time.Hour, 10_000, newFakeClock().Now)
	var fresh atomic.Int64
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 500 {
				// Every goroutine offers the same 500 ids, in a different order.
				if !d.Seen("r", fmt.Sprint((i*7+g*13)%500)) {
					fresh.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	if got := fresh.Load(); got != 500 {
		t.Errorf("%d deliveries were new, want 500", got)
	}
}
