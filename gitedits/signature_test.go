package gitedits

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/configbutler/gitops-reverser/gitops"
)

// hostileAuthor is the author line of a commit written by hand: its name holds the delimiters
// of the email, which Git itself would never write.
const hostileAuthor = `<script>alert(1)</script> "><img src=x onerror=alert(1)> <xss@example.com> 1700000000 +0000`

// TestParseSignature: the email of an ident is its last "<…>" before the time, the name what
// comes before it, both cleaned; ordinary idents come out as they are.
func TestParseSignature(t *testing.T) {
	tests := []struct {
		name, line string
		want       gitops.Signature
		when       int64 // 0: no time
	}{
		{"plain", "Alice Example <alice@example.com> 1700000000 +0000",
			gitops.Signature{Name: "Alice Example", Email: "alice@example.com"}, 1700000000},
		{"unicode", "Zoë O’Neil 山田 <zoë@例え.jp> 1700000001 +0900",
			gitops.Signature{Name: "Zoë O’Neil 山田", Email: "zoë@例え.jp"}, 1700000001},
		{"inner spaces and a trailing dot", "Pat  van der Doe Jr. <pat@example.com> 1700000002 -0130",
			gitops.Signature{Name: "Pat  van der Doe Jr.", Email: "pat@example.com"}, 1700000002},
		{"no name", " <anon@example.com> 1700000003 +0000",
			gitops.Signature{Email: "anon@example.com"}, 1700000003},
		{"no email", "Alice <> 1700000004 +0000", gitops.Signature{Name: "Alice"}, 1700000004},
		{"hostile", hostileAuthor,
			gitops.Signature{Name: `scriptalert(1)/script "img src=x onerror=alert(1)`, Email: "xss@example.com"}, 1700000000},
		{"email with an extra '>'", "Bob <bob@example.com>> 1700000005 +0000",
			gitops.Signature{Name: "Bob", Email: "bob@example.com"}, 1700000005},
		{"crud around the name", ` "Carol"; <carol@example.com> 1700000006 +0000`,
			gitops.Signature{Name: "Carol", Email: "carol@example.com"}, 1700000006},
		{"no time", "Dave <dave@example.com>", gitops.Signature{Name: "Dave", Email: "dave@example.com"}, 0},
		{"no email pair", "Erin <erin@example.com 1700000007 +0000", gitops.Signature{Name: "Erin"}, 0},
		{"nothing", "", gitops.Signature{}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, when := parseSignature(tt.line)
			if got != tt.want {
				t.Errorf("parseSignature(%q) = %q, want %q", tt.line, got, tt.want)
			}
			if tt.when == 0 && !when.IsZero() || tt.when != 0 && when.Unix() != tt.when {
				t.Errorf("parseSignature(%q) time = %v, want Unix %d", tt.line, when, tt.when)
			}
		})
	}
	_, when := parseSignature("Fay <fay@example.com> 1700000000 -0130")
	if _, off := when.Zone(); off != -90*60 {
		t.Errorf("zone offset = %d, want -5400", off)
	}
}

// FuzzParseSignature: whatever the line, the signature read is clean: no delimiter of an ident
// in the name or the email, and cleaning it again changes nothing.
func FuzzParseSignature(f *testing.F) {
	for _, seed := range []string{hostileAuthor, "Alice <alice@example.com> 1700000000 +0000", " <> 0 +0000",
		"<<a>> <b> 1 -0000", "Zoë <z@x> 1 +0100>", "\"x\n<y\x00> 1"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, line string) {
		sig, _ := parseSignature(line)
		if strings.ContainsAny(sig.Name+sig.Email, "<>\n\r\x00") || sig.Clean() != sig {
			t.Fatalf("parseSignature(%q) = %q: not a clean ident", line, sig)
		}
	})
}

// TestHandWrittenAuthorRoundTrip: a person pushes a commit written by hand whose author name
// holds '<' and '>'. Write-back's edit credits a clean name and the email apart, and the commit
// the daemon writes under that credit passes git fsck --strict and reads back the same.
func TestHandWrittenAuthorRoundTrip(t *testing.T) {
	srv := MustGitServer(t)
	url := MustRepo(t, srv, "hostile")
	path := cmPath("a")
	seed := mustPush(t, srv, "hostile", "main", testenvSig("carol"), "seed", map[string]string{path: "1\n"}, nil)
	w := StartWorker(t, url)
	hostile := pushHandWrittenCommit(t, "hostile", path, "2 by hand\n", personClone(t, srv, "hostile"))

	r := mustEdits(t, w, seed, 0)
	want := gitops.Signature{Name: `scriptalert(1)/script "img src=x onerror=alert(1)`, Email: "xss@example.com"}
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
