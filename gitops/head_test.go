package gitops

import (
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/configbutler/gitops-reverser/testenv"
)

// TestHeadReadsAuthorsAsGitDoes: the head branch's commits are read with the author git log
// shows for them, whatever their author line holds.
func TestHeadReadsAuthorsAsGitDoes(t *testing.T) {
	w := offlineWorker(t)
	want := testenv.GitReadsAuthors(t, testenv.TrickyAuthorLines)
	for i, l := range testenv.TrickyAuthorLines {
		raw := fmt.Sprintf("tree 4b825dc642cb6eb9a060e54bf8d69288fbee4904\nauthor %s\ncommitter C <c@x> 1 +0000\n\nm\n", l.Line)
		c, err := readCommit(w.store, w.store.PutCommit([]byte(raw)))
		if err != nil {
			t.Fatalf("%s: %v", l.Name, err)
		}
		if got := asGit(c.author, c.when); got != want[i] {
			t.Errorf("%s: %q reads as %q, git reads %q", l.Name, l.Line, got, want[i])
		}
	}
}

// asGit is an author as testenv.GitReadsAuthors says git reads one.
func asGit(s Signature, when time.Time) testenv.GitAuthor {
	if when.IsZero() {
		return testenv.GitAuthor{Name: s.Name, Email: s.Email}
	}
	return testenv.GitAuthor{Name: s.Name, Email: s.Email, Unix: strconv.FormatInt(when.Unix(), 10), Clock: when.Format(time.DateTime)}
}
