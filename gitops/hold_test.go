package gitops

import (
	"bytes"
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/configbutler/gitops-reverser/testenv"
)

// holdPool is a running pool on one repository of a test Git server, whose OnHeldChange calls
// are recorded.
type holdPool struct {
	*Pool
	srv  *testenv.GitServer
	name string // the repository
	url  string

	mu   sync.Mutex
	told []string // paths, in call order
}

// startHoldPool runs a pool that knows repository name (created empty); no worker runs yet.
func startHoldPool(t *testing.T, name string) *holdPool {
	t.Helper()
	srv := MustGitServer(t)
	MustRepo(t, srv, name)
	hp := &holdPool{srv: srv, name: name, url: srv.AuthURL(name)}
	hp.Pool = NewPool(PoolConfig{
		WorkDir:  t.TempDir(),
		Limits:   BatchLimits{Quiet: 10 * time.Millisecond},
		Identity: Identity{Committer: testBot, Bot: testBot, Trailers: testTrailers},
		Log:      testLogger(t),
	})
	hp.OnHeldChange(func(url, branch, path string) {
		if url != hp.url || branch != "main" {
			t.Errorf("OnHeldChange(%q, %q, %q): not the pool's branch", url, branch, path)
		}
		hp.mu.Lock()
		defer hp.mu.Unlock()
		hp.told = append(hp.told, path)
	})
	testenv.Run(t, hp)
	hp.SetRepositories([]Repository{{Name: "ns/" + name, URL: hp.url}})
	return hp
}

// startWorker asks for the worker of main.
func (hp *holdPool) startWorker() { hp.SetWorkers([]Branch{{Repo: "ns/" + hp.name, Branch: "main"}}) }

// enqueue hands changes to the worker of main.
func (hp *holdPool) enqueue(t *testing.T, changes ...Change) {
	t.Helper()
	sink, ok := hp.Sink(hp.url, "main")
	if !ok {
		t.Fatal("no worker for main")
	}
	for _, c := range changes {
		if err := sink.Enqueue(c); err != nil {
			t.Fatal(err)
		}
	}
}

