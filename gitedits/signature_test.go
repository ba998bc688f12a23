package gitedits

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/configbutler/gitops-reverser/gitops"
	"github.com/configbutler/gitops-reverser/gitstore"
	"github.com/configbutler/gitops-reverser/testenv"
)

// hostileAuthor is the author line of a commit written by hand: its name holds the delimiters
// of the email, which Git itself would never write.
const hostileAuthor = `<script>alert(1)</script> "><img src=x onerror=alert(1)> <xss@example.com> 1700000000 +0000`

// TestAuthorsReadAsGitReadsThem: an edit is credited to the author git log shows for its commit,
// cleaned (gitops.Signature.Clean), at the time git shows, whatever its author line holds; the
// walk orders commits by the committer time git reads.
func TestAuthorsReadAsGitReadsThem(t *testing.T) {
	want := testenv.GitReadsAuthors(t, testenv.TrickyAuthorLines)
	for i, l := range testenv.TrickyAuthorLines {
		raw := fmt.Sprintf("tree 4b825dc642cb6eb9a060e54bf8d69288fbee4904\nauthor %s\ncommitter %s\n\nm\n", l.Line, l.Line)
		n, err := parseCommit([]byte(raw))
		if err != nil {
			t.Fatalf("%s: %v", l.Name, err)
		}
		git := want[i]
		clean := gitops.Signature{Name: git.Name, Email: git.Email}.Clean()
		git.Name, git.Email = clean.Name, clean.Email
		got := testenv.GitAuthor{Name: n.author.Name, Email: n.author.Email}
		if !n.when.IsZero() {
			got.Unix, got.Clock = strconv.FormatInt(n.when.Unix(), 10), n.when.Format(time.DateTime)
		}
		if got != git {
			t.Errorf("%s: %q reads as %q, git reads %q (cleaned)", l.Name, l.Line, got, git)
		}
		if committed := strconv.FormatInt(n.committed, 10); committed != git.Unix && (git.Unix != "" || n.committed != 0) {
			t.Errorf("%s: committer time %s, git reads %q (0 for none)", l.Name, committed, git.Unix)
		}
	}
}

// FuzzSignatureOf: whatever the line, the signature read is clean: no delimiter of an ident
// in the name or the email, and cleaning it again changes nothing.
func FuzzSignatureOf(f *testing.F) {
	for _, seed := range []string{hostileAuthor, "Alice <alice@example.com> 1700000000 +0000", " <> 0 +0000",
		"<<a>> <b> 1 -0000", "Zoë <z@x> 1 +0100>", "\"x\n<y\x00> 1"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, line string) {
		sig := signatureOf(gitstore.ParseIdent(line))
		if strings.ContainsAny(sig.Name+sig.Email, "<>\n\r\x00") || sig.Clean() != sig {
			t.Fatalf("signatureOf(%q) = %q: not a clean ident", line, sig)
		}
	})
}

// TestHandWrittenAuthorRoundTrip: a person pushes a commit written by hand whose author name
// holds '<' and '>'. Write-back's edit credits whom git log shows (no name, the email "script":
// what lies between the first '<' and the next '>'), cleaned, and the commit the daemon writes
// under that credit passes git fsck --strict and reads back the same.
func TestHandWrittenAuthorRoundTrip(t *testing.T) {
	srv := MustGitServer(t)
	url := MustRepo(t, srv, "hostile")
	path := cmPath("a")
	seed := mustPush(t, srv, "hostile", "main", testenvSig("carol"), "seed", map[string]string{path: "1\n"}, nil)
	w := StartWorker(t, url)
	hostile := pushHandWrittenCommit(t, "hostile", path, "2 by hand\n", personClone(t, srv, "hostile"))

	r := mustEdits(t, w, seed, 0)
	want := gitops.Signature{Email: "script"}
	if len(r.Edits) != 1 || r.Edits[0].Commit != hostile || r.Edits[0].Author != want ||
		r.Edits[0].When.Unix() != 1700000000 {
		t.Fatalf("edits = %q, want %s by %q at 1700000000", describeEdits(r.Edits), path, want)
	}

	// What applying the proposal credits: the edit's author, as write-back passes it on.
	MustEnqueue(t, w, gitops.Change{Path: path, Content: []byte("3 applied\n"), Summary: "apply",
		Credit: gitops.Credit{Author: r.Edits[0].Author}})
	MustFlush(t, w)
	log := mustLog(t, srv, "hostile")
	if got := log[0].AuthorName + "|" + log[0].AuthorEmail; log[1].SHA != hostile || got != want.Name+"|"+want.Email {
		t.Fatalf("the daemon's commit is authored %q (on %s), want %q on %s", got, log[1].SHA, want.Name+"|"+want.Email, hostile)
	}
	mustFsckBut(t, srv.Root, "hostile", hostile)
}

// pushHandWrittenCommit commits content at path in the clone of git with hostileAuthor as its
// author, written with git hash-object as git commit would refuse to, and pushes it to main.
func pushHandWrittenCommit(t *testing.T, repo, path, content string, git func(args ...string) string) string {
	t.Helper()
	writeFile(t, git, path, content)
	git("add", "-A")
	tree := strings.TrimSpace(git("write-tree"))
	parent := strings.TrimSpace(git("rev-parse", "HEAD"))
	raw := fmt.Sprintf("tree %s\nparent %s\nauthor %s\ncommitter erin <erin@example.com> 1700000000 +0000\n\nby hand\n",
		tree, parent, hostileAuthor)
	file := filepath.Join(t.TempDir(), "commit")
	if err := os.WriteFile(file, []byte(raw), 0o644); err != nil {
		t.Fatal(err)
	}
	sha := strings.TrimSpace(git("hash-object", "-t", "commit", "-w", "--literally", file))
	git("push", "-q", "origin", sha+":refs/heads/main")
	return sha
}

// mustFsckBut runs git fsck --strict on the remote repo, skipping only the commit known to be
// broken, and checks first that fsck does find that one broken: the check reads idents.
func mustFsckBut(t *testing.T, root, repo, broken string) {
	t.Helper()
	skip := filepath.Join(t.TempDir(), "skip")
	if err := os.WriteFile(skip, []byte(broken+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	fsck := func(args ...string) ([]byte, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		args = append([]string{"--git-dir=" + filepath.Join(root, repo+".git")}, args...)
		return exec.CommandContext(ctx, "git", append(args, "fsck", "--strict", "--no-dangling")...).CombinedOutput()
	}
	if out, err := fsck(); err == nil || !strings.Contains(string(out), broken) {
		t.Fatalf("git fsck --strict passed the hand-written commit %s: %v\n%s", broken, err, out)
	}
	if out, err := fsck("-c", "fsck.skipList="+skip); err != nil {
		t.Fatalf("git fsck --strict: %v\n%s", err, out)
	}
}
