package gitedits

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"
)

// TestFilesReadsWhatACommitHolds: Files reads several paths of one commit in one visit to the
// worker, leaving out those the commit has no file at, and an unknown commit is an error.
func TestFilesReadsWhatACommitHolds(t *testing.T) {
	srv := MustGitServer(t)
	url := MustRepo(t, srv, "files")
	first := mustPush(t, srv, "files", "main", testenvSig("carol"), "seed", map[string]string{
		"apps/kustomization.yaml": "namespace: a\n", "apps/web/web.yaml": "kind: ConfigMap\n",
	}, nil)
	mustPush(t, srv, "files", "main", testenvSig("carol"), "move", map[string]string{"apps/kustomization.yaml": "namespace: b\n"}, nil)
	w := StartWorker(t, url)
	mustEdits(t, w, "", 0) // fetches the branch
	ctx := context.Background()
	got, err := w.branch.Files(ctx, first, []string{"apps/kustomization.yaml", "apps/web/kustomization.yaml", "apps/web/web.yaml"})
	if err != nil {
		t.Fatal(err)
	}
	if keys := slices.Sorted(maps.Keys(got)); !slices.Equal(keys, []string{"apps/kustomization.yaml", "apps/web/web.yaml"}) ||
		string(got["apps/kustomization.yaml"]) != "namespace: a\n" {
		t.Errorf("Files at the first commit = %q, want the kustomization as it was then and the web file", got)
	}
	if _, err := w.branch.Files(ctx, strings.Repeat("ab", 20), []string{"apps/web/web.yaml"}); !errors.Is(err, ErrUnknownRevision) {
		t.Errorf("Files at an unknown commit: %v, want ErrUnknownRevision", err)
	}
}
