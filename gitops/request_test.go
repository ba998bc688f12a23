package gitops

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/configbutler/gitops-reverser/testenv"
)

// hostDouble stands in for a Git host's pull-request API, which package pullrequest drives for
// real (against a real Gitea in its tests and the daemon's): here only what the worker asks of
// its Delivery is recorded, and the state of the one request is what the test sets.
type hostDouble struct {
	mu       sync.Mutex
	calls    []string
	last     Head
	state    string // of the request, once opened
	mergedAt string // head commit of a merged request
}

func (h *hostDouble) answer(op string, head Head) Request {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.calls, h.last = append(h.calls, op), head
	if h.state == "" && op == "deliver" {
		h.state = RequestOpen
	}
	if op == "withdraw" && h.state == RequestOpen {
		h.state = RequestClosed
	}
	return Request{Number: 1, State: h.state, HeadCommit: h.mergedAt}
}

func (h *hostDouble) Deliver(_ context.Context, head Head) (Request, error) {
	return h.answer("deliver", head), nil
}
func (h *hostDouble) Withdraw(_ context.Context, head Head) (Request, error) {
	return h.answer("withdraw", head), nil
}
func (h *hostDouble) Check(_ context.Context, head Head) (Request, error) {
	return h.answer("check", head), nil
}

func (h *hostDouble) seen() (calls []string, last Head) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.calls), h.last
}

const testHead = "gitops-reverser/prod"

// startHeadWorker runs a worker that delivers into main by a request from testHead.
func startHeadWorker(t *testing.T, url string, host *hostDouble, opts ...func(*WorkerConfig)) *testWorker {
	return StartWorker(t, url, "", BatchLimits{}, append([]func(*WorkerConfig){func(c *WorkerConfig) {
		c.Remote.Head, c.Delivery, c.RequestPoll = testHead, host, 50*time.Millisecond
		c.Ours = func(msg string) bool { return strings.Contains(msg, testTrailers[0][0]+": "+testTrailers[0][1]) }
	}}, opts...)...)
}

// mustHeadLog lists the commits of the head branch of the remote "pr", newest first.
func mustHeadLog(t *testing.T, srv *testenv.GitServer) []testenv.Commit {
	t.Helper()
	log, err := srv.Log("pr", testHead)
	if err != nil {
		t.Fatal(err)
	}
	return log
}

// mustRef is the SHA a branch of a bare repository points at, "" when it has none.
func mustRef(t *testing.T, srv *testenv.GitServer, repo, branch string) string {
	t.Helper()
	out, err := exec.Command("git", "--git-dir="+filepath.Join(srv.Root, repo+".git"), "rev-parse", "--verify", "--quiet", "refs/heads/"+branch).Output()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(out))
}

// mustFetch makes the worker look at the remote now, as a webhook or write-back does.
func mustFetch(t *testing.T, w *testWorker) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := w.Fetch(ctx); err != nil {
		t.Fatal(err)
	}
	MustFlush(t, w)
}

// headWithA starts a worker with a head branch on a started repository and has it push its first
// change, the file a; it returns the remote, the worker, the host it delivers to and the head
// branch's tip.
func headWithA(t *testing.T) (*testenv.GitServer, *testWorker, *hostDouble, string) {
	t.Helper()
	srv, url := startedRepo(t)
	host := &hostDouble{}
	w := startHeadWorker(t, url, host)
	MustEnqueue(t, w, Change{Path: cmPath("a"), Content: configMap("a", "1", 100)})
	MustFlush(t, w)
	return srv, w, host, mustRef(t, srv, "pr", testHead)
}

// startedRepo is a remote "pr" whose main holds one commit by alice.
func startedRepo(t *testing.T) (*testenv.GitServer, string) {
	t.Helper()
	srv := MustGitServer(t)
	url := MustRepo(t, srv, "pr")
	if _, err := srv.PushCommit("pr", "main", testenvSig("alice"), "start", map[string]string{"README.md": "hi\n"}, nil); err != nil {
		t.Fatal(err)
	}
	return srv, url
}

// gitIn runs git in the remote "pr", as a host merging a request would, and returns its output.
func gitIn(t *testing.T, srv *testenv.GitServer, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"--git-dir=" + filepath.Join(srv.Root, "pr.git")}, args...)...)
	// A commit needs an identity, which a fresh machine's git has not.
	cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=Dana", "GIT_AUTHOR_EMAIL=dana@example.com",
		"GIT_COMMITTER_NAME=Dana", "GIT_COMMITTER_EMAIL=dana@example.com")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

// set says what the host answers of the request from now on.
func (h *hostDouble) set(state, mergedAt string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.state, h.mergedAt = state, mergedAt
}

