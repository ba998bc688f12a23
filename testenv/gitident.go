package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// AuthorLine is the value of a commit's author line, named for what makes it hard to read.
type AuthorLine struct{ Name, Line string }

// TrickyAuthorLines are author lines that git itself never writes but a commit object written by
// hand (git hash-object --literally, another tool) may hold. Every reader of commits must read
// them as git does (GitReadsAuthors says how).
var TrickyAuthorLines = []AuthorLine{
	{"plain", "Alice Example <alice@example.com> 1700000000 +0000"},
	{"unicode", "Zoë O’Neil 山田 <zoë@例え.jp> 1700000001 +0900"},
	{"no name", " <anon@example.com> 1700000003 +0000"},
	{"empty email", "Alice <> 1700000004 +0000"},
	{"spaces inside the brackets", "  Sp  <  e@x  >  17 +0000"},
	{"no space before the date", "Dave <d@x>1700000000 +0100"},
	{"tabs around the date", "Dave <d@x>\t1700000000\t+0100"},
	{"name holding an email", "Mallory <mallory@example.com> <alice@example.com> 1700000000 +0000"},
	{"name holding markup", `<script>alert(1)</script> "><img src=x onerror=alert(1)> <xss@example.com> 1700000000 +0000`},
	{"email with a second '>'", "Bob <bob@example.com>> 1700000005 +0000"},
	{"email with an inner '>'", "Bob <bob>@example.com> 1700000005 +0000"},
	{"email with an inner '<'", "Bob <bob<x@example.com> 1700000005 +0000"},
	{"no '>'", "Erin <erin@example.com 1700000007 +0000"},
	{"no '<'", "Erin 1700000007 +0000"},
	{"no email, a '>'", "Erin > 1700000007 +0000"},
	{"nothing", ""},
	{"no date", "Dave <d@x>"},
	{"a date without a zone", "Dave <d@x> 1700000000"},
	{"a zone that is no zone", "Dave <d@x> 1700000000 x"},
	{"a negative date", "Dave <d@x> -5 +0000"},
	{"a date too large", "Dave <d@x> 99999999999999999999999 +0000"},
	{"zone -0130", "Fay <fay@x> 1700000000 -0130"},
	{"zone -0000", "Fay <fay@x> 1700000000 -0000"},
	{"zone of two digits", "Fay <fay@x> 1700000000 +05"},
	{"zone of one digit", "Fay <fay@x> 1700000000 +1"},
	{"zone with 90 minutes", "Fay <fay@x> 1700000000 +0590"},
	{"zone of five digits", "Fay <fay@x> 1700000000 +99999"},
	{"words after the zone", "Fay <fay@x> 1700000000 +0100 extra"},
	{"a '>' after the zone", "Zoe <z@x> 1 +0100>"},
}

// GitAuthor is an author line as git log reads it: %an, %ae, the seconds of --date=raw's %ad and
// the wall clock of %ai in the line's own zone; the last two are "" when git reads no date.
type GitAuthor struct{ Name, Email, Unix, Clock string }

// GitReadsAuthors writes, in a repository of its own, a commit per line whose author line is
// that line (with git hash-object --literally, as git commit would refuse to) and returns how git
// log reads each: the answer every reader of commits is held to.
func GitReadsAuthors(tb testing.TB, lines []AuthorLine) []GitAuthor {
	tb.Helper()
	dir := tb.TempDir()
	git := func(stdin string, args ...string) string {
		tb.Helper()
		cmd := exec.Command("git", append([]string{"--git-dir=" + dir}, args...)...)
		cmd.Stdin = strings.NewReader(stdin)
		out, err := cmd.Output()
		if err != nil {
			tb.Fatalf("git %s: %v", strings.Join(args, " "), err)
		}
		return string(out)
	}
	git("", "init", "-q", "--bare")
	tree := strings.TrimSpace(git("", "hash-object", "-t", "tree", "-w", "--stdin"))
	var paths []string
	for i, l := range lines {
		p := filepath.Join(tb.TempDir(), fmt.Sprint(i))
		raw := fmt.Sprintf("tree %s\nauthor %s\ncommitter C <c@x> 1 +0000\n\nm\n", tree, l.Line)
		if err := os.WriteFile(p, []byte(raw), 0o644); err != nil {
			tb.Fatal(err)
		}
		paths = append(paths, p)
	}
	hashes := strings.Fields(git(strings.Join(paths, "\n")+"\n", "hash-object", "-t", "commit", "-w", "--literally", "--stdin-paths"))
	out := git("", append([]string{"show", "-s", "--date=raw", "--format=tformat:%an%x00%ae%x00%ad%x00%ai%x01"}, hashes...)...)
	records := strings.Split(strings.TrimSuffix(out, "\x01\n"), "\x01\n")
	if len(records) != len(lines) {
		tb.Fatalf("git show read %d commits, want %d", len(records), len(lines))
	}
	answers := make([]GitAuthor, len(records))
	for i, r := range records {
		f := strings.Split(r, "\x00")
		unix, _, _ := strings.Cut(f[2], " ")
		answers[i] = GitAuthor{Name: f[0], Email: f[1], Unix: unix, Clock: strings.TrimSpace(strings.TrimSuffix(f[3], zoneOf(f[3])))}
	}
	return answers
}

// zoneOf is the zone at the end of %ai ("2023-11-14 22:13:20 +0100"), "" when it has none.
func zoneOf(ai string) string {
	if i := strings.LastIndexByte(ai, ' '); i >= 0 && len(ai) > i+1 && (ai[i+1] == '+' || ai[i+1] == '-') {
		return ai[i:]
	}
	return ""
}
