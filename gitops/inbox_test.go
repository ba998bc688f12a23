package gitops

import (
	"fmt"
	"testing"
	"time"

	"github.com/configbutler/gitops-reverser/testenv"
)

// TestEnqueueNeverBlocksWhileTheRemoteHangs holds the worker in a push to a remote that accepts
// the connection and never answers, and enqueues far more changes than any queue would hold:
// every call returns, what waits is bounded by coalescing per path (counted), and once the
// remote answers again the branch holds the latest content of every path.
func TestEnqueueNeverBlocksWhileTheRemoteHangs(t *testing.T) {
	srv, w := stuckInAPush(t, "hang", BatchLimits{Quiet: 10 * time.Millisecond})

	const paths, changes = 50, 6 * maxInboxItems
	want := map[string]string{
		cmPath("first"): testenv.BlobHash(configMap("first", "0", 100)),
		cmPath("stuck"): testenv.BlobHash(configMap("stuck", "0", 100)),
	}
	returned := make(chan struct{})
	go func() {
		defer close(returned)
		for i := range changes {
			name := fmt.Sprintf("cm-%02d", i%paths)
			c := Change{Path: cmPath(name), Content: configMap(name, fmt.Sprint(i), 100), Credit: Credit{Author: testAlice}}
			if err := w.Enqueue(c); err != nil {
				t.Error(err)
				return
			}
			want[c.Path] = testenv.BlobHash(c.Content)
		}
	}()
	select {
	case <-returned:
	case <-time.After(time.Minute):
		t.Fatal("Enqueue blocked while the remote hangs")
	}
	if depth := w.in.depth(); depth > 2*maxInboxItems {
		t.Errorf("%d changes wait in the inbox, want at most %d: it must be bounded", depth, 2*maxInboxItems)
	}
	if got := w.metric(t, "repo_branch_queue_coalesced_total"); got == 0 {
		t.Error("the inbox passed its bound without counting a coalescing")
	}

	srv.SetHanging(false)
	MustFlush(t, w)
	mustTree(t, srv, "hang", "main", want)
	if s := w.Status(); s.Coalesced == 0 || s.Pending != 0 {
		t.Errorf("status after the stall = %+v, want coalescings counted and nothing pending", s)
	}
	testenv.MustFsck(t, srv, "hang")
}

// TestSingleChangeAfterIdleDoesNotWaitForTheQuietPeriod: with an hour of quiet period and two
// of max wait, a lone change still reaches the remote at once; batching is for streams.
func TestSingleChangeAfterIdleDoesNotWaitForTheQuietPeriod(t *testing.T) {
	srv := MustGitServer(t)
	w := StartWorker(t, MustRepo(t, srv, "idle"), "", BatchLimits{Quiet: time.Hour, MaxWait: 2 * time.Hour})
	MustEnqueue(t, w, Change{Path: cmPath("lone"), Content: configMap("lone", "1", 100)})
	testenv.Eventually(t, 30*time.Second, "the lone change on the remote without a flush", func() (bool, string) {
		files := testenv.MustFiles(t, srv, "idle")
		return len(files) == 1, fmt.Sprint(files)
	})
}

func TestQuietPeriodAdaptsToTheGapBetweenChanges(t *testing.T) {
	limits := BatchLimits{Quiet: 1500 * time.Millisecond}.withDefaults()
	start := time.Unix(1_000_000, 0)
	cases := []struct {
		name string
		gaps []time.Duration // since the previous change; the first follows a long idle spell
		want time.Duration   // the quiet period after the last change
	}{
		{"a lone change after idle", []time.Duration{time.Hour}, DefaultIdleQuiet},
		{"a burst", []time.Duration{time.Hour, 3 * time.Millisecond, 3 * time.Millisecond}, DefaultIdleQuiet},
		{"a steady stream every 200 ms", []time.Duration{time.Hour, 200 * time.Millisecond, 200 * time.Millisecond}, 400 * time.Millisecond},
		{"a slow stream every second", []time.Duration{time.Hour, time.Second}, 1500 * time.Millisecond},
		{"a change after a spell longer than the quiet period", []time.Duration{time.Hour, 100 * time.Millisecond, 2 * time.Second}, DefaultIdleQuiet},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := &Worker{limits: limits}
			at, got := start, time.Duration(0)
			for _, gap := range tc.gaps {
				at = at.Add(gap)
				got = w.quietAfter(at)
			}
			if got != tc.want {
				t.Errorf("quiet period %v, want %v", got, tc.want)
			}
		})
	}
}

