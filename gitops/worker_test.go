package gitops

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/configbutler/gitops-reverser/layout"
	"github.com/configbutler/gitops-reverser/testenv"
)

func TestPathIsVersionless(t *testing.T) {
	cases := []struct {
		name                                     string
		base, group, resource, namespace, object string
		want                                     string
	}{
		{"core namespaced", "clusters/prod", "", "configmaps", "default", "web", "clusters/prod/default/configmaps/web.yaml"},
		{"apps group", "clusters/prod/", "apps", "deployments", "default", "web", "clusters/prod/default/deployments.apps/web.yaml"},
		{"cluster scoped", "clusters/prod", "", "namespaces", "", "team-a", "clusters/prod/_cluster/namespaces/team-a.yaml"},
		{"crd group", "./clusters//prod/", "example.com", "widgets", "team-a", "w1", "clusters/prod/team-a/widgets.example.com/w1.yaml"},
		{"no base folder", "", "rbac.authorization.k8s.io", "clusterroles", "", "admin", "_cluster/clusterroles.rbac.authorization.k8s.io/admin.yaml"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := layout.Path(c.base, c.group, c.resource, c.namespace, c.object); got != c.want {
				t.Errorf("Path = %q, want %q", got, c.want)
			}
		})
	}
}

func TestFirstCommitCreatesBranchInEmptyRemote(t *testing.T) {
	srv := MustGitServer(t)
	w := StartWorker(t, MustRepo(t, srv, "empty"), "", BatchLimits{})
	MustEnqueue(t, w,
		Change{Path: cmPath("a"), Content: configMap("a", "1", 200), Summary: "create configmaps/default/a"},
		Change{Path: cmPath("b"), Content: configMap("b", "1", 200), Summary: "create configmaps/default/b"},
	)
	MustFlush(t, w)
	if got, want := testenv.MustFiles(t, srv, "empty"), []string{cmPath("a"), cmPath("b")}; !slices.Equal(got, want) {
		t.Fatalf("files = %v, want %v", got, want)
	}
	log := testenv.MustLog(t, srv, "empty")
	if len(log) != 1 || len(log[0].Parents) != 0 {
		t.Fatalf("want one root commit, got %+v", log)
	}
	if st := w.Status(); st.LastPushed != log[0].SHA || st.LastPushedAuthor.Name != log[0].AuthorName {
		t.Errorf("status last pushed = %q by %+v, want %q by %q", st.LastPushed, st.LastPushedAuthor, log[0].SHA, log[0].AuthorName)
	}
	testenv.MustFsck(t, srv, "empty")
}

func TestUnchangedContentMakesNoCommit(t *testing.T) {
	srv := MustGitServer(t)
	w := StartWorker(t, MustRepo(t, srv, "same"), "", BatchLimits{})
	batch := []Change{
		{Path: cmPath("a"), Content: configMap("a", "1", 300)},
		{Path: cmPath("b"), Content: configMap("b", "1", 300)},
	}
	MustEnqueue(t, w, batch...)
	MustFlush(t, w)
	before := testenv.MustLog(t, srv, "same")
	MustEnqueue(t, w, batch...)
	MustEnqueue(t, w, Change{Path: cmPath("missing")}) // deleting a missing file is a no-op
	MustFlush(t, w)
	after := testenv.MustLog(t, srv, "same")
	if len(after) != len(before) || after[0].SHA != before[0].SHA {
		t.Fatalf("identical batch made commits: before %d, after %d", len(before), len(after))
	}
	if got := w.metric(t, "objects_written_total"); got != 2 {
		t.Errorf("objects written = %v, want 2", got)
	}
}

