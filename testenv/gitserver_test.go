package testenv

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"
)

// mustStartGitServer starts a Git server with one repository, "demo", and
// closes it when the test ends.
func mustStartGitServer(tb testing.TB) *GitServer {
	tb.Helper()
	s, err := StartGitServer(tb.TempDir(), "alice", "s3cret")
	if err != nil {
		tb.Fatalf("start git server: %v", err)
	}
	tb.Cleanup(func() {
		if err := s.Close(); err != nil {
			tb.Errorf("close git server: %v", err)
		}
	})
	if _, err := s.CreateRepo("demo"); err != nil {
		tb.Fatalf("create repo: %v", err)
	}
	return s
}

// gitCLI runs the git CLI in dir as a client would, committing as
// "Daemon <daemon@example.com>", and returns stdout.
func gitCLI(s *GitServer, dir string, args ...string) (string, error) {
	env := []string{
		"GIT_AUTHOR_NAME=Daemon", "GIT_AUTHOR_EMAIL=daemon@example.com",
		"GIT_COMMITTER_NAME=Daemon", "GIT_COMMITTER_EMAIL=daemon@example.com",
	}
	out, err := s.git(context.Background(), dir, env, args...)
	return string(out), err
}

// mustGitCLI is gitCLI that fails the test on error.
func mustGitCLI(tb testing.TB, s *GitServer, dir string, args ...string) string {
	tb.Helper()
	out, err := gitCLI(s, dir, args...)
	if err != nil {
		tb.Fatalf("%v", err)
	}
	return out
}

// mustCommitFile clones repo over HTTP, commits files with message and pushes
// to main.
func mustCommitFile(tb testing.TB, s *GitServer, message string, files map[string][]byte) {
	tb.Helper()
	clone := filepath.Join(tb.TempDir(), "clone")
	mustGitCLI(tb, s, "", "clone", "--quiet", s.AuthURL("demo"), clone)
	for name, data := range files {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(clone, name)), 0o755); err != nil {
			tb.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(clone, name), data, 0o644); err != nil {
			tb.Fatal(err)
		}
	}
	mustGitCLI(tb, s, clone, "add", "--all")
	mustGitCLI(tb, s, clone, "commit", "--quiet", "-m", message)
	mustGitCLI(tb, s, clone, "push", "--quiet", "origin", "HEAD:main")
}

// httpStatus returns the status of a GET with optional basic auth.
func httpStatus(t *testing.T, url, user, pass string) (int, http.Header) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if user != "" {
		req.SetBasicAuth(user, pass)
	}
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
	if err != nil {
		t.Fatalf("get %s: %v", url, err)
	}
	defer func() { _ = resp.Body.Close() }()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, resp.Header
}

func TestGitServerPushWithAuth(t *testing.T) {
	s := mustStartGitServer(t)
	if files, err := s.Files("demo", "main"); err != nil || len(files) != 0 {
		t.Fatalf("unborn branch: files = %v, %v; want none", files, err)
	}
	if log, err := s.Log("demo", "main"); err != nil || len(log) != 0 {
		t.Fatalf("unborn branch: log = %v, %v; want none", log, err)
	}

	message := "Add config map\n\nRecorded from the cluster.\n\n" +
		"X-ConfigButler-ClusterUID: abc\nX-ConfigButler-Operation: CREATE\n"
	mustCommitFile(t, s, message, map[string][]byte{"apps/cm.yaml": []byte("kind: ConfigMap\n")})

	files, err := s.Files("demo", "main")
	if err != nil || !reflect.DeepEqual(files, []string{"apps/cm.yaml"}) {
		t.Fatalf("files = %v, %v; want [apps/cm.yaml]", files, err)
	}
	data, err := s.ReadFile("demo", "main", "apps/cm.yaml")
	if err != nil || string(data) != "kind: ConfigMap\n" {
		t.Fatalf("read file = %q, %v", data, err)
	}
	log, err := s.Log("demo", "main")
	if err != nil || len(log) != 1 {
		t.Fatalf("log = %+v, %v; want one commit", log, err)
	}
	c := log[0]
	if c.AuthorName != "Daemon" || c.AuthorEmail != "daemon@example.com" || c.CommitterName != "Daemon" {
		t.Errorf("author = %s <%s>, committer %s; want Daemon", c.AuthorName, c.AuthorEmail, c.CommitterName)
	}
	if c.Subject != "Add config map" || len(c.Parents) != 0 || len(c.SHA) != 40 {
		t.Errorf("commit = %+v; want root commit with subject", c)
	}
	if !strings.HasPrefix(c.Body, "Recorded from the cluster.") {
		t.Errorf("body = %q", c.Body)
	}
	want := map[string]string{"X-ConfigButler-ClusterUID": "abc", "X-ConfigButler-Operation": "CREATE"}
	if !reflect.DeepEqual(c.Trailers, want) {
		t.Errorf("trailers = %v; want %v", c.Trailers, want)
	}
	if s.Requests() == 0 {
		t.Error("requests = 0 after clone and push")
	}
}

