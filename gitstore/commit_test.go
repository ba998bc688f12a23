package gitstore

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-git/go-git/v5/plumbing"

	"github.com/configbutler/gitops-reverser/testenv"
)

// TestParseIdentAsGitDoes: every author line, however it was written, splits into the name,
// email and date git log shows for it.
func TestParseIdentAsGitDoes(t *testing.T) {
	want := testenv.GitReadsAuthors(t, testenv.TrickyAuthorLines)
	for i, l := range testenv.TrickyAuthorLines {
		id := ParseIdent(l.Line)
		got := testenv.GitAuthor{Name: id.Name, Email: id.Email}
		if !id.When.IsZero() {
			got.Unix, got.Clock = strconv.FormatInt(id.When.Unix(), 10), id.When.Format(time.DateTime)
		}
		if got != want[i] {
			t.Errorf("%s: ParseIdent(%q) = %q, git reads %q", l.Name, l.Line, got, want[i])
		}
	}
}

// TestParseIdentKeepsTheZone: the time of an ident is in the zone the line names, so a commit
// built again from it writes the same zone.
func TestParseIdentKeepsTheZone(t *testing.T) {
	for line, offset := range map[string]int{
		"A <a@x> 1700000000 -0130": -90 * 60,
		"A <a@x> 1700000000 +0545": (5*60 + 45) * 60,
		"A <a@x> 1700000000 +05":   5 * 60, // git reads the digits as hhmm: five minutes
		"A <a@x> 1700000000 -0000": 0,
	} {
		if _, got := ParseIdent(line).When.Zone(); got != offset {
			t.Errorf("ParseIdent(%q): zone offset %d s, want %d", line, got, offset)
		}
	}
}

// TestParseCommitAsGitDoes: the tree is the first line and the parents the lines right after it;
// other headers and their continuation lines are skipped; the message follows the blank line.
func TestParseCommitAsGitDoes(t *testing.T) {
	tree, p1, p2 := strings.Repeat("1", 40), strings.Repeat("2", 40), strings.Repeat("3", 40)
	sig := "-----BEGIN PGP SIGNATURE-----\n author Eve <eve@x> 9 +0000\n parent " + strings.Repeat("4", 40) + "\n -----END PGP SIGNATURE-----"
	raw := fmt.Sprintf("tree %s\nparent %s\nparent %s\nauthor Ann <ann@x> 1700000000 +0100\ncommitter Cid <cid@x> 1700000060 +0000\n"+
		"gpgsig %s\nparent %s\nauthor Eve <eve@x> 9 +0000\n\nsubject\n\nbody\n", tree, p1, p2, sig, strings.Repeat("5", 40))
	c, err := ParseCommit([]byte(raw))
	if err != nil {
		t.Fatal(err)
	}
	if c.Tree != plumbing.NewHash(tree) || !slices.Equal(c.Parents, []plumbing.Hash{plumbing.NewHash(p1), plumbing.NewHash(p2)}) {
		t.Errorf("tree %s, parents %v; want %s and [%s %s]", c.Tree, c.Parents, tree, p1, p2)
	}
	if c.Author.Name != "Ann" || c.Author.When.Unix() != 1700000000 || c.Committer.Email != "cid@x" || c.Committer.When.Unix() != 1700000060 {
		t.Errorf("author %+v, committer %+v: want Ann's and Cid's lines", c.Author, c.Committer)
	}
	if c.Message != "subject\n\nbody\n" {
		t.Errorf("message %q", c.Message)
	}
	if c, err := ParseCommit([]byte("tree " + tree + "\n")); err != nil || len(c.Parents) != 0 || c.Message != "" {
		t.Errorf("a root commit without a message: %+v, %v", c, err)
	}
}

// TestParseCommitRefusesWhatGitRefuses: no tree first, or a malformed tree or parent line, is
// no commit.
func TestParseCommitRefusesWhatGitRefuses(t *testing.T) {
	tree := strings.Repeat("1", 40)
	for _, raw := range []string{
		"",
		"author A <a@x> 1 +0000\ntree " + tree + "\n\nm",
		"tree " + tree[:39] + "\n\nm",
		"tree " + strings.Repeat("g", 40) + "\n\nm",
		"tree " + tree + "\nparent 12\n\nm",
	} {
		if _, err := ParseCommit([]byte(raw)); err == nil {
			t.Errorf("ParseCommit(%q) read a commit", raw)
		}
	}
	if _, err := ParseCommit([]byte("m\n")); !errors.Is(err, errNoTree) {
		t.Errorf("no tree line: %v, want errNoTree", err)
	}
}

// FuzzParseIdent: whatever the line, the name holds no '<' and the email no '>' (a '<' or '>'
// that git would read elsewhere never lands in them), and the name ends in no space.
func FuzzParseIdent(f *testing.F) {
	for _, l := range testenv.TrickyAuthorLines {
		f.Add(l.Line)
	}
	f.Fuzz(func(t *testing.T, line string) {
		id := ParseIdent(line)
		if strings.Contains(id.Name, "<") || strings.Contains(id.Email, ">") || strings.TrimRight(id.Name, identSpace) != id.Name {
			t.Fatalf("ParseIdent(%q) = %q", line, id)
		}
	})
}
