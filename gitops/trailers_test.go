package gitops

import (
	"testing"

	"github.com/configbutler/gitops-reverser/testenv"
)

// TestChangeTrailersFollowTheIdentitys: a change's trailers come after the identity's in the
// message of its commit, and changes with different trailers never share a commit.
func TestChangeTrailersFollowTheIdentitys(t *testing.T) {
	srv := MustGitServer(t)
	w := StartWorker(t, MustRepo(t, srv, "trailers"), "", BatchLimits{})
	p1 := [][2]string{{"X-ConfigButler-Proposal", "default/p1"}}
	p2 := [][2]string{{"X-ConfigButler-Proposal", "default/p2"}}
	MustEnqueue(t, w,
		Change{Path: cmPath("a"), Content: configMap("a", "1", 100), Credit: Credit{Trailers: p1}},
		Change{Path: cmPath("b"), Content: configMap("b", "1", 100), Credit: Credit{Trailers: p1}},
		Change{Path: cmPath("c"), Content: configMap("c", "1", 100), Credit: Credit{Trailers: p2}},
		Change{Path: cmPath("d"), Content: configMap("d", "1", 100)},
	)
	MustFlush(t, w)
	log := testenv.MustLog(t, srv, "trailers")
	if len(log) != 3 {
		t.Fatalf("want 3 commits (p1, p2, none), got %d: %+v", len(log), log)
	}
	want := []string{"", "default/p2", "default/p1"} // newest first
	for i, c := range log {
		if got := c.Trailers["X-ConfigButler-Proposal"]; got != want[i] {
			t.Errorf("commit %d (%s) proposal trailer = %q, want %q", i, c.Subject, got, want[i])
		}
		for _, tr := range testTrailers {
			if c.Trailers[tr[0]] != tr[1] {
				t.Errorf("commit %d lost the identity trailer %s", i, tr[0])
			}
		}
	}
	// The identity's trailers first, then the change's, one "Key: value" line each.
	wantTail := "X-ConfigButler-InstanceID: pod-0\nX-ConfigButler-Proposal: default/p1"
	if body := log[2].Body; len(body) < len(wantTail) || body[len(body)-len(wantTail):] != wantTail {
		t.Errorf("message of the p1 commit ends %q, want it to end with %q", log[2].Body, wantTail)
	}
	testenv.MustFsck(t, srv, "trailers")
}

// TestCoalesceDropsTrailers: merged runs are the bot's and carry no change trailers.
func TestCoalesceDropsTrailers(t *testing.T) {
	tr := [][2]string{{"K", "v"}}
	runs := []run{{author: testAlice, trailers: tr, items: []item{{change: Change{Path: "a.yaml", Content: []byte("x"), Credit: Credit{Author: testAlice, Trailers: tr}}}}}}
	got := coalesce(runs, testBot)
	if len(got) != 1 || got[0].author != testBot || got[0].trailers != nil || got[0].items[0].change.Trailers != nil {
		t.Fatalf("coalesce = %+v, want one bot run without trailers", got)
	}
}
