package pullrequest

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"code.gitea.io/sdk/gitea"
	"github.com/google/go-github/v76/github"
	gitlab "gitlab.com/gitlab-org/api/client-go"
)

// Commit statuses mark a commit on the host, beside its other checks: the daemon sets one on
// the commit a person pushed with an edit, pending while the edit waits for review, success
// once it is applied, failure (with the reason) when it is refused. The three hosts take the
// same call with small differences, handled here: GitLab names the failed state "failed", and
// refuses a pending status on one that is pending already.

// States of a Status.
const (
	StatusPending = "pending"
	StatusSuccess = "success"
	StatusFailure = "failure"
)

// MaxStatusDescription is the longest description SetStatus sends, in characters: GitHub's
// limit, the shortest of the hosts'. A longer one is cut to it, ending in "…", on every host,
// so a status reads the same wherever it is set.
const MaxStatusDescription = 140

// Status is a commit status as SetStatus sets it.
type Status struct {
	State       string // StatusPending, StatusSuccess or StatusFailure
	Context     string // names the status, e.g. "gitops-reverser/proposal"; required
	Description string // shown beside it; cut to MaxStatusDescription characters
	TargetURL   string // where it links; "" for none
}

// checkStatus returns s with its description cut to what every host keeps, or an *Error for
// a status no host would take (nothing is sent then, and OnCall is not called).
func (c caller) checkStatus(sha string, s Status) (Status, error) {
	switch {
	case s.State != StatusPending && s.State != StatusSuccess && s.State != StatusFailure:
		return s, c.fail(OpStatus, nil, fmt.Errorf("unknown commit status state %q (want %s, %s or %s)",
			s.State, StatusPending, StatusSuccess, StatusFailure))
	case strings.TrimSpace(s.Context) == "":
		return s, c.fail(OpStatus, nil, errors.New("commit status has no context"))
	case strings.TrimSpace(sha) == "":
		return s, c.fail(OpStatus, nil, errors.New("no commit to set the status on"))
	}
	s.Description = cut(s.Description, MaxStatusDescription)
	return s, nil
}

// cut shortens s to at most n characters, ending a shortened one in "…".
func cut(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

// SetStatus creates a status: Gitea shows a commit's latest status of each context.
func (g *giteaHost) SetStatus(ctx context.Context, sha string, s Status) error {
	s, err := g.checkStatus(sha, s)
	if err != nil {
		return err
	}
	c, err := g.client(ctx, OpStatus)
	if err != nil {
		return err
	}
	_, resp, err := c.CreateStatus(g.owner, g.repo, sha, gitea.CreateStatusOption{
		State: gitea.StatusState(s.State), Context: s.Context, Description: s.Description, TargetURL: s.TargetURL,
	})
	// Gitea answers a commit it does not have with 500 (its GetCommit error), not 404.
	return commitMissing(g.done(OpStatus, giteaResponse(resp), err), http.StatusInternalServerError, "object does not exist")
}

// SetStatus creates a status: GitHub shows a commit's latest status of each context.
func (g *gitHub) SetStatus(ctx context.Context, sha string, s Status) error {
	s, err := g.checkStatus(sha, s)
	if err != nil {
		return err
	}
	rs := &github.RepoStatus{State: &s.State, Context: &s.Context, Description: &s.Description}
	if s.TargetURL != "" {
		rs.TargetURL = &s.TargetURL
	}
	_, _, err = ghCall(ctx, g, OpStatus, func(ctx context.Context) (*github.RepoStatus, *github.Response, error) {
		return g.client.Repositories.CreateStatus(ctx, g.owner, g.repo, sha, rs)
	})
	// GitHub answers a commit it does not have with 422 "No commit found for SHA: ...".
	return commitMissing(err, http.StatusUnprocessableEntity, "no commit found for sha")
}

// SetStatus sets the status of a GitLab external job named after the context. GitLab moves
// a pending or running job of that name on to the new state and starts a new job after a
// finished one; a pending status on a pending job it refuses (400 "Cannot transition status
// via :enqueue from :pending"), keeping the job as it is, description included. That job is
// already in the state asked for, so SetStatus takes the refusal as done.
func (g *gitLab) SetStatus(ctx context.Context, sha string, s Status) error {
	s, err := g.checkStatus(sha, s)
	if err != nil {
		return err
	}
	state := gitlab.BuildStateValue(s.State)
	if s.State == StatusFailure {
		state = gitlab.Failed
	}
	opts := &gitlab.SetCommitStatusOptions{State: state, Name: &s.Context, Description: &s.Description}
	if s.TargetURL != "" {
		opts.TargetURL = &s.TargetURL
	}
	_, resp, err := g.client.Commits.SetCommitStatus(g.project, sha, opts, gitlab.WithContext(ctx))
	err = g.done(OpStatus, glResponse(resp), err)
	if alreadyIn(err, string(state)) {
		return nil
	}
	return err
}

// alreadyIn reports whether err is GitLab refusing to move a job to state because it is in
// that state: a 400 "Cannot transition status via :EVENT from :STATE".
func alreadyIn(err error, state string) bool {
	var e *Error
	if !errors.As(err, &e) || e.Status != http.StatusBadRequest || e.Err == nil {
		return false
	}
	msg := strings.ToLower(e.Err.Error())
	return strings.Contains(msg, "cannot transition status via") && strings.Contains(msg, "from :"+state)
}

// commitMissing reclassifies err as CommitNotFound when it is the host's answer status whose
// message says phrase: the hosts that do not answer a missing commit with 404.
func commitMissing(err error, status int, phrase string) error {
	var e *Error
	if errors.As(err, &e) && e.Status == status && e.Err != nil &&
		strings.Contains(strings.ToLower(e.Err.Error()), phrase) {
		e.Reason = ReasonCommitNotFound
		e.Hint = hint(e.Host, e.Reason)
	}
	return err
}
