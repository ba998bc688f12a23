package gitops

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/configbutler/gitops-reverser/layout"
	"github.com/configbutler/gitops-reverser/testenv"
)

func TestConcurrentPushesFromAnotherUserLoseNothing(t *testing.T) {
	srv := MustGitServer(t)
	url := MustRepo(t, srv, "race")
	w := StartWorker(t, url, "", BatchLimits{MaxFiles: 8, Quiet: 50 * time.Millisecond})

	const theirs, ours = 12, 90
	var wg sync.WaitGroup
	var theirSHAs []string
	var theirErr error
	wg.Add(1)
	go func() {
		defer wg.Done()
		theirSHAs, theirErr = pushAsOtherUser(srv, "race", theirs)
	}()
	for i := range ours {
		MustEnqueue(t, w, Change{Path: cmPath(fmt.Sprint(i)), Content: configMap(fmt.Sprint(i), "1", 200)})
		time.Sleep(40 * time.Millisecond) // spread our changes over the other user's pushes
	}
	wg.Wait()
	if theirErr != nil {
		t.Fatal(theirErr)
	}
	// However the race went on a loaded machine, end with a push the worker cannot know of: its
	// next push must be rejected and replayed on the new tip.
	last, err := srv.PushCommit("race", "main", testenvSig("dave"), "manual edit last", map[string]string{"manual/last.txt": "edit\n"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	theirSHAs = append(theirSHAs, last)
	MustEnqueue(t, w, Change{Path: cmPath("last"), Content: configMap("last", "1", 200)})
	MustFlush(t, w)

	log := testenv.MustLog(t, srv, "race")
	shas := map[string]bool{}
	for _, c := range log {
		shas[c.SHA] = true
		if len(c.Parents) > 1 {
			t.Errorf("merge commit %s: history must stay linear", c.SHA)
		}
	}
	for _, sha := range theirSHAs {
		if !shas[sha] {
			t.Errorf("the other user's commit %s was lost", sha)
		}
	}
	files := testenv.MustFiles(t, srv, "race")
	for i := range theirs {
		if !slices.Contains(files, fmt.Sprintf("manual/%d.txt", i)) {
			t.Errorf("manual/%d.txt missing", i)
		}
	}
	for i := range ours {
		if !slices.Contains(files, cmPath(fmt.Sprint(i))) {
			t.Errorf("%s missing", cmPath(fmt.Sprint(i)))
		}
	}
	if got := w.metric(t, "rebase_retries_total"); got == 0 {
		t.Error("want rebase retries > 0: the remote moved under the worker")
	}
	testenv.MustFsck(t, srv, "race")
}

// pushAsOtherUser pushes n commits to repo as another user, about every 200 ms, and returns
// their SHAs.
func pushAsOtherUser(srv *testenv.GitServer, repo string, n int) ([]string, error) {
	var shas []string
	for i := range n {
		var sha string
		var err error
		for range 5 { // the helper gives up after 10 lost races; a person would try again
			sha, err = srv.PushCommit(repo, "main", testenvSig("dave"), fmt.Sprintf("manual edit %d", i),
				map[string]string{fmt.Sprintf("manual/%d.txt", i): "edit\n"}, nil)
			if err == nil {
				break
			}
		}
		if err != nil {
			return shas, err
		}
		shas = append(shas, sha)
		time.Sleep(200 * time.Millisecond) // the other user's pace
	}
	return shas, nil
}

func TestRemoteOutageRetriedUntilItLands(t *testing.T) {
	srv := MustGitServer(t)
	w := StartWorker(t, MustRepo(t, srv, "outage"), "", BatchLimits{Quiet: 10 * time.Millisecond})
	MustEnqueue(t, w, Change{Path: cmPath("before"), Content: configMap("before", "1", 100)})
	MustFlush(t, w)

	srv.SetAvailable(false)
	MustEnqueue(t, w, Change{Path: cmPath("during"), Content: configMap("during", "1", 100)})
	testenv.Eventually(t, 30*time.Second, "push failures", func() (bool, string) {
		return w.metric(t, "push_failures_total") >= 2, fmt.Sprint(w.metric(t, "push_failures_total"))
	})
	if w.Status().LastError == nil || w.Status().Pending == 0 {
		t.Errorf("status during outage = %+v, want an error and pending changes", w.Status())
	}
	srv.SetAvailable(true)
	testenv.Eventually(t, 30*time.Second, "the change to land without another enqueue", func() (bool, string) {
		files := testenv.MustFiles(t, srv, "outage")
		return slices.Contains(files, cmPath("during")), fmt.Sprint(files)
	})
	testenv.Eventually(t, 10*time.Second, "status to clear", func() (bool, string) {
		s := w.Status()
		return s.LastError == nil && s.Pending == 0, fmt.Sprintf("%+v", s)
	})
}

func TestRestartReusesOrRecreatesClone(t *testing.T) {
	srv := MustGitServer(t)
	url := MustRepo(t, srv, "restart")
	workDir := t.TempDir()
	w := StartWorker(t, url, workDir, BatchLimits{})
	MustEnqueue(t, w, Change{Path: cmPath("a"), Content: configMap("a", "1", 100)})
	MustFlush(t, w)
	if err := w.stop(); err != nil {
		t.Fatal(err)
	}
	if _, err := srv.PushCommit("restart", "main", testenvSig("erin"), "manual", map[string]string{"manual.txt": "x\n"}, nil); err != nil {
		t.Fatal(err)
	}

	t.Run("existing clone fetches and continues", func(t *testing.T) {
		w := StartWorker(t, url, workDir, BatchLimits{})
		MustEnqueue(t, w, Change{Path: cmPath("b"), Content: configMap("b", "1", 100)})
		MustFlush(t, w)
		if err := w.stop(); err != nil {
			t.Fatal(err)
		}
		want := []string{cmPath("a"), cmPath("b"), "manual.txt"}
		if got := testenv.MustFiles(t, srv, "restart"); !slices.Equal(got, want) {
			t.Fatalf("files = %v, want %v", got, want)
		}
	})
	t.Run("corrupt clone is recreated", func(t *testing.T) {
		dir := filepath.Join(workDir, WorkerKey(url, "main"))
		packs, _ := filepath.Glob(filepath.Join(dir, "objects", "pack", "*"))
		for _, p := range packs {
			if err := os.WriteFile(p, []byte("garbage"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		w := StartWorker(t, url, workDir, BatchLimits{})
		MustEnqueue(t, w, Change{Path: cmPath("c"), Content: configMap("c", "1", 100)})
		MustFlush(t, w)
		want := []string{cmPath("a"), cmPath("b"), cmPath("c"), "manual.txt"}
		if got := testenv.MustFiles(t, srv, "restart"); !slices.Equal(got, want) {
			t.Fatalf("files = %v, want %v", got, want)
		}
		testenv.MustFsck(t, srv, "restart")
	})
}

func TestUpdateIntoLargeRepo(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a 50,000-file repository")
	}
	srv := MustGitServer(t)
	url := MustLargeRepo(t, srv, "large", 50, 1000)
	w := StartWorker(t, url, "", BatchLimits{})
	path := largePath(7, 123)
	MustEnqueue(t, w, Change{Path: path, Content: configMap("changed", "2", 1024)})
	MustFlush(t, w)
	got, err := srv.ReadFile("large", "main", path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, configMap("changed", "2", 1024)) {
		t.Fatalf("content not updated: %q", got)
	}
	if files := testenv.MustFiles(t, srv, "large"); len(files) != 50*1000 {
		t.Fatalf("files = %d, want 50000", len(files))
	}
	if log := testenv.MustLog(t, srv, "large"); len(log) != 2 || len(log[0].Parents) != 1 {
		t.Fatalf("want the seed commit and one update, got %d commits", len(log))
	}
}

// largePath is the file of ConfigMap i in namespace ns of the large repository.
func largePath(ns, i int) string {
	return layout.Path("clusters/prod", "", "configmaps", fmt.Sprintf("ns-%03d", ns), fmt.Sprintf("cm-%05d", i))
}

// MustLargeRepo creates a repository with namespaces×perNamespace ConfigMaps of ~1 KiB in one
// commit, with git fast-import straight into the bare repository.
func MustLargeRepo(tb testing.TB, srv *testenv.GitServer, name string, namespaces, perNamespace int) string {
	tb.Helper()
	url := MustRepo(tb, srv, name)
	var stream bytes.Buffer
	stream.WriteString("commit refs/heads/main\ncommitter seed <seed@example.com> 1700000000 +0000\ndata 5\nseed\n")
	for ns := range namespaces {
		for i := range perNamespace {
			content := configMap(fmt.Sprintf("cm-%05d", i), fmt.Sprint(ns), 1024)
			fmt.Fprintf(&stream, "M 100644 inline %s\ndata %d\n", largePath(ns, i), len(content))
			stream.Write(content)
			stream.WriteString("\n")
		}
	}
	cmd := exec.Command("git", "--git-dir="+filepath.Join(srv.Root, name+".git"), "fast-import", "--quiet")
	cmd.Stdin = &stream
	if out, err := cmd.CombinedOutput(); err != nil {
		tb.Fatalf("fast-import: %v\n%s", err, strings.TrimSpace(string(out)))
	}
	return url
}