func TestChangesGoToTheHeadBranchNeverTheTarget(t *testing.T) {
	srv, url := startedRepo(t)
	main := mustRef(t, srv, "pr", "main")
	host := &hostDouble{}
	w := startHeadWorker(t, url, host)
	MustEnqueue(t, w, Change{Path: cmPath("a"), Content: configMap("a", "1", 100), Credit: Credit{Author: Signature{Name: "Bob", Email: "bob@example.com"}}})
	MustFlush(t, w)
	MustEnqueue(t, w, Change{Path: cmPath("b"), Content: configMap("b", "1", 100)})
	MustFlush(t, w)

	if got := mustRef(t, srv, "pr", "main"); got != main {
		t.Fatalf("main moved to %s: the worker must never push to its target", got)
	}
	log := mustHeadLog(t, srv)
	if len(log) != 3 || log[1].AuthorName != "Bob" || log[0].Parents[0] != log[1].SHA || log[2].SHA != main {
		t.Fatalf("head branch = %+v, want Bob's commit, then the bot's, on main", log)
	}
	calls, last := host.seen()
	if n := strings.Count(strings.Join(calls, " "), "deliver"); n != 2 {
		t.Errorf("calls = %v, want one deliver per push", calls)
	}
	if len(last.Files) != 2 || len(last.Commits) != 2 || last.Commits[0].Author.Name != "Bob" || last.Commit != log[0].SHA {
		t.Errorf("the request was told %+v", last)
	}
	mustFetch(t, w) // nothing moved: no call
	if again, _ := host.seen(); len(again) != len(calls) {
		t.Errorf("a look with nothing new called the host: %v", again[len(calls):])
	}
	st := w.Status()
	if st.Request == nil || st.Request.Number != 1 || st.Waiting != 2 || st.Head != testHead {
		t.Errorf("status = %+v", st)
	}
}