func TestGitServerRejectsWithoutAuth(t *testing.T) {
	s := mustStartGitServer(t)
	mustCommitFile(t, s, "seed", map[string][]byte{"a.txt": []byte("a")})
	base := strings.TrimPrefix(s.RepoURL("demo"), "http://")
	cases := []struct{ name, url string }{
		{"no credentials", s.RepoURL("demo")},
		{"wrong password", "http://alice:wrong@" + base},
		{"wrong user", "http://mallory:s3cret@" + base},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if out, err := gitCLI(s, "", "ls-remote", tc.url); err == nil {
				t.Errorf("ls-remote succeeded: %s", out)
			}
			clone := filepath.Join(t.TempDir(), "clone")
			mustGitCLI(t, s, "", "clone", "--quiet", s.AuthURL("demo"), clone)
			mustGitCLI(t, s, clone, "commit", "--quiet", "--allow-empty", "-m", "sneaky")
			if out, err := gitCLI(s, clone, "push", tc.url, "HEAD:main"); err == nil {
				t.Errorf("push succeeded: %s", out)
			}
			if log, err := s.Log("demo", "main"); err != nil || len(log) != 1 {
				t.Errorf("log = %d commits, %v; want only the seed", len(log), err)
			}
		})
	}
	status, header := httpStatus(t, s.URL+"/demo.git/info/refs?service=git-upload-pack", "", "")
	if status != http.StatusUnauthorized || header.Get("WWW-Authenticate") != `Basic realm="git"` {
		t.Errorf("anonymous GET = %d, WWW-Authenticate %q; want 401 with basic realm", status,
			header.Get("WWW-Authenticate"))
	}
	if status, _ := httpStatus(t, s.URL+"/demo.git/info/refs?service=git-upload-pack", "alice", "s3cret"); status != http.StatusOK {
		t.Errorf("authenticated GET = %d; want 200", status)
	}
}

func TestGitServerLargeChunkedPush(t *testing.T) {
	s := mustStartGitServer(t)
	// Incompressible and over http.postBuffer (1 MiB), so git sends it chunked;
	// over gitMemBodyBytes, so the server buffers it on disk.
	blob := make([]byte, gitMemBodyBytes+1<<20)
	if _, err := rand.Read(blob); err != nil {
		t.Fatal(err)
	}
	mustCommitFile(t, s, "large", map[string][]byte{"blob.bin": blob})
	got, err := s.ReadFile("demo", "main", "blob.bin")
	if err != nil || !bytes.Equal(got, blob) {
		t.Fatalf("read back %d bytes, %v; want the %d pushed", len(got), err, len(blob))
	}
}

func TestGitServerPushCommitAsOtherUser(t *testing.T) {
	s := mustStartGitServer(t)
	bob := Signature{Name: "Bob", Email: "bob@example.com"}
	carol := Signature{Name: "Carol", Email: "carol@example.com"}
	first, err := s.PushCommit("demo", "main", bob, "bob adds a", map[string]string{"dir/a.txt": "a"}, nil)
	if err != nil {
		t.Fatalf("first push: %v", err)
	}
	second, err := s.PushCommit("demo", "main", carol, "carol swaps a for b",
		map[string]string{"b.txt": "b"}, []string{"dir/a.txt"})
	if err != nil {
		t.Fatalf("second push: %v", err)
	}
	log, err := s.Log("demo", "main")
	if err != nil || len(log) != 2 {
		t.Fatalf("log = %+v, %v; want two commits", log, err)
	}
	if log[0].SHA != second || log[1].SHA != first || !reflect.DeepEqual(log[0].Parents, []string{first}) {
		t.Errorf("history = %s <- %s (parents %v); want %s <- %s", log[1].SHA, log[0].SHA, log[0].Parents, first, second)
	}
	if log[0].AuthorName != "Carol" || log[0].CommitterEmail != "carol@example.com" || log[1].AuthorName != "Bob" {
		t.Errorf("authors = %s/%s, %s; want Carol as author and committer, then Bob",
			log[0].AuthorName, log[0].CommitterEmail, log[1].AuthorName)
	}
	if files, err := s.Files("demo", "main"); err != nil || !reflect.DeepEqual(files, []string{"b.txt"}) {
		t.Errorf("files = %v, %v; want [b.txt]", files, err)
	}
}

