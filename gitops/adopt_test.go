package gitops

import (
	"context"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/configbutler/gitops-reverser/placement"
	"github.com/configbutler/gitops-reverser/testenv"
)

// TestAdoptedRunEditsAfterADeleteInTheSameFile has one commit remove an object's document and
// edit the document after it in the same file: the edit finds its document where the run's
// removal moved it, not where the tree the run started from has it.
func TestAdoptedRunEditsAfterADeleteInTheSameFile(t *testing.T) {
	srv := MustGitServer(t)
	url := MustRepo(t, srv, "team")
	const p = "apps/settings.yaml"
	doc := func(name, v string) string {
		return "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: " + name + "\n  namespace: team\ndata:\n  k: \"" + v + "\"\n"
	}
	team := testenv.Signature{Name: "Team", Email: "team@example.com"}
	if _, err := srv.PushCommit("team", "main", team, "the team's settings", map[string]string{p: "# kept by hand\n" + doc("a", "1") + doc("b", "1") + doc("c", "1")}, nil); err != nil {
		t.Fatal(err)
	}
	w := StartWorker(t, url, "", BatchLimits{})
	key := func(name string) placement.Key {
		return placement.Key{Kind: "ConfigMap", Namespace: "team", Name: name}
	}
	MustEnqueue(t, w,
		Change{Path: cmPath("a"), Summary: "delete a", Adopt: &Adoption{Folder: "apps", Key: key("a"), Delete: true}},
		Change{Path: cmPath("b"), Summary: "update b", Adopt: &Adoption{Folder: "apps", Key: key("b"),
			Ops: []placement.Op{{Path: placement.Path{{Field: "data"}, {Field: "k"}}, Value: "2"}}}},
	)
	MustFlush(t, w)
	got, err := srv.ReadFile("team", "main", p)
	if err != nil {
		t.Fatal(err)
	}
	if want := "# kept by hand\n" + doc("b", "2") + doc("c", "1"); string(got) != want {
		t.Fatalf("%s:\n%s\nwant:\n%s", p, got, want)
	}
	if log := testenv.MustLog(t, srv, "team"); len(log) != 2 {
		t.Errorf("%d commits, want the team's and one", len(log))
	}
}

// TestPendingNamesTheFileOfAnAdoptedChange: what the worker holds for an object of an adopted
// folder is pending for the file whose document holds the object (write-back reads the remote
// there as about to be replaced), not for the object's canonical path.
func TestPendingNamesTheFileOfAnAdoptedChange(t *testing.T) {
	srv := MustGitServer(t)
	url := MustRepo(t, srv, "pending")
	const p = "apps/settings.yaml"
	team := testenv.Signature{Name: "Team", Email: "team@example.com"}
	doc := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n  namespace: team\ndata:\n  k: \"1\"\n"
	if _, err := srv.PushCommit("pending", "main", team, "the team's settings", map[string]string{p: doc}, nil); err != nil {
		t.Fatal(err)
	}
	w := StartWorker(t, url, "", BatchLimits{MaxWait: time.Hour, Quiet: time.Hour, IdleQuiet: time.Hour})
	key := placement.Key{Kind: "ConfigMap", Namespace: "team", Name: "a"}
	if got, err := w.Document(context.Background(), "apps", "", key); err != nil || string(got) != doc {
		t.Fatalf("Document = %q, %v", got, err)
	}
	MustEnqueue(t, w, Change{Path: cmPath("a"), Summary: "update a", Adopt: &Adoption{Folder: "apps", Key: key,
		Ops: []placement.Op{{Path: placement.Path{{Field: "data"}, {Field: "k"}}, Value: "2"}}}})
	var pending []string
	if err := w.Read(context.Background(), func(r Reader) error {
		pending = slices.Sorted(maps.Keys(r.Pending()))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(pending, []string{p}) {
		t.Errorf("pending %v, want [%s]", pending, p)
	}
}