func TestTheHeadBranchFollowsItsTarget(t *testing.T) {
	srv, w, host, mine := headWithA(t)

	// Someone pushes to main: the head is rebuilt on it, with the same change.
	pushed, err := srv.PushCommit("pr", "main", testenvSig("carol"), "docs", map[string]string{"docs.md": "x\n"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	mustFetch(t, w)
	log := mustHeadLog(t, srv)
	if log[0].SHA == mine || log[1].SHA != pushed {
		t.Fatalf("head branch = %+v, want our change rebuilt on %s", log, pushed)
	}
	files, _ := srv.Files("pr", testHead)
	if !slices.Contains(files, cmPath("a")) || !slices.Contains(files, "docs.md") {
		t.Fatalf("head files = %v", files)
	}

	// A squash merge: main gets the head's tree in a commit of its own, and the host says the
	// request was merged at the head's tip: the head branch is deleted, nothing is made again.
	head := mustRef(t, srv, "pr", testHead)
	host.set(RequestMerged, head) // the host knows the merge by the time the worker sees main move
	squash := gitIn(t, srv, "commit-tree", head+"^{tree}", "-p", pushed, "-m", "Squashed (#1)")
	gitIn(t, srv, "update-ref", "refs/heads/main", squash)
	mustFetch(t, w)
	if got := mustRef(t, srv, "pr", testHead); got != "" {
		t.Fatalf("head branch still at %s after its request was merged", got)
	}
	if got := mustRef(t, srv, "pr", "main"); got != squash {
		t.Fatalf("main = %s, want the squash %s untouched", got, squash)
	}
	calls, _ := host.seen()
	if !slices.Contains(calls, "check") || calls[len(calls)-1] != "withdraw" {
		t.Errorf("calls = %v, want a check of the merge and a withdraw", calls)
	}

	// The next change opens a new head on the new main.
	host.set("", "")
	MustEnqueue(t, w, Change{Path: cmPath("c"), Content: configMap("c", "1", 100)})
	MustFlush(t, w)
	log, err = srv.Log("pr", testHead)
	if err != nil || len(log) < 2 || log[1].SHA != squash {
		t.Fatalf("new head = %+v (%v), want one commit on the squash", log, err)
	}
}

// TestAHeadBranchSomeoneElseWroteIsLeftAlone: a head branch holding a commit the daemon did not
// write is never pushed over; the run waits, and the worker names it as not pushed when it stops.
func TestAHeadBranchSomeoneElseWroteIsLeftAlone(t *testing.T) {
	srv, url := startedRepo(t)
	theirs, err := srv.PushCommit("pr", testHead, testenvSig("mallory"), "mine", map[string]string{"x.md": "x\n"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	host := &hostDouble{}
	w := startHeadWorker(t, url, host)
	MustEnqueue(t, w, Change{Path: cmPath("a"), Content: configMap("a", "1", 100)})
	testenv.Eventually(t, 30*time.Second, "the worker refuses the head branch", func() (bool, string) {
		err := w.Status().LastError
		return err != nil && strings.Contains(err.Error(), "did not write"), fmt.Sprint(err)
	})
	if got := mustRef(t, srv, "pr", testHead); got != theirs {
		t.Fatalf("head branch = %s, want %s untouched", got, theirs)
	}
	if err := w.stop(); err == nil || !strings.Contains(err.Error(), "not pushed") {
		t.Errorf("the worker stopped with %v, want its run named as not pushed", err)
	}
}

// TestAHeadMergedByFastForwardIsNotMadeAgain: the request was merged by fast-forward and a person
// then changed the same file on main; the head's commit is in main's history, so nothing is made
// again (which would revert the person's change) and the head branch goes.
func TestAHeadMergedByFastForwardIsNotMadeAgain(t *testing.T) {
	srv, w, host, head := headWithA(t)
	host.set(RequestMerged, head)
	gitIn(t, srv, "update-ref", "refs/heads/main", head) // merged by fast-forward
	if _, err := srv.PushCommit("pr", "main", testenvSig("carol"), "edit a", map[string]string{cmPath("a"): "carol's\n"}, nil); err != nil {
		t.Fatal(err)
	}
	mustFetch(t, w)
	if got := mustRef(t, srv, "pr", testHead); got != "" {
		log, _ := srv.Log("pr", testHead)
		t.Fatalf("head branch at %s after a fast-forward merge: %+v", got, log)
	}
}

// rateLimited is a host's answer that says when to come back.
type rateLimited time.Duration

func (r rateLimited) Error() string                  { return "429 Too Many Requests" }
func (r rateLimited) RetryAfterDelay() time.Duration { return time.Duration(r) }

func TestARateLimitWaitsAsLongAsTheHostSays(t *testing.T) {
	for _, c := range []struct {
		name    string
		err     error
		backoff time.Duration
		want    time.Duration
	}{
		{"a push failure takes the backoff", fmt.Errorf("push: %w", errRemoteMoved), time.Second, time.Second},
		{"a rate limit waits as asked", &DeliveryError{Op: "deliver", Err: rateLimited(time.Minute)}, time.Second, time.Minute},
		{"never less than the backoff", &DeliveryError{Op: "deliver", Err: rateLimited(time.Second)}, 30 * time.Second, 30 * time.Second},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := retryAfter(c.err, c.backoff); got != c.want {
				t.Errorf("retryAfter = %v, want %v", got, c.want)
			}
		})
	}
}

// TestARequestBeingMergedIsNotClosed: the target already holds the head's changes while the host
// still calls the request open (a merge moves the branch a moment before the host marks the
// request merged): the head branch and the request are left alone, not closed.
func TestARequestBeingMergedIsNotClosed(t *testing.T) {
	srv, w, host, head := headWithA(t)
	before, _ := host.seen() // a worker that starts without a head branch withdraws once
	gitIn(t, srv, "update-ref", "refs/heads/main", head)
	mustFetch(t, w) // the host says open still
	if got := mustRef(t, srv, "pr", testHead); got != head {
		t.Fatalf("head branch at %q while its request is being merged, want %s", got, head)
	}
	if calls, _ := host.seen(); slices.Contains(calls[len(before):], "withdraw") {
		t.Fatalf("the request being merged was withdrawn: %v", calls[len(before):])
	}
	host.set(RequestMerged, head)
	testenv.Eventually(t, 30*time.Second, "the head branch gone once the request is merged", func() (bool, string) {
		got := mustRef(t, srv, "pr", testHead)
		return got == "", got
	})
}

// TestARequestClosedByTheHostAfterTheBranchCameBackIsOpenedAgain: the head branch was deleted
// after a merge and made again for the next change; the host, handling the deletion late, closes
// the request just opened from it (Gitea does, from a queue). The worker sees it at its next look
// and opens another.
func TestARequestClosedByTheHostAfterTheBranchCameBackIsOpenedAgain(t *testing.T) {
	srv, w, host, head := headWithA(t)
	host.set(RequestMerged, head)
	gitIn(t, srv, "update-ref", "refs/heads/main", head) // merged by fast-forward: the head goes
	mustFetch(t, w)
	if got := mustRef(t, srv, "pr", testHead); got != "" {
		t.Fatalf("head branch at %s after the merge", got)
	}
	host.set("", "")
	MustEnqueue(t, w, Change{Path: cmPath("b"), Content: configMap("b", "1", 100)})
	MustFlush(t, w)
	before, _ := host.seen()
	host.set(RequestClosed, "") // the host closes the new request late
	testenv.Eventually(t, 30*time.Second, "another request opened", func() (bool, string) {
		calls, _ := host.seen()
		after := calls[len(before):]
		return slices.Contains(after, "check") && slices.Contains(after, "deliver"), fmt.Sprint(after)
	})
}
