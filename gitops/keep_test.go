package gitops

import (
	"bytes"
	"testing"

	"github.com/configbutler/gitops-reverser/testenv"
)

// TestKeepLeavesAnEquivalentFileAsItIs: a change whose Keep says the file in the tree already
// says the same makes no commit, though its bytes differ; when Keep says no, the file is written.
func TestKeepLeavesAnEquivalentFileAsItIs(t *testing.T) {
	srv := MustGitServer(t)
	w := StartWorker(t, MustRepo(t, srv, "keep"), "", BatchLimits{})
	first := configMap("sealed", "1", 100)
	MustEnqueue(t, w, Change{Path: cmPath("sealed"), Content: first})
	MustFlush(t, w)
	before := testenv.MustLog(t, srv, "keep")

	var asked []byte
	same := func(current []byte) bool { asked = current; return true }
	MustEnqueue(t, w, Change{Path: cmPath("sealed"), Content: configMap("sealed", "2", 100), Keep: same})
	MustFlush(t, w)
	if after := testenv.MustLog(t, srv, "keep"); len(after) != len(before) {
		t.Fatalf("a kept file made a commit: %d commits before, %d after", len(before), len(after))
	}
	if !bytes.Equal(asked, first) {
		t.Errorf("Keep was asked about %q, want the file in the tree %q", asked, first)
	}

	second := configMap("sealed", "3", 100)
	MustEnqueue(t, w, Change{Path: cmPath("sealed"), Content: second, Keep: func([]byte) bool { return false }})
	MustFlush(t, w)
	got, err := srv.ReadFile("keep", "main", cmPath("sealed"))
	if err != nil || !bytes.Equal(got, second) {
		t.Fatalf("file = %q (%v), want the new content", got, err)
	}
}
