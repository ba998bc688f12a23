package pullrequest

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/google/go-github/v76/github"
)

// gitHub is the Host of a repository on GitHub or GitHub Enterprise Server, through go-github.
type gitHub struct {
	caller
	client      *github.Client
	owner, repo string
	timeout     time.Duration // of each call; see newGitHub
}

func newGitHub(c caller, ep endpoint, token, userAgent string, hc *http.Client) (Host, error) {
	base, err := url.Parse(ep.api)
	if err != nil {
		return nil, fmt.Errorf("parse github API URL: %w", err)
	}
	// The client's Timeout becomes each call's context deadline: on an error answer go-github
	// swaps the response body for a copy and never closes the original, so with a client
	// Timeout net/http's timer goroutine of that request would live on until the timeout.
	untimed := *hc
	untimed.Timeout = 0
	client := github.NewClient(&untimed)
	if token != "" {
		client = client.WithAuthToken(token) // a copy whose transport adds the Authorization header
	}
	client.BaseURL = base
	if userAgent != "" {
		client.UserAgent = userAgent
	}
	c.refine = refineGitHub
	return &gitHub{caller: c, client: client, owner: ep.owner, repo: ep.name, timeout: hc.Timeout}, nil
}

// ghCall makes one call f of operation op, within the client's timeout, and reports it.
func ghCall[T any](ctx context.Context, g *gitHub, op string,
	f func(context.Context) (T, *github.Response, error),
) (T, *github.Response, error) {
	if g.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, g.timeout)
		defer cancel()
	}
	v, resp, err := f(ctx)
	return v, resp, g.done(op, ghResponse(resp), err)
}

// Find lists open pull requests filtered by head (owner:branch) and base, page by page, and
// still checks each one: the filter is the host's, the contract is ours.
func (g *gitHub) Find(ctx context.Context, head, base string) (*Request, error) {
	opts := &github.PullRequestListOptions{
		State: "open", Head: g.owner + ":" + head, Base: base,
		ListOptions: github.ListOptions{PerPage: 100},
	}
	for range maxPages {
		prs, resp, err := ghCall(ctx, g, OpFind, func(ctx context.Context) ([]*github.PullRequest, *github.Response, error) {
			return g.client.PullRequests.List(ctx, g.owner, g.repo, opts)
		})
		if err != nil {
			return nil, err
		}
		for _, pr := range prs {
			if g.matches(pr, head, base) {
				return fromGitHub(pr), nil
			}
		}
		if resp.NextPage == 0 {
			break
		}
		opts.Page = resp.NextPage
	}
	return nil, nil
}

// matches reports whether pr goes from head in this repository into base.
func (g *gitHub) matches(pr *github.PullRequest, head, base string) bool {
	if pr.GetHead().GetRef() != head || pr.GetBase().GetRef() != base {
		return false
	}
	label := pr.GetHead().GetLabel() // "owner:branch"; a fork's head has the fork owner's
	return label == "" || strings.EqualFold(label, g.owner+":"+head)
}

// Open creates the pull request, then labels it: GitHub's create call takes no labels.
func (g *gitHub) Open(ctx context.Context, r NewRequest) (*Request, error) {
	pr, warnings, err := g.create(ctx, r)
	if alreadyExists(err) {
		return existing(ctx, g, r, err)
	}
	if err != nil {
		return nil, err
	}
	req := fromGitHub(pr)
	if len(r.Labels) > 0 {
		_, _, err := ghCall(ctx, g, OpLabels, func(ctx context.Context) ([]*github.Label, *github.Response, error) {
			return g.client.Issues.AddLabelsToIssue(ctx, g.owner, g.repo, int(req.Number), r.Labels)
		})
		if err != nil {
			warnings = append(warnings, "labels not added: "+err.Error())
		}
	}
	req.Warnings = warnings
	return req, nil
}