// TestPaceHoldsAListUntilTheWorkerTakes: past paceItems waiting, pace holds its caller until the
// worker takes the inbox; a worker that takes nothing within the patience holds it only once,
// until it takes again; and a small inbox never holds anyone.
func TestPaceHoldsAListUntilTheWorkerTakes(t *testing.T) {
	in := newInbox()
	fill := func() {
		for i := range paceItems + 1 {
			in.put(item{change: Change{Path: cmPath(fmt.Sprintf("cm-%05d", i)), Content: []byte("x")}}, testBot)
		}
	}
	paced := func(patience time.Duration) chan struct{} {
		done := make(chan struct{})
		go func() {
			defer close(done)
			in.pace(t.Context(), patience)
		}()
		return done
	}
	returns := func(what string, done chan struct{}) {
		t.Helper()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatalf("pace did not return %s", what)
		}
	}

	in.put(item{change: Change{Path: cmPath("one"), Content: []byte("x")}}, testBot)
	returns("with one change waiting", paced(time.Hour))
	in.take()

	fill()
	done := paced(time.Hour)
	select {
	case <-done:
		t.Fatalf("pace returned with %d changes waiting and no take", paceItems+1)
	case <-time.After(200 * time.Millisecond): // still held, as it must be until the take
	}
	in.take()
	returns("after the take", done)

	fill()
	returns("after its patience", paced(10*time.Millisecond))
	returns("for a worker that has not taken since (it is stuck)", paced(time.Hour))
	in.take()
	fill()
	done = paced(time.Hour)
	select {
	case <-done:
		t.Fatal("pace did not hold its caller again once the stuck worker took")
	case <-time.After(200 * time.Millisecond):
	}
	in.take()
	returns("after the second take", done)
}

// TestAPushTakesEverythingThatWaits: a push costs the remote about as much for a few files as for
// thousands, so whatever waits when one starts goes in it. The remote hangs in a push while 15
// changes arrive; batches hold 10 files. The 15 then land in one commit, not as 10 and, after the
// quiet period of the rest, 5 more in a push of their own. Seen failing: 4 commits, not 3.
func TestAPushTakesEverythingThatWaits(t *testing.T) {
	srv, w := stuckInAPush(t, "all", BatchLimits{MaxFiles: 10, Quiet: 10 * time.Millisecond})
	for i := range 15 {
		name := fmt.Sprintf("cm-%02d", i)
		MustEnqueue(t, w, Change{Path: cmPath(name), Content: configMap(name, "0", 100)})
	}
	srv.SetHanging(false) // no flush: it would take the batch itself
	testenv.Eventually(t, 30*time.Second, "every change on the remote", func() (bool, string) {
		files := testenv.MustFiles(t, srv, "all")
		return len(files) == 17, fmt.Sprintf("%d files", len(files))
	})
	if log := testenv.MustLog(t, srv, "all"); len(log) != 3 {
		t.Errorf("%d commits, want 3: the first change, the one pushed as the remote hung, and the 15 that waited meanwhile", len(log))
	}
}

// stuckInAPush starts a worker on repository repo that pushed "first", then holds it in the push
// of "stuck" to a remote that accepts the connection and does not answer (until SetHanging(false)).
func stuckInAPush(t *testing.T, repo string, limits BatchLimits) (*testenv.GitServer, *testWorker) {
	t.Helper()
	srv := MustGitServer(t)
	w := StartWorker(t, MustRepo(t, srv, repo), "", limits)
	MustEnqueue(t, w, Change{Path: cmPath("first"), Content: configMap("first", "0", 100)})
	MustFlush(t, w)
	srv.SetHanging(true)
	before := srv.Requests()
	MustEnqueue(t, w, Change{Path: cmPath("stuck"), Content: configMap("stuck", "0", 100)})
	testenv.Eventually(t, 30*time.Second, "the worker to be stuck in a push", func() (bool, string) {
		return srv.Requests() > before, fmt.Sprintf("%d requests", srv.Requests()-before)
	})
	return srv, w
}