func TestCommitPerContiguousAuthorRun(t *testing.T) {
	srv := MustGitServer(t)
	w := StartWorker(t, MustRepo(t, srv, "authors"), "", BatchLimits{})
	alice := Signature{Name: "alice", Email: "alice@example.com"}
	bob := Signature{Name: "bob", Email: "bob@example.com"}
	MustEnqueue(t, w,
		Change{Path: cmPath("a1"), Content: configMap("a1", "1", 100), Credit: Credit{Author: alice}, Summary: "update configmaps/default/a1"},
		Change{Path: cmPath("a2"), Content: configMap("a2", "1", 100), Credit: Credit{Author: alice}, Summary: "update configmaps/default/a2"},
		Change{Path: cmPath("b1"), Content: configMap("b1", "1", 100), Credit: Credit{Author: bob}, Summary: "update configmaps/default/b1"},
		Change{Path: cmPath("a3"), Content: configMap("a3", "1", 100), Credit: Credit{Author: alice}, Summary: "update configmaps/default/a3"},
	)
	MustFlush(t, w)
	log := testenv.MustLog(t, srv, "authors")
	if len(log) != 3 {
		t.Fatalf("want 3 commits, got %d: %+v", len(log), log)
	}
	wantAuthors := []string{"alice", "bob", "alice"} // oldest first
	for i, c := range log {
		want := wantAuthors[len(log)-1-i]
		if c.AuthorName != want {
			t.Errorf("commit %d author = %q, want %q", i, c.AuthorName, want)
		}
		if c.CommitterName != testBot.Name || c.CommitterEmail != testBot.Email {
			t.Errorf("commit %d committer = %s <%s>, want the daemon", i, c.CommitterName, c.CommitterEmail)
		}
		for _, tr := range testTrailers {
			if c.Trailers[tr[0]] != tr[1] {
				t.Errorf("commit %d trailer %s = %q, want %q", i, tr[0], c.Trailers[tr[0]], tr[1])
			}
		}
	}
	if log[0].Subject != "update configmaps/default/a3" {
		t.Errorf("subject = %q", log[0].Subject)
	}
	testenv.MustFsck(t, srv, "authors")
}

func TestFlushTriggers(t *testing.T) {
	srv := MustGitServer(t)
	never := time.Hour
	commits := func(repo string) func() (bool, string) {
		return func() (bool, string) {
			log := testenv.MustLog(t, srv, repo)
			return len(log) > 0, fmt.Sprintf("%d commits", len(log))
		}
	}
	t.Run("max files", func(t *testing.T) {
		w := StartWorker(t, MustRepo(t, srv, "files"), "", BatchLimits{MaxFiles: 5, MaxWait: never, Quiet: never, IdleQuiet: never})
		for i := range 5 {
			MustEnqueue(t, w, Change{Path: cmPath(fmt.Sprint(i)), Content: configMap(fmt.Sprint(i), "1", 100)})
		}
		testenv.Eventually(t, 30*time.Second, "a commit at 5 files", commits("files"))
	})
	t.Run("max bytes", func(t *testing.T) {
		w := StartWorker(t, MustRepo(t, srv, "bytes"), "", BatchLimits{MaxBytes: 1000, MaxWait: never, Quiet: never, IdleQuiet: never})
		MustEnqueue(t, w, Change{Path: cmPath("a"), Content: configMap("a", "1", 600)},
			Change{Path: cmPath("b"), Content: configMap("b", "1", 600)})
		testenv.Eventually(t, 30*time.Second, "a commit at 1000 bytes", commits("bytes"))
	})
	t.Run("quiet period", func(t *testing.T) {
		w := StartWorker(t, MustRepo(t, srv, "quiet"), "", BatchLimits{MaxWait: never, Quiet: 100 * time.Millisecond})
		MustEnqueue(t, w, Change{Path: cmPath("a"), Content: configMap("a", "1", 100)})
		testenv.Eventually(t, 30*time.Second, "a commit after the quiet period", commits("quiet"))
	})
	t.Run("max wait under constant churn", func(t *testing.T) {
		w := StartWorker(t, MustRepo(t, srv, "churn"), "", BatchLimits{MaxWait: 300 * time.Millisecond, Quiet: never, IdleQuiet: never})
		landed := false
		for i := 0; i < 1000 && !landed; i++ { // a change every 10 ms never leaves a quiet period
			MustEnqueue(t, w, Change{Path: cmPath("a"), Content: configMap("a", fmt.Sprint(i), 100)})
			log, err := srv.Log("churn", "main")
			if err != nil {
				t.Fatal(err)
			}
			landed = len(log) > 0
			time.Sleep(10 * time.Millisecond) // the churn's pace, not synchronisation
		}
		if !landed {
			t.Fatal("no commit while changes kept arriving")
		}
	})
}

