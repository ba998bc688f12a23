package gitedits

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/configbutler/gitops-reverser/gitops"
	"github.com/configbutler/gitops-reverser/layout"
)

// mustEdits asks the worker for the edits under clusters/prod since since.
func mustEdits(t *testing.T, w *testWorker, since string, maxBytes int64) Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	r, err := w.Edits(ctx, Query{Folder: "clusters/prod", Since: since, Ours: ours, MaxBytes: maxBytes})
	if err != nil {
		t.Fatalf("edits since %q: %v", since, err)
	}
	return r
}

// describeEdits renders edits as "path=content|deleted by author@commit" lines.
func describeEdits(edits []Edit) []string {
	var out []string
	for _, e := range edits {
		what := string(e.Content)
		if e.Deleted {
			what = "<deleted>"
		}
		out = append(out, fmt.Sprintf("%s=%q by %s <%s> @%s", e.Path, what, e.Author.Name, e.Author.Email, e.Commit))
	}
	return out
}

// TestEditsReportsWhatPeopleChanged: a person's commit changing, adding and deleting files under
// the folder is reported file by file, with the person's commit and the content at the tip; the
// daemon's own commit and files outside the folder are not.
func TestEditsReportsWhatPeopleChanged(t *testing.T) {
	srv := MustGitServer(t)
	url := MustRepo(t, srv, "edits")
	changed, added, deleted, mirrored := cmPath("changed"), cmPath("added"), cmPath("deleted"), cmPath("mirrored")
	outside := layout.Path("clusters/staging", "", "configmaps", "default", "x")
	seed := mustPush(t, srv, "edits", "main", testenvSig("carol"), "seed", map[string]string{
		changed: "v1\n", deleted: "gone soon\n", mirrored: "m1\n", outside: "s1\n", "README.md": "hi\n",
	}, nil)
	w := StartWorker(t, url)
	if r := mustEdits(t, w, "", 0); r.Tip != seed || len(r.Edits) != 0 {
		t.Fatalf("edits without a revision = %+v, want the tip %s only", r, seed)
	}

	person := mustPush(t, srv, "edits", "main", testenvSig("erin"), "edit by hand", map[string]string{
		changed: "v2 by hand\n", added: "new by hand\n", outside: "s2\n", "README.md": "hello\n",
	}, []string{deleted})
	MustEnqueue(t, w, gitops.Change{Path: mirrored, Content: []byte("m2\n")}) // replayed on the person's commit
	MustFlush(t, w)

	r := mustEdits(t, w, seed, 0)
	if log := mustLog(t, srv, "edits"); r.Tip != log[0].SHA || log[1].SHA != person {
		t.Fatalf("tip = %s, want the daemon's commit on top of the person's: %+v", r.Tip, log)
	}
	want := []string{
		fmt.Sprintf("%s=%q by erin <erin@example.com> @%s", added, "new by hand\n", person),
		fmt.Sprintf("%s=%q by erin <erin@example.com> @%s", changed, "v2 by hand\n", person),
		fmt.Sprintf("%s=%q by erin <erin@example.com> @%s", deleted, "<deleted>", person),
	}
	if got := describeEdits(r.Edits); !slices.Equal(got, want) {
		t.Fatalf("edits =\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	for _, e := range r.Edits {
		if e.When.IsZero() || time.Since(e.When) > time.Hour || (!e.Deleted && e.Size != int64(len(e.Content))) {
			t.Errorf("edit %s: when %v, size %d: want the author time and the blob size", e.Path, e.When, e.Size)
		}
	}

	if r := mustEdits(t, w, r.Tip, 0); len(r.Edits) != 0 {
		t.Errorf("edits since the tip = %v, want none", describeEdits(r.Edits))
	}
	small := mustEdits(t, w, seed, 5)
	for _, e := range small.Edits {
		if !e.Deleted && (e.Content != nil || e.Size <= 5) {
			t.Errorf("edit %s over MaxBytes: content %q, size %d; want no content and the size", e.Path, e.Content, e.Size)
		}
	}

	ctx := context.Background()
	for _, since := range []string{strings.Repeat("ab", 20), "HEAD~1", "", person[:12]} {
		if since == "" {
			continue
		}
		_, err := w.Edits(ctx, Query{Folder: "clusters/prod", Since: since, Ours: ours})
		if !errors.Is(err, ErrUnknownRevision) {
			t.Errorf("edits since %q: %v, want ErrUnknownRevision", since, err)
		}
	}

	got, err := w.File(ctx, person, changed)
	if err != nil || string(got) != "v2 by hand\n" {
		t.Errorf("File(person, changed) = %q, %v", got, err)
	}
	if _, err := w.File(ctx, person, deleted); !errors.Is(err, ErrNotFound) {
		t.Errorf("File of a deleted path: %v, want ErrNotFound", err)
	}
	if _, err := w.File(ctx, strings.Repeat("ab", 20), changed); !errors.Is(err, ErrUnknownRevision) {
		t.Errorf("File at an unknown commit: %v, want ErrUnknownRevision", err)
	}
}

// TestEditsSinceAForcePushedRevision: a revision the branch no longer contains is unknown.
func TestEditsSinceAForcePushedRevision(t *testing.T) {
	srv := MustGitServer(t)
	url := MustRepo(t, srv, "forced")
	seed := mustPush(t, srv, "forced", "main", testenvSig("carol"), "seed", map[string]string{cmPath("a"): "1\n"}, nil)
	w := StartWorker(t, url)
	gone := mustPush(t, srv, "forced", "main", testenvSig("erin"), "later", map[string]string{cmPath("a"): "2\n"}, nil)
	mustEdits(t, w, gone, 0) // the worker fetched it
	git := personClone(t, srv, "forced")
	git("reset", "--hard", seed)
	git("commit", "--allow-empty", "-m", "rewritten")
	git("push", "--force", "origin", "HEAD:main")
	if _, err := w.Edits(context.Background(), Query{Since: gone}); !errors.Is(err, ErrUnknownRevision) {
		t.Fatalf("edits since a force-pushed-away commit: %v, want ErrUnknownRevision", err)
	}
}

// TestWholeAfterAForcePushHasWhatItRemoved: a force-push back to an older commit takes away a
// file the old history held, which no commit of the new history deletes. Whole edits since the
// old tip report it deleted, credited to the commit pushed; a file the force-push kept is not a
// deletion.
func TestWholeAfterAForcePushHasWhatItRemoved(t *testing.T) {
	srv := MustGitServer(t)
	url := MustRepo(t, srv, "forcedaway")
	kept, taken := cmPath("kept"), cmPath("taken")
	seed := mustPush(t, srv, "forcedaway", "main", testenvSig("carol"), "seed", map[string]string{kept: "1\n"}, nil)
	w := StartWorker(t, url)
	gone := mustPush(t, srv, "forcedaway", "main", testenvSig("erin"), "later",
		map[string]string{kept: "2\n", taken: "1\n"}, nil)
	mustEdits(t, w, gone, 0) // the worker fetched it
	rewritten, err := srv.ForcePush("forcedaway", "main", seed, testenvSig("mallory"), "rewrite", map[string]string{cmPath("other"): "1\n"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	r, err := w.Edits(ctx, Query{Folder: "clusters/prod", Since: gone, Whole: true, Ours: ours})
	if err != nil {
		t.Fatal(err)
	}
	var deleted []string
	for _, e := range describeEdits(r.Edits) {
		if strings.Contains(e, "<deleted>") {
			deleted = append(deleted, e)
		}
	}
	want := []string{fmt.Sprintf("%s=%q by mallory <mallory@example.com> @%s", taken, "<deleted>", rewritten)}
	if !slices.Equal(deleted, want) {
		t.Fatalf("deletions =\n%s\nwant\n%s", strings.Join(deleted, "\n"), strings.Join(want, "\n"))
	}
}

// TestEditsOfAMerge: "git pull" makes a merge whose first parent is the person's commit; what
// the merge brought in from the daemon's side is not the person's edit, what the person's
// commit and the merge itself changed is.
func TestEditsOfAMerge(t *testing.T) {
	srv := MustGitServer(t)
	url := MustRepo(t, srv, "merge")
	mine, theirs, resolved := cmPath("mine"), cmPath("theirs"), cmPath("resolved")
	seed := mustPush(t, srv, "merge", "main", testenvSig("carol"), "seed",
		map[string]string{mine: "1\n", theirs: "1\n", resolved: "1\n"}, nil)
	w := StartWorker(t, url)
	git := personClone(t, srv, "merge")
	writeFile(t, git, mine, "2 by hand\n")
	git("commit", "-qam", "mine")
	local := strings.TrimSpace(git("rev-parse", "HEAD"))

	MustEnqueue(t, w, gitops.Change{Path: theirs, Content: []byte("2 by the daemon\n")})
	MustFlush(t, w)

	git("fetch", "-q", "origin")
	git("merge", "--no-ff", "--no-commit", "origin/main")
	writeFile(t, git, resolved, "2 in the merge\n")
	git("add", "-A")
	git("commit", "-qm", "merge origin/main")
	merge := strings.TrimSpace(git("rev-parse", "HEAD"))
	git("push", "-q", "origin", "HEAD:main")

	r := mustEdits(t, w, seed, 0)
	if r.Tip != merge {
		t.Fatalf("tip = %s, want the merge %s", r.Tip, merge)
	}
	want := []string{
		fmt.Sprintf("%s=%q by erin <erin@example.com> @%s", mine, "2 by hand\n", local),
		fmt.Sprintf("%s=%q by erin <erin@example.com> @%s", resolved, "2 in the merge\n", merge),
	}
	if got := describeEdits(r.Edits); !slices.Equal(got, want) {
		t.Fatalf("edits =\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestEditsBoundsTheWalk: more commits than MaxCommits is ErrHistoryTooLong; without a worker
// Edits is ErrNoWorker.
func TestEditsBoundsTheWalk(t *testing.T) {
	srv := MustGitServer(t)
	url := MustRepo(t, srv, "long")
	seed := mustPush(t, srv, "long", "main", testenvSig("carol"), "seed", map[string]string{cmPath("a"): "0\n"}, nil)
	git := personClone(t, srv, "long")
	for i := range 5 {
		writeFile(t, git, cmPath("a"), fmt.Sprintf("%d\n", i+1))
		git("commit", "-qam", fmt.Sprint(i))
	}
	git("push", "-q", "origin", "HEAD:main")
	w := StartWorker(t, url)
	_, err := w.Edits(context.Background(), Query{Since: seed, MaxCommits: 3})
	if !errors.Is(err, ErrHistoryTooLong) {
		t.Fatalf("edits over 5 commits with MaxCommits 3: %v, want ErrHistoryTooLong", err)
	}
	r, err := w.Edits(context.Background(), Query{Since: seed, MaxCommits: 5})
	if err != nil || len(r.Edits) != 1 || string(r.Edits[0].Content) != "5\n" {
		t.Fatalf("edits over 5 commits with MaxCommits 5 = %v, %v; want the one file at its last content", describeEdits(r.Edits), err)
	}

	tp := Branch{Git: startPool(t), URL: url, Name: "main"}
	if _, err := tp.Edits(context.Background(), Query{}); !errors.Is(err, gitops.ErrNoWorker) || !errors.Is(err, gitops.ErrStopped) {
		t.Fatalf("edits without a worker: %v, want ErrNoWorker (an ErrStopped)", err)
	}
}

// BenchmarkEdits: a branch of 10,000 files under the folder and one person's commit changing
// one of them; each Edits includes the fetch of that commit from a local HTTP remote.
func BenchmarkEdits(b *testing.B) {
	srv := MustGitServer(b)
	url := MustLargeRepo(b, srv, "edits", 10, 1000)
	w := StartWorker(b, url)
	ctx := context.Background()
	r, err := w.Edits(ctx, Query{})
	if err != nil {
		b.Fatal(err)
	}
	since := r.Tip
	var total time.Duration
	b.ResetTimer()
	for n := 0; n < b.N; n++ {
		b.StopTimer()
		path := largePath(n%10, (n*37)%1000)
		content := configMap("by-hand", fmt.Sprint(n), 1024)
		var stream bytes.Buffer
		fmt.Fprintf(&stream, "commit refs/heads/main\nauthor erin <erin@example.com> %d +0000\ncommitter erin <erin@example.com> %[1]d +0000\n", 1700000100+n)
		fmt.Fprintf(&stream, "data 4\nedit\nfrom refs/heads/main^0\nM 100644 inline %s\ndata %d\n%s\n", path, len(content), content)
		cmd := exec.Command("git", "--git-dir="+filepath.Join(srv.Root, "edits.git"), "fast-import", "--quiet")
		cmd.Stdin = &stream
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("fast-import: %v\n%s", err, out)
		}
		b.StartTimer()
		start := time.Now()
		r, err := w.Edits(ctx, Query{Folder: "clusters/prod", Since: since, Ours: ours})
		total += time.Since(start)
		if err != nil {
			b.Fatal(err)
		}
		if len(r.Edits) != 1 || r.Edits[0].Path != path || !bytes.Equal(r.Edits[0].Content, content) {
			b.Fatalf("edits = %v, want %s", describeEdits(r.Edits), path)
		}
		since = r.Tip
	}
	b.ReportMetric(float64(total.Microseconds())/1000/float64(b.N), "ms/edits")
}