// flush waits until everything handed to the worker of main is pushed.
func (hp *holdPool) flush(t *testing.T) {
	t.Helper()
	w := hp.worker(hp.url, "main")
	if w == nil {
		t.Fatal("no worker for main")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := w.Flush(ctx); err != nil {
		t.Fatalf("flush: %v (status %+v)", err, w.Status())
	}
}

// calls returns the paths OnHeldChange was called with so far.
func (hp *holdPool) calls() []string {
	hp.mu.Lock()
	defer hp.mu.Unlock()
	return slices.Clone(hp.told)
}

// mustContent fails unless path on main holds want.
func (hp *holdPool) mustContent(t *testing.T, path string, want []byte) {
	t.Helper()
	got, err := hp.srv.ReadFile(hp.name, "main", path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s = %q, want %q", path, got, want)
	}
}

// mustPush pushes a commit by a person and returns its SHA.
func (hp *holdPool) mustPush(t *testing.T, write map[string]string, remove []string) string {
	t.Helper()
	sha, err := hp.srv.PushCommit(hp.name, "main", testenvSig("erin"), "edit by hand", write, remove)
	if err != nil {
		t.Fatal(err)
	}
	return sha
}

// TestHoldKeepsTheMirrorOffAPath: a held path keeps the person's content while the mirror's
// writes are remembered (the owner told of each new one), other paths go on as usual, and
// Release commits the latest remembered write.
func TestHoldKeepsTheMirrorOffAPath(t *testing.T) {
	hp := startHoldPool(t, "hold")
	held, other := cmPath("held"), cmPath("other")
	hp.mustPush(t, map[string]string{held: "by hand\n"}, nil)
	hp.startWorker()
	hp.Hold(hp.url, "main", held)
	if h, changed := hp.Held(hp.url, "main", held); !h || changed {
		t.Fatalf("Held = %v, %v right after Hold; want held, unchanged", h, changed)
	}

	m1, m2 := configMap("held", "1", 100), configMap("held", "2", 100)
	hp.enqueue(t, Change{Path: held, Content: m1}, Change{Path: other, Content: configMap("other", "1", 100)})
	hp.flush(t)
	hp.mustContent(t, held, []byte("by hand\n"))
	if files := testenv.MustFiles(t, hp.srv, hp.name); !slices.Contains(files, other) {
		t.Fatalf("files = %v: the other path did not land", files)
	}
	if h, changed := hp.Held(hp.url, "main", held); !h || !changed {
		t.Fatalf("Held = %v, %v after a mirror write; want held, changed", h, changed)
	}
	if got := hp.calls(); !slices.Equal(got, []string{held}) {
		t.Fatalf("OnHeldChange calls = %v, want one for %s", got, held)
	}

	hp.enqueue(t, Change{Path: held, Content: m2})
	hp.flush(t)
	hp.enqueue(t, Change{Path: held, Content: m2}) // the same again: nothing new to tell
	hp.flush(t)
	if got := hp.calls(); !slices.Equal(got, []string{held, held}) {
		t.Fatalf("OnHeldChange calls = %v, want two: one per different write", got)
	}
	hp.mustContent(t, held, []byte("by hand\n"))

	hp.Release(hp.url, "main", held, &Change{Path: held, Content: []byte("restore\n")})
	if h, _ := hp.Held(hp.url, "main", held); h {
		t.Fatal("still held after Release")
	}
	hp.flush(t)
	hp.mustContent(t, held, m2) // the remembered write wins over the restore
	hp.enqueue(t, Change{Path: held, Content: m1})
	hp.flush(t)
	hp.mustContent(t, held, m1) // no longer held
	testenv.MustFsck(t, hp.srv, hp.name)
}

// TestHeldOrphanIsNotDeleted: a file a person added, which no live object maps to, survives a
// Sync while held; its release commits the remembered delete.
func TestHeldOrphanIsNotDeleted(t *testing.T) {
	hp := startHoldPool(t, "orphan")
	added, orphan := cmPath("added-by-hand"), cmPath("orphan")
	hp.mustPush(t, map[string]string{added: "new object\n", orphan: "orphan\n"}, nil)
	hp.startWorker()
	hp.Hold(hp.url, "main", added)
	sink, _ := hp.Sink(hp.url, "main")
	if err := sink.Sync(Sync{Scopes: []string{"clusters/prod/"}, Live: map[string]struct{}{}}); err != nil {
		t.Fatal(err)
	}
	hp.flush(t)
	if got, want := testenv.MustFiles(t, hp.srv, hp.name), []string{added}; !slices.Equal(got, want) {
		t.Fatalf("files = %v, want %v: the orphan deleted, the held file kept", got, want)
	}
	if h, changed := hp.Held(hp.url, "main", added); !h || !changed {
		t.Fatalf("Held = %v, %v after the Sync; want held, changed", h, changed)
	}
	if got := hp.calls(); !slices.Equal(got, []string{added}) {
		t.Fatalf("OnHeldChange calls = %v, want one for %s", got, added)
	}
	hp.Release(hp.url, "main", added, nil)
	hp.flush(t)
	if got := testenv.MustFiles(t, hp.srv, hp.name); len(got) != 0 {
		t.Fatalf("files = %v after the release, want the remembered delete to have landed", got)
	}
}

// TestReleaseRestoresWhenNothingWasRemembered: with no mirror change during the hold, Release
// commits the restore, credited to its author and with its trailers.
func TestReleaseRestoresWhenNothingWasRemembered(t *testing.T) {
	hp := startHoldPool(t, "restore")
	held := cmPath("held")
	hp.mustPush(t, map[string]string{held: "by hand\n"}, nil)
	hp.startWorker()
	hp.Hold(hp.url, "main", held)
	hp.enqueue(t, Change{Path: cmPath("other"), Content: configMap("other", "1", 100)})
	hp.flush(t)
	restore := configMap("held", "live", 100)
	alice := Signature{Name: "alice", Email: "alice@example.com"}
	hp.Release(hp.url, "main", held, &Change{Path: held, Content: restore, Credit: Credit{Author: alice, Trailers: [][2]string{{"X-ConfigButler-Proposal", "default/p1"}}},
		Summary: "restore " + held})
	hp.flush(t)
	hp.mustContent(t, held, restore)
	last := testenv.MustLog(t, hp.srv, hp.name)[0]
	if last.AuthorName != "alice" || last.Subject != "restore "+held || last.Trailers["X-ConfigButler-Proposal"] != "default/p1" {
		t.Fatalf("release commit = %+v, want alice's restore with its trailer", last)
	}
	if got := hp.calls(); len(got) != 0 {
		t.Fatalf("OnHeldChange calls = %v, want none", got)
	}
	if h, changed := hp.Held(hp.url, "main", held); h || changed {
		t.Fatalf("Held = %v, %v after the release; want neither", h, changed)
	}
}

// TestHoldBeforeTheWorkerStarts: a hold set before the worker runs applies to its first batch;
// a release with no worker drops the hold.
func TestHoldBeforeTheWorkerStarts(t *testing.T) {
	hp := startHoldPool(t, "early")
	held, other := cmPath("held"), cmPath("other")
	hp.mustPush(t, map[string]string{held: "by hand\n"}, nil)
	hp.Hold(hp.url, "main", held)
	hp.startWorker()
	hp.enqueue(t, Change{Path: held, Content: configMap("held", "1", 100)}, Change{Path: other, Content: configMap("other", "1", 100)})
	hp.flush(t)
	hp.mustContent(t, held, []byte("by hand\n"))
	hp.mustContent(t, other, configMap("other", "1", 100))

	hp.SetWorkers(nil)
	hp.Release(hp.url, "main", held, &Change{Path: held, Content: []byte("lost\n")})
	if h, changed := hp.Held(hp.url, "main", held); h || changed {
		t.Fatalf("Held = %v, %v after a release without a worker; want the hold dropped", h, changed)
	}
}

// TestReleaseKeepsItsPlaceInTheQueue: a write enqueued before Release is still held and is what
// the release commits; one enqueued after it lands as usual; Hold again before the worker took
// the Release cancels it.
func TestReleaseKeepsItsPlaceInTheQueue(t *testing.T) {
	hp := startHoldPool(t, "order")
	a, b := cmPath("a"), cmPath("b")
	hp.mustPush(t, map[string]string{a: "a by hand\n", b: "b by hand\n"}, nil)
	hp.startWorker()
	hp.Hold(hp.url, "main", a)
	hp.Hold(hp.url, "main", b)
	hp.flush(t)

	before, after := configMap("a", "before", 100), configMap("a", "after", 100)
	hp.enqueue(t, Change{Path: a, Content: before})
	hp.Release(hp.url, "main", a, nil)
	hp.enqueue(t, Change{Path: a, Content: after})
	hp.enqueue(t, Change{Path: b, Content: configMap("b", "1", 100)})
	hp.Release(hp.url, "main", b, &Change{Path: b, Content: []byte("restore\n")})
	hp.Hold(hp.url, "main", b)
	hp.flush(t)
	hp.mustContent(t, a, after)
	hp.mustContent(t, b, []byte("b by hand\n"))
	if h, changed := hp.Held(hp.url, "main", b); !h || !changed {
		t.Fatalf("Held(b) = %v, %v; want the hold to go on with its remembered write", h, changed)
	}
	history, err := hp.srv.History(hp.name, "main")
	if err != nil {
		t.Fatal(err)
	}
	var wrote [][]byte // the contents a went through, newest first
	for _, c := range history {
		if content, ok := c.Files[a]; ok {
			wrote = append(wrote, content)
		}
	}
	if len(wrote) != 3 || !bytes.Equal(wrote[1], before) {
		t.Fatalf("a went through %q, want by hand, before (the release), after", wrote)
	}
}