func TestSyncDeletesOrphansOnlyInScope(t *testing.T) {
	srv := MustGitServer(t)
	url := MustRepo(t, srv, "orphans")
	keep, orphan := cmPath("keep"), cmPath("orphan")
	outside := layout.Path("clusters/staging", "", "configmaps", "default", "other")
	_, err := srv.PushCommit("orphans", "main", testenvSig("carol"), "seed", map[string]string{
		"README.md":               "hello\n",
		"clusters/prod/notes.txt": "not yaml\n",
		keep:                      "keep\n",
		orphan:                    "orphan\n",
		cmPath("nested/deeper"):   "nested orphan\n",
		outside:                   "outside\n",
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	w := StartWorker(t, url, "", BatchLimits{})
	created := cmPath("created-then-orphaned")
	MustEnqueue(t, w, Change{Path: created, Content: []byte("x\n")})
	if err := w.Sync(Sync{Scopes: []string{"clusters/prod/"}, Live: map[string]struct{}{keep: {}}}); err != nil {
		t.Fatal(err)
	}
	MustFlush(t, w)
	want := []string{"README.md", outside, "clusters/prod/notes.txt", keep}
	slices.Sort(want)
	if got := testenv.MustFiles(t, srv, "orphans"); !slices.Equal(got, want) {
		t.Fatalf("files = %v, want %v", got, want)
	}
	testenv.MustFsck(t, srv, "orphans")
}

func TestSyncWildcardScopeCoversEveryNamespaceFolder(t *testing.T) {
	srv := MustGitServer(t)
	url := MustRepo(t, srv, "wildcard")
	live := layout.Path("clusters/prod", "", "configmaps", "team-b", "live")
	otherResource := layout.Path("clusters/prod", "apps", "deployments", "team-a", "web")
	clusterScoped := layout.Path("clusters/prod", "", "namespaces", "", "team-a")
	_, err := srv.PushCommit("wildcard", "main", testenvSig("carol"), "seed", map[string]string{
		layout.Path("clusters/prod", "", "configmaps", "team-a", "gone"): "x\n",
		layout.Path("clusters/prod", "", "configmaps", "team-b", "gone"): "x\n",
		live:          "live\n",
		otherResource: "stays\n",
		clusterScoped: "stays\n",
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	w := StartWorker(t, url, "", BatchLimits{})
	if err := w.Sync(Sync{Scopes: []string{"clusters/prod/*/configmaps/"}, Live: map[string]struct{}{live: {}}}); err != nil {
		t.Fatal(err)
	}
	MustFlush(t, w)
	want := []string{clusterScoped, live, otherResource}
	slices.Sort(want)
	if got := testenv.MustFiles(t, srv, "wildcard"); !slices.Equal(got, want) {
		t.Fatalf("files = %v, want %v", got, want)
	}
}

func TestUnderScope(t *testing.T) {
	cases := []struct {
		path, scope string
		want        bool
	}{
		{"base/ns/configmaps/a.yaml", "base/ns/configmaps/", true},
		{"base/ns/configmaps/a.yaml", "base/*/configmaps/", true},
		{"base/ns/services/a.yaml", "base/*/configmaps/", false},
		{"other/ns/configmaps/a.yaml", "base/*/configmaps/", false},
		{"ns/configmaps/a.yaml", "*/configmaps/", true},
		{"base/configmaps/a.yaml", "base/*/configmaps/", false},
	}
	for _, tc := range cases {
		if got := underScope(tc.path, tc.scope); got != tc.want {
			t.Errorf("underScope(%q, %q) = %v, want %v", tc.path, tc.scope, got, tc.want)
		}
	}
}
