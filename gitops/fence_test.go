package gitops

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/configbutler/gitops-reverser/testenv"
)

// leaseFence is a fence a test opens and closes, as losing and regaining a lease would.
type leaseFence struct{ held atomic.Bool }

func (f *leaseFence) check() (time.Time, error) {
	if !f.held.Load() {
		return time.Time{}, errors.New("lease held by another replica")
	}
	return time.Now().Add(time.Minute), nil
}

// TestFencedPushIsDroppedWithItsCommits: while the fence refuses, a push is dropped with its
// commits (the leader writes those changes), Flush says why, nothing reaches the remote, and the
// worker is not left retrying; once the fence allows again, new changes are pushed on the remote's tip.
func TestFencedPushIsDroppedWithItsCommits(t *testing.T) {
	srv := MustGitServer(t)
	fence := &leaseFence{}
	fence.held.Store(true)
	w := StartWorker(t, MustRepo(t, srv, "fenced"), "", BatchLimits{}, func(c *WorkerConfig) { c.Fence = fence.check })
	MustEnqueue(t, w, Change{Path: cmPath("a"), Content: configMap("a", "1", 100)})
	MustFlush(t, w)

	fence.held.Store(false)
	MustEnqueue(t, w, Change{Path: cmPath("b"), Content: configMap("b", "1", 100)})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := w.Flush(ctx); !errors.Is(err, ErrFenced) {
		t.Fatalf("flush while fenced: err = %v, want ErrFenced", err)
	}
	if got := testenv.MustFiles(t, srv, "fenced"); !slices.Equal(got, []string{cmPath("a")}) {
		t.Fatalf("a fenced push reached the remote: files %v", got)
	}
	if got := w.metric(t, "pushes_fenced_total"); got != 1 {
		t.Errorf("pushes_fenced_total = %v, want 1", got)
	}
	if st := w.Status(); st.Pending != 0 {
		t.Errorf("fenced commits still pending: %+v", st)
	}

	fence.held.Store(true)
	MustEnqueue(t, w, Change{Path: cmPath("c"), Content: configMap("c", "1", 100)})
	MustFlush(t, w)
	if got, want := testenv.MustFiles(t, srv, "fenced"), []string{cmPath("a"), cmPath("c")}; !slices.Equal(got, want) {
		t.Fatalf("files = %v, want %v (b dropped)", got, want)
	}
	testenv.MustFsck(t, srv, "fenced")
}

// TestFencedLastPushAtStopSendsNothing: the last push a stopping worker makes is fenced too, so a
// replica that lost its lease and shuts down pushes nothing.
func TestFencedLastPushAtStopSendsNothing(t *testing.T) {
	srv := MustGitServer(t)
	fence := &leaseFence{}
	fence.held.Store(true)
	w := StartWorker(t, MustRepo(t, srv, "stop"), "", BatchLimits{MaxWait: time.Hour, Quiet: time.Hour},
		func(c *WorkerConfig) { c.Fence = fence.check })
	MustEnqueue(t, w, Change{Path: cmPath("a"), Content: configMap("a", "1", 100)})
	MustFlush(t, w)
	before := testenv.MustLog(t, srv, "stop")

	MustEnqueue(t, w, Change{Path: cmPath("late"), Content: configMap("late", "1", 100)})
	fence.held.Store(false)
	if err := w.stop(); err != nil {
		t.Fatalf("stop: %v", err)
	}
	after := testenv.MustLog(t, srv, "stop")
	if len(after) != len(before) || after[0].SHA != before[0].SHA {
		t.Fatalf("the stopping worker pushed although fenced: %d commits before, %d after", len(before), len(after))
	}
	if got := w.metric(t, "pushes_fenced_total"); got != 1 {
		t.Errorf("pushes_fenced_total = %v, want 1", got)
	}
}

// lateRenewal is a fence's answer while the lease's renewal is late: the lease may still be held.
type lateRenewal struct{}

func (lateRenewal) Error() string {
	return "the lease was last renewed 4.2s ago, beyond the renew deadline of 4s"
}
func (lateRenewal) Temporary() bool { return true }

// TestAPushWaitsOutALateLeaseRenewal: on a busy machine a lease's renewal can come late, and the
// fence then cannot say whether this replica still holds it. A push is held back and sent once the
// renewal lands, without a new change: dropped, its changes would be lost, since this replica keeps
// the shard and nobody writes them again. Seen failing: b never reached the remote, and
// pushes_fenced_total counted a drop (BenchmarkShardThroughput found such a lost update).
func TestAPushWaitsOutALateLeaseRenewal(t *testing.T) {
	srv := MustGitServer(t)
	var late atomic.Bool
	var asked atomic.Int64
	fence := func() (time.Time, error) {
		asked.Add(1)
		if late.Load() {
			return time.Time{}, lateRenewal{}
		}
		return time.Now().Add(time.Minute), nil
	}
	w := StartWorker(t, MustRepo(t, srv, "late"), "", BatchLimits{}, func(c *WorkerConfig) { c.Fence = fence })
	MustEnqueue(t, w, Change{Path: cmPath("a"), Content: configMap("a", "1", 100)})
	MustFlush(t, w)

	late.Store(true)
	before := asked.Load()
	MustEnqueue(t, w, Change{Path: cmPath("b"), Content: configMap("b", "1", 100)})
	testenv.Eventually(t, 30*time.Second, "the push to ask the fence again", func() (bool, string) {
		return asked.Load() >= before+3, fmt.Sprintf("asked %d times", asked.Load()-before)
	})
	if got := testenv.MustFiles(t, srv, "late"); !slices.Equal(got, []string{cmPath("a")}) {
		t.Fatalf("pushed while the fence refused: files %v", got)
	}

	late.Store(false) // the renewal landed
	testenv.Eventually(t, 30*time.Second, "b on the remote without a new change", func() (bool, string) {
		got := testenv.MustFiles(t, srv, "late")
		return slices.Equal(got, []string{cmPath("a"), cmPath("b")}), fmt.Sprint(got)
	})
	if got := w.metric(t, "pushes_fenced_total"); got != 0 {
		t.Errorf("pushes_fenced_total = %v, want 0: nothing was dropped", got)
	}
	testenv.MustFsck(t, srv, "late")
}