// create posts the pull request, once more as a ready one when the repository's plan has no
// drafts (GitHub's 422 "Draft pull requests are not supported in this repository.").
func (g *gitHub) create(ctx context.Context, r NewRequest) (*github.PullRequest, []string, error) {
	np := &github.NewPullRequest{
		Title: &r.Title, Head: &r.Head, Base: &r.Base, Body: &r.Body,
		Draft: github.Ptr(r.Draft), MaintainerCanModify: github.Ptr(false),
	}
	create := func(ctx context.Context) (*github.PullRequest, *github.Response, error) {
		return g.client.PullRequests.Create(ctx, g.owner, g.repo, np)
	}
	pr, _, err := ghCall(ctx, g, OpOpen, create)
	if err == nil || !r.Draft || !strings.Contains(strings.ToLower(err.Error()), "draft pull requests are not supported") {
		return pr, nil, err
	}
	np.Draft = github.Ptr(false)
	if pr, _, err = ghCall(ctx, g, OpOpen, create); err != nil {
		return nil, nil, err
	}
	return pr, []string{"opened as ready for review: the repository's plan has no draft pull requests"}, nil
}

// Update edits title and body; GitHub answers with the pull request, merged or not.
func (g *gitHub) Update(ctx context.Context, number int64, title, body string) (*Request, error) {
	pr, _, err := ghCall(ctx, g, OpUpdate, func(ctx context.Context) (*github.PullRequest, *github.Response, error) {
		return g.client.PullRequests.Edit(ctx, g.owner, g.repo, int(number), &github.PullRequest{Title: &title, Body: &body})
	})
	if err != nil {
		return nil, err
	}
	return fromGitHub(pr), nil
}

// Get returns pull request number.
func (g *gitHub) Get(ctx context.Context, number int64) (*Request, error) {
	pr, _, err := ghCall(ctx, g, OpGet, func(ctx context.Context) (*github.PullRequest, *github.Response, error) {
		return g.client.PullRequests.Get(ctx, g.owner, g.repo, int(number))
	})
	if err != nil {
		return nil, err
	}
	return fromGitHub(pr), nil
}

// Close sets the pull request's state to closed.
func (g *gitHub) Close(ctx context.Context, number int64) error {
	_, _, err := ghCall(ctx, g, OpClose, func(ctx context.Context) (*github.PullRequest, *github.Response, error) {
		return g.client.PullRequests.Edit(ctx, g.owner, g.repo, int(number), &github.PullRequest{State: github.Ptr("closed")})
	})
	return err
}

// fromGitHub converts go-github's pull request. A closed one with merged_at set was merged
// (the list endpoint has no "merged" field).
func fromGitHub(pr *github.PullRequest) *Request {
	r := &Request{
		Number: int64(pr.GetNumber()), URL: pr.GetHTMLURL(), State: StateOpen, Draft: pr.GetDraft(),
		Head: pr.GetHead().GetRef(), Base: pr.GetBase().GetRef(), HeadCommit: pr.GetHead().GetSHA(),
		Title: pr.GetTitle(), Body: pr.GetBody(), OpenedAt: pr.GetCreatedAt().Time,
	}
	switch {
	case pr.GetMerged() || pr.MergedAt != nil:
		r.State = StateMerged
	case pr.GetState() == "closed":
		r.State = StateClosed
	}
	return r
}

// ghResponse is the HTTP answer inside go-github's response, nil when none came.
func ghResponse(r *github.Response) *http.Response {
	if r == nil {
		return nil
	}
	return r.Response
}

// refineGitHub reads go-github's rate-limit errors, which also stand for calls it did not
// make: after a rate limit it answers from memory until the reset time, without a request.
func refineGitHub(e *Error, now time.Time) {
	var primary *github.RateLimitError
	var secondary *github.AbuseRateLimitError
	switch {
	case errors.As(e.Err, &primary):
		e.Reason = ReasonRateLimited
		if e.RetryAfter == 0 && !primary.Rate.Reset.IsZero() {
			e.RetryAfter = max(primary.Rate.Reset.Sub(now), 0)
		}
	case errors.As(e.Err, &secondary):
		e.Reason = ReasonRateLimited
		if e.RetryAfter == 0 && secondary.RetryAfter != nil {
			e.RetryAfter = max(*secondary.RetryAfter, 0)
		}
	}
}
