package gitedits

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/go-git/go-git/v5/plumbing"

	"github.com/configbutler/gitops-reverser/gitops"
	"github.com/configbutler/gitops-reverser/testenv"
)

// TestWalksEndAtTheClonesBoundary: once the worker's clone keeps only the newest commits of the
// branch (gitstore.KeptCommits, two here), edits since a commit it still has are found as before,
// edits since an older one are an unknown revision (write-back then compares the whole folder,
// as after a force-push) rather than a failure to read a parent, the baseline of a first look is
// found within what is kept, a comparison of the whole folder ends its walk at the boundary, and
// a file at a commit older than the boundary is read after the
// clone fetched the rest of the history: a proposal that waited long is still checked against Git.
func TestWalksEndAtTheClonesBoundary(t *testing.T) {
	srv := MustGitServer(t)
	url := MustRepo(t, srv, "boundary")
	first := mustPush(t, srv, "boundary", "main", testenvSig("carol"), "seed", map[string]string{cmPath("app"): "v0\n"}, nil)
	w := startWorkerWith(t, url, gitops.BatchLimits{}, func(c *gitops.WorkerConfig) { c.KeepCommits, c.RenewFloor = 2, 1 })
	commits := 0
	commit := func() {
		MustEnqueue(t, w, gitops.Change{Path: cmPath(fmt.Sprintf("cm-%d", commits)), Content: configMap("cm", fmt.Sprint(commits), 300)})
		MustFlush(t, w)
		commits++
	}
	for range 5 {
		commit()
	}
	// A renewal made while the branch had two commits keeps the first one, as the boundary. The
	// clone is renewed once it doubled since it was last made: another commit grows it.
	testenv.Eventually(t, 30*time.Second, "the clone to keep only its newest commits, the first not among them", func() (bool, string) {
		shallow := false
		err := w.Read(context.Background(), func(r gitops.Reader) error {
			for _, c := range mustLog(t, srv, "boundary") {
				shallow = shallow || (c.SHA != first && r.Shallow(plumbing.NewHash(c.SHA)))
			}
			return nil
		})
		if err == nil && !shallow {
			commit()
		}
		return shallow, fmt.Sprint(err)
	})
	person := mustPush(t, srv, "boundary", "main", testenvSig("erin"), "edit by hand", map[string]string{cmPath("app"): "v1\n"}, nil)
	log := mustLog(t, srv, "boundary")

	if r := mustEdits(t, w, log[1].SHA, 0); len(r.Edits) != 1 || r.Edits[0].Commit != person {
		t.Errorf("edits since the commit before erin's: %v, want erin's edit of app", describeEdits(r.Edits))
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := w.Edits(ctx, Query{Folder: "clusters/prod", Since: first, Ours: ours}); !errors.Is(err, ErrUnknownRevision) {
		t.Errorf("edits since the first commit, past the boundary: %v, want ErrUnknownRevision", err)
	}
	if r, err := w.Edits(ctx, Query{Folder: "clusters/prod", Ours: ours}); err != nil || r.Base == "" {
		t.Errorf("a first look: base %q, %v; want the baseline found within the kept history", r.Base, err)
	}
	if r, err := w.Edits(ctx, Query{Folder: "clusters/prod", Whole: true, Ours: ours}); err != nil || len(r.Edits) != 1 || r.Edits[0].Commit != person {
		t.Errorf("the whole folder, whose files' histories reach past the boundary: %v, %v; want erin's app only", describeEdits(r.Edits), err)
	}
	if data, err := w.File(ctx, first, cmPath("app")); err != nil || string(data) != "v0\n" {
		t.Errorf("app at the first commit, past the boundary: %q, %v; want v0", data, err)
	}
}
