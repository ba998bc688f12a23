package watch

import (
	"testing"

	"github.com/configbutler/gitops-reverser/crds"
)

// TestRequestEventsFollowTheStatus: an Event is told once per change of the request a destination
// reports, and never for what the daemon read back after a restart.
func TestRequestEventsFollowTheStatus(t *testing.T) {
	open := crds.PullRequestStatus{HeadBranch: "h", Number: 7, State: "open", HeadCommit: "c1", ChangesWaiting: 2}
	with := func(f func(*crds.PullRequestStatus)) crds.PullRequestStatus {
		s := open
		f(&s)
		return s
	}
	cases := []struct {
		name      string
		last, now crds.PullRequestStatus
		reported  bool
		want      string
	}{
		{"first seen open", crds.PullRequestStatus{}, open, false, "PullRequestOpened"},
		{"another one opened", with(func(s *crds.PullRequestStatus) { s.Number = 6; s.State = "merged" }), open, true, "PullRequestOpened"},
		{"the same, read back after a restart", open, open, true, ""},
		{"new commits on the head", open, with(func(s *crds.PullRequestStatus) { s.HeadCommit = "c2" }), true, "PullRequestUpdated"},
		{"merged", open, with(func(s *crds.PullRequestStatus) { s.State = "merged" }), true, "PullRequestMerged"},
		{"closed", open, with(func(s *crds.PullRequestStatus) { s.State = "closed" }), true, "PullRequestClosed"},
		{"none known yet", crds.PullRequestStatus{}, crds.PullRequestStatus{HeadBranch: "h", ChangesWaiting: 1}, false, ""},
		{"only the count of files moved", open, with(func(s *crds.PullRequestStatus) { s.ChangesWaiting = 3 }), true, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got, _ := requestEvent(c.last, c.now, c.reported); got != c.want {
				t.Errorf("event %q, want %q", got, c.want)
			}
		})
	}
}
