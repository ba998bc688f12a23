package gitops

import (
	"path"
	"strings"
	"testing"

	"github.com/go-git/go-git/v5/plumbing"

	"github.com/configbutler/gitops-reverser/gitstore"
)

// mustFileAt reads path at commit from w's clone or overlay; "<none>" when there is no file.
func mustFileAt(t *testing.T, w *Worker, commit plumbing.Hash, p string) string {
	t.Helper()
	root, err := w.store.CommitTree(commit)
	if err != nil {
		t.Fatal(err)
	}
	r := w.repo.Reader(t.Context())
	dir, name := path.Split(p)
	entries, err := r.Dir(root, strings.TrimSuffix(dir, "/"))
	if err != nil {
		t.Fatal(err)
	}
	e := gitstore.FindFile(entries, name)
	if e == nil {
		return "<none>"
	}
	data, err := r.Blob(e.Hash)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// mustCommitRun builds one commit of items on parent.
func mustCommitRun(t *testing.T, w *Worker, parent plumbing.Hash, items ...item) plumbing.Hash {
	t.Helper()
	var stats buildStats
	h, err := w.commitRun(parent, run{author: testBot, items: items}, &stats)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// TestReplayHonoursHolds: the commits of pending runs are built again after a rejected push;
// the rebuild honours a hold set since the first build, and a release marker commits the same
// the second time as the first.
func TestReplayHonoursHolds(t *testing.T) {
	w := offlineWorker(t)
	kh := newHoldTable().forKey(w.remote.URL, w.remote.Branch)
	w.holds = kh
	x, y := cmPath("x"), cmPath("y")
	base := mustCommitRun(t, w, plumbing.ZeroHash, writeItem(Signature{}, x, "by hand"), writeItem(Signature{}, y, "y1"))
	pending := []item{writeItem(Signature{}, x, "m1"), writeItem(Signature{}, y, "y2")}

	first := mustCommitRun(t, w, base, pending...)
	if got := mustFileAt(t, w, first, x); got != "m1" {
		t.Fatalf("x = %q before the hold, want the mirror's write", got)
	}
	kh.hold(x) // the push of first was rejected meanwhile: the runs are replayed
	replay := mustCommitRun(t, w, base, pending...)
	if got := mustFileAt(t, w, replay, x); got != "by hand" {
		t.Fatalf("x = %q in the replay, want it held", got)
	}
	if got := mustFileAt(t, w, replay, y); got != "y2" {
		t.Fatalf("y = %q in the replay, want the mirror's write", got)
	}

	it, ok := kh.releaseItem(x, &Change{Path: x, Content: []byte("restore")})
	if !ok || it.release == nil {
		t.Fatalf("releaseItem = %+v, %v; want a marker", it, ok)
	}
	released := mustCommitRun(t, w, replay, it)
	if got := mustFileAt(t, w, released, x); got != "m1" {
		t.Fatalf("x = %q after the release, want the remembered write", got)
	}
	if kh.active() {
		t.Fatal("the hold outlived its release marker")
	}
	again := mustCommitRun(t, w, mustCommitRun(t, w, base, pending...), it) // rejected again: replay all
	for _, p := range []string{x, y} {
		if a, b := mustFileAt(t, w, released, p), mustFileAt(t, w, again, p); a != b {
			t.Errorf("%s = %q after the second replay, %q after the first", p, b, a)
		}
	}
}

// TestCoalesceKeepsReleaseMarkersInPlace: the latest change before a release marker stays
// before it (it is held and remembered), the latest after it comes after.
func TestCoalesceKeepsReleaseMarkersInPlace(t *testing.T) {
	const a, b = "clusters/prod/a.yaml", "clusters/prod/b.yaml"
	marker := item{change: Change{Path: a, Credit: Credit{Author: testAlice}}, release: &releaseMark{}}
	runs := []run{
		{author: testAlice, items: []item{writeItem(testAlice, a, "a1"), writeItem(testAlice, a, "a2"), writeItem(testAlice, b, "b1")}},
		{author: testBot, items: []item{marker}},
		{author: testBob, items: []item{writeItem(testBob, a, "a3"), writeItem(testBob, a, "a4"), writeItem(testBob, b, "b2")}},
	}
	got := coalesce(runs, testBot)
	var order []string
	for _, it := range got[0].items {
		switch {
		case it.release != nil:
			order = append(order, "release "+it.change.Path[len("clusters/prod/"):])
		default:
			order = append(order, it.change.Path[len("clusters/prod/"):]+"="+string(it.change.Content))
		}
		if !it.change.Author.IsZero() {
			t.Errorf("coalesced item %+v keeps its author", it)
		}
	}
	want := []string{"a.yaml=a2", "b.yaml=b2", "release a.yaml", "a.yaml=a4"}
	if len(order) != len(want) {
		t.Fatalf("coalesced = %v, want %v", order, want)
	}
	for i := range want {
		if order[i] != want[i] {
			t.Fatalf("coalesced = %v, want %v", order, want)
		}
	}
}
