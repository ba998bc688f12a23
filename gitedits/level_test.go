package gitedits

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/configbutler/gitops-reverser/gitops"
)

// TestEditsWithoutARevisionStartAtTheDaemonsLastCommit: on a first run (no revision yet) the
// baseline is the newest commit the daemon wrote, not the tip, so what a person pushed right
// after the mirror's first push is reported.
func TestEditsWithoutARevisionStartAtTheDaemonsLastCommit(t *testing.T) {
	srv := MustGitServer(t)
	url := MustRepo(t, srv, "baseline")
	tuned, doomed, added := cmPath("tuned"), cmPath("doomed"), cmPath("added")
	w := StartWorker(t, url)
	MustEnqueue(t, w, gitops.Change{Path: tuned, Content: []byte("v1\n")}, gitops.Change{Path: doomed, Content: []byte("d\n")})
	MustFlush(t, w)
	mirrored := mustLog(t, srv, "baseline")[0].SHA

	person := mustPush(t, srv, "baseline", "main", testenvSig("erin"), "tune by hand",
		map[string]string{tuned: "v2 by hand\n", added: "new\n"}, []string{doomed})
	r := mustEdits(t, w, "", 0)
	if r.Tip != person || r.Base != mirrored {
		t.Fatalf("tip %s, base %s; want the person's commit %s on the daemon's %s", r.Tip, r.Base, person, mirrored)
	}
	want := []string{
		fmt.Sprintf("%s=%q by erin <erin@example.com> @%s", added, "new\n", person),
		fmt.Sprintf("%s=%q by erin <erin@example.com> @%s", doomed, "<deleted>", person),
		fmt.Sprintf("%s=%q by erin <erin@example.com> @%s", tuned, "v2 by hand\n", person),
	}
	if got := describeEdits(r.Edits); !slices.Equal(got, want) {
		t.Fatalf("edits =\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	// No commit of the daemon within the bound: the tip is the baseline.
	bounded, err := w.Edits(context.Background(), Query{Folder: "clusters/prod", Ours: ours, MaxCommits: 1})
	if err != nil || bounded.Base != person || len(bounded.Edits) != 0 {
		t.Fatalf("edits within one commit = %+v, %v; want the tip %s as the baseline and no edits", bounded, err, person)
	}

	// A branch the daemon never wrote to: the tip is the baseline.
	url2 := MustRepo(t, srv, "foreign")
	tip := mustPush(t, srv, "foreign", "main", testenvSig("carol"), "seed", map[string]string{tuned: "c\n"}, nil)
	if r := mustEdits(t, StartWorker(t, url2), "", 0); r.Tip != tip || r.Base != tip || len(r.Edits) != 0 {
		t.Fatalf("edits of a branch without a daemon commit = %+v, want the tip %s as the baseline and no edits", r, tip)
	}
}

// TestWholeFolderCreditsEachFileToItsNewestCommit: after a force-push, every file under the
// folder that a person changed last is reported, credited to that commit; a file whose newest
// commit is the daemon's, or to which the mirror holds a change it has not pushed, is the
// mirror's and is left out.
func TestWholeFolderCreditsEachFileToItsNewestCommit(t *testing.T) {
	srv := MustGitServer(t)
	url := MustRepo(t, srv, "whole")
	byCarol, byDaemon, byErin, pending := cmPath("by-carol"), cmPath("by-daemon"), cmPath("by-erin"), cmPath("pending")
	seed := mustPush(t, srv, "whole", "main", testenvSig("carol"), "seed",
		map[string]string{byCarol: "c\n", byErin: "c\n", pending: "c\n", "README.md": "hi\n"}, nil)
	hour := time.Hour
	w := startWorkerWith(t, url, gitops.BatchLimits{MaxWait: hour, Quiet: hour, IdleQuiet: hour})
	MustEnqueue(t, w, gitops.Change{Path: byDaemon, Content: []byte("d\n")})
	MustFlush(t, w)
	person := mustPush(t, srv, "whole", "main", testenvSig("erin"), "by hand", map[string]string{byErin: "e\n"}, nil)
	MustEnqueue(t, w, gitops.Change{Path: pending, Content: []byte("live\n")}) // batched for an hour

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	r, err := w.Edits(ctx, Query{Folder: "clusters/prod", Whole: true, Ours: ours})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range r.Edits {
		got = append(got, fmt.Sprintf("%s=%q by %s @%s", e.Path, e.Content, e.Author.Name, e.Commit))
	}
	want := []string{ // not the daemon's file, nor the one the mirror is about to rewrite
		fmt.Sprintf("%s=%q by carol @%s", byCarol, "c\n", seed),
		fmt.Sprintf("%s=%q by erin @%s", byErin, "e\n", person),
	}
	if !slices.Equal(got, want) {
		t.Fatalf("whole folder =\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	// Bounded: past MaxCommits, files no newer commit changed are left out.
	r, err = w.Edits(ctx, Query{Folder: "clusters/prod", Whole: true, Ours: ours, MaxCommits: 1})
	if err != nil {
		t.Fatal(err)
	}
	if got := describeEdits(r.Edits); len(got) != 1 || !strings.HasPrefix(got[0], byErin) {
		t.Fatalf("whole folder within one commit = %v, want only the newest commit's file %s", got, byErin)
	}
}

// TestEditsMarkLinksAndSubmodules: a symbolic link or a submodule a person commits under the
// folder is reported as a link, with no content to read.
func TestEditsMarkLinksAndSubmodules(t *testing.T) {
	srv := MustGitServer(t)
	url := MustRepo(t, srv, "links")
	seed := mustPush(t, srv, "links", "main", testenvSig("carol"), "seed", map[string]string{cmPath("real"): "v\n"}, nil)
	w := StartWorker(t, url)
	git := personClone(t, srv, "links")
	dir := strings.TrimSpace(git("rev-parse", "--show-toplevel"))
	if err := os.Symlink("real.yaml", filepath.Join(dir, filepath.FromSlash(cmPath("link")))); err != nil {
		t.Fatal(err)
	}
	git("add", cmPath("link"))
	git("update-index", "--add", "--cacheinfo", "160000,"+seed+","+cmPath("module"))
	git("commit", "-q", "-m", "a link and a submodule")
	git("push", "-q", "origin", "HEAD:main")

	r := mustEdits(t, w, seed, 0)
	var got []string
	for _, e := range r.Edits {
		got = append(got, fmt.Sprintf("%s link=%v content=%q", e.Path, e.Link, e.Content))
	}
	want := []string{cmPath("link") + ` link=true content=""`, cmPath("module") + ` link=true content=""`}
	if !slices.Equal(got, want) {
		t.Fatalf("edits = %v, want %v", got, want)
	}
}