func TestGitServerConcurrentPushCommitsRebase(t *testing.T) {
	s := mustStartGitServer(t)
	const users = 4
	var wg sync.WaitGroup
	errs := make(chan error, users)
	for i := range users {
		wg.Add(1)
		go func() {
			defer wg.Done()
			who := Signature{Name: fmt.Sprintf("user%d", i), Email: fmt.Sprintf("user%d@example.com", i)}
			name := fmt.Sprintf("file%d.txt", i)
			if _, err := s.PushCommit("demo", "main", who, "add "+name, map[string]string{name: name}, nil); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("push: %v", err)
	}
	log, err := s.Log("demo", "main")
	if err != nil || len(log) != users {
		t.Fatalf("log = %d commits, %v; want %d", len(log), err, users)
	}
	for i, c := range log {
		if i < len(log)-1 && !reflect.DeepEqual(c.Parents, []string{log[i+1].SHA}) {
			t.Errorf("commit %s has parents %v; want linear history", c.SHA, c.Parents)
		}
	}
}

func TestGitServerUnavailable(t *testing.T) {
	s := mustStartGitServer(t)
	refs := s.URL + "/demo.git/info/refs?service=git-upload-pack"
	s.SetAvailable(false)
	if out, err := gitCLI(s, "", "ls-remote", s.AuthURL("demo")); err == nil {
		t.Errorf("ls-remote during outage succeeded: %s", out)
	}
	if status, _ := httpStatus(t, refs, "alice", "s3cret"); status != http.StatusServiceUnavailable {
		t.Errorf("GET during outage = %d; want 503", status)
	}
	s.SetAvailable(true)
	if _, err := gitCLI(s, "", "ls-remote", s.AuthURL("demo")); err != nil {
		t.Errorf("ls-remote after outage: %v", err)
	}
}

func TestGitServerRejectsUnsafeNames(t *testing.T) {
	s := mustStartGitServer(t)
	for _, name := range []string{"", "../escape", ".hidden", "a/b", "-rf", "sp ace"} {
		if _, err := s.CreateRepo(name); err == nil {
			t.Errorf("CreateRepo(%q) succeeded; want error", name)
		}
	}
	for _, branch := range []string{"main~1", "main^", "-x", "a..b", "HEAD:x"} {
		if _, err := s.Files("demo", branch); err == nil {
			t.Errorf("Files(demo, %q) succeeded; want error", branch)
		}
	}
	if _, err := s.PushCommit("demo", "main", Signature{"Bob", "bob@example.com"}, "escape",
		map[string]string{"../outside": "x"}, nil); err == nil {
		t.Error("PushCommit wrote outside the work tree")
	}
}

func TestBufferBodyGivesChunkedBodiesALength(t *testing.T) {
	const limit = gitMemBodyBytes * 2
	cases := []struct {
		name     string
		size     int64
		chunked  bool
		tooLarge bool
	}{
		{"known length passes through", 1 << 10, false, false},
		{"small chunked body stays in memory", 1 << 10, true, false},
		{"large chunked body spills to disk", gitMemBodyBytes + 1<<10, true, false},
		{"chunked body over the limit", limit + 1, true, true},
		{"known length over the limit", limit + 1, false, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			data := bytes.Repeat([]byte("x"), int(tc.size))
			r := httptest.NewRequest(http.MethodPost, "/demo.git/git-receive-pack", bytes.NewReader(data))
			if tc.chunked {
				r.ContentLength, r.TransferEncoding = -1, []string{"chunked"}
			}
			release, err := bufferBody(httptest.NewRecorder(), r, limit)
			var maxErr *http.MaxBytesError
			if tc.tooLarge {
				if !errors.As(err, &maxErr) {
					t.Fatalf("err = %v; want *http.MaxBytesError", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("buffer body: %v", err)
			}
			defer release()
			got, err := io.ReadAll(r.Body)
			if err != nil || r.ContentLength != tc.size || len(r.TransferEncoding) != 0 || !bytes.Equal(got, data) {
				t.Errorf("length %d, encoding %v, read %d bytes, %v; want %d plain bytes",
					r.ContentLength, r.TransferEncoding, len(got), err, tc.size)
			}
		})
	}
}

// TestTreeHashIsGits: TreeHash of a folder's files is the tree git made of them, including git's
// order of a folder ("a", sorted as "a/") against files whose names sort around it, and
// BranchTip (from the ref's file, then from packed-refs) and TreeAt read what was pushed.
func TestTreeHashIsGits(t *testing.T) {
	s := mustStartGitServer(t)
	files := map[string]string{"f/a.b": "1", "f/a/x": "2", "f/a0": "3", "f/a/y/z": "4", "f/b-c": "5", "other": "6"}
	sha, err := s.PushCommit("demo", "main", Signature{Name: "Bob", Email: "bob@example.com"}, "add", files, nil)
	if err != nil {
		t.Fatal(err)
	}
	if tip, err := s.BranchTip("demo", "main"); err != nil || tip != sha {
		t.Errorf("BranchTip = %q, %v; want %s", tip, err, sha)
	}
	want := map[string]string{}
	for path, content := range files {
		if rest, ok := strings.CutPrefix(path, "f/"); ok {
			want[rest] = BlobHash([]byte(content))
		}
	}
	hash, err := TreeHash(want)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := s.TreeAt("demo", sha, "f"); err != nil || got != hash {
		t.Errorf("git's tree of f = %q, %v; TreeHash = %s", got, err, hash)
	}
	delete(want, "a0")
	if other, _ := TreeHash(want); other == hash {
		t.Error("TreeHash without a0 is the same")
	}
	if got, err := s.TreeAt("demo", sha, "missing"); err != nil || got != "" {
		t.Errorf("TreeAt of a missing folder = %q, %v; want none", got, err)
	}
	if tip, err := s.BranchTip("demo", "unborn"); err != nil || tip != "" {
		t.Errorf("BranchTip of an unborn branch = %q, %v; want none", tip, err)
	}
	dir, err := s.repoDir("demo")
	if err != nil {
		t.Fatal(err)
	}
	if out, err := s.gitDir(dir, "pack-refs", "--all"); err != nil {
		t.Fatalf("pack-refs: %v: %s", err, out)
	}
	if tip, err := s.BranchTip("demo", "main"); err != nil || tip != sha {
		t.Errorf("BranchTip of a packed ref = %q, %v; want %s", tip, err, sha)
	}
}

// TestGitServerUpkeepByHand: pushes to a repository whose upkeep is by hand leave their packs
// as they come, past the count at which git gc --auto repacks; Upkeep then repacks them.
func TestGitServerUpkeepByHand(t *testing.T) {
	s := mustStartGitServer(t)
	dir, err := s.repoDir("demo")
	if err != nil {
		t.Fatal(err)
	}
	// Every push is kept as a pack, and gc --auto repacks past two.
	mustGitCLI(t, s, dir, "config", "receive.unpackLimit", "1")
	mustGitCLI(t, s, dir, "config", "gc.autoPackLimit", "2")
	if err := s.UpkeepByHand("demo"); err != nil {
		t.Fatal(err)
	}
	packs := func() int {
		found, err := filepath.Glob(filepath.Join(dir, "objects", "pack", "*.pack"))
		if err != nil {
			t.Fatal(err)
		}
		return len(found)
	}
	for i := range 4 {
		if _, err := s.PushCommit("demo", "main", Signature{Name: "Bob", Email: "bob@example.com"}, "change",
			map[string]string{fmt.Sprintf("f%d.txt", i): "x"}, nil); err != nil {
			t.Fatal(err)
		}
	}
	if got := packs(); got != 4 {
		t.Fatalf("%d packs after 4 pushes; want 4, none repacked by the pushes", got)
	}
	if err := s.Upkeep("demo"); err != nil {
		t.Fatal(err)
	}
	if got := packs(); got != 1 {
		t.Fatalf("%d packs after Upkeep; want 1", got)
	}
	if files, err := s.Files("demo", "main"); err != nil || len(files) != 4 {
		t.Errorf("files = %v, %v; want the 4 pushed", files, err)
	}
}
