package pullrequest

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"code.gitea.io/sdk/gitea"
)

// giteaDraftPrefix marks a draft: Gitea has no draft flag, it reads a title that starts with
// one of WORK_IN_PROGRESS_PREFIXES ("WIP:" and "[WIP]" by default) as work in progress.
const giteaDraftPrefix = "WIP: "

var giteaDraftPrefixes = []string{"WIP:", "[WIP]"}

// giteaPageSize is Gitea's default MAX_RESPONSE_ITEMS: a larger page is cut to it anyway.
const giteaPageSize = 50

// giteaHost is the Host of a repository on Gitea or Forgejo, through Gitea's SDK.
type giteaHost struct {
	caller
	url, token, userAgent string
	hc                    *http.Client
	owner, repo           string
}

func newGitea(c caller, ep endpoint, token, userAgent string, hc *http.Client) *giteaHost {
	return &giteaHost{caller: c, url: ep.api, token: token, userAgent: userAgent, hc: hc, owner: ep.owner, repo: ep.name}
}

// client returns a client bound to ctx. The SDK takes its context per client, not per call, so
// each call builds one; that is cheap, as the SDK's server version check (a request) is turned
// off: every endpoint used here is older than any Gitea or Forgejo still maintained.
func (g *giteaHost) client(ctx context.Context, op string) (*gitea.Client, error) {
	opts := []gitea.ClientOption{
		gitea.SetGiteaVersion(""), gitea.SetContext(ctx), gitea.SetHTTPClient(g.hc),
	}
	if g.token != "" {
		opts = append(opts, gitea.SetToken(g.token))
	}
	if g.userAgent != "" {
		opts = append(opts, gitea.SetUserAgent(g.userAgent))
	}
	c, err := gitea.NewClient(g.url, opts...)
	if err != nil {
		return nil, g.fail(op, nil, fmt.Errorf("create gitea client: %w", err))
	}
	return c, nil
}

// Find pages through the open pull requests: the list endpoint filters by state only, and
// the base/head lookup also answers closed ones, and 404 for both "none" and "no repository".
func (g *giteaHost) Find(ctx context.Context, head, base string) (*Request, error) {
	c, err := g.client(ctx, OpFind)
	if err != nil {
		return nil, err
	}
	for page := 1; page <= maxPages; {
		prs, resp, err := c.ListRepoPullRequests(g.owner, g.repo, gitea.ListPullRequestsOptions{
			ListOptions: gitea.ListOptions{Page: page, PageSize: giteaPageSize}, State: gitea.StateOpen,
		})
		if err := g.done(OpFind, giteaResponse(resp), err); err != nil {
			return nil, err
		}
		for _, pr := range prs {
			if pr.Head != nil && pr.Base != nil && pr.Head.Ref == head && pr.Base.Ref == base &&
				pr.Head.RepoID == pr.Base.RepoID {
				return fromGitea(pr), nil
			}
		}
		if resp.NextPage <= page {
			break
		}
		page = resp.NextPage
	}
	return nil, nil
}

// Open looks the labels up by name, then creates the pull request.
func (g *giteaHost) Open(ctx context.Context, r NewRequest) (*Request, error) {
	c, err := g.client(ctx, OpOpen)
	if err != nil {
		return nil, err
	}
	ids, warnings, err := g.labelIDs(c, r.Labels)
	if err != nil {
		return nil, err
	}
	title := r.Title
	if r.Draft && !hasPrefixFold(title, giteaDraftPrefixes) {
		title = giteaDraftPrefix + title
	}
	pr, resp, err := c.CreatePullRequest(g.owner, g.repo, gitea.CreatePullRequestOption{
		Head: r.Head, Base: r.Base, Title: title, Body: r.Body, Labels: ids,
	})
	err = g.done(OpOpen, giteaResponse(resp), err)
	if alreadyExists(err) {
		return existing(ctx, g, r, err)
	}
	if err != nil {
		return nil, err
	}
	req := fromGitea(pr)
	req.Warnings = warnings
	return req, nil
}

// labelIDs maps label names to the repository's label IDs. A name with no label is skipped
// with a warning; so are all of them when the token may not read labels (read:issue).
func (g *giteaHost) labelIDs(c *gitea.Client, names []string) ([]int64, []string, error) {
	if len(names) == 0 {
		return nil, nil, nil
	}
	byName := map[string]int64{}
	for page := 1; page <= maxPages; {
		labels, resp, err := c.ListRepoLabels(g.owner, g.repo, gitea.ListLabelsOptions{
			ListOptions: gitea.ListOptions{Page: page, PageSize: giteaPageSize},
		})
		if err := g.done(OpLabels, giteaResponse(resp), err); err != nil {
			if e := (*Error)(nil); errors.As(err, &e) && e.Reason == ReasonForbidden {
				return nil, []string{"labels not set: " + err.Error()}, nil
			}
			return nil, nil, err
		}
		for _, l := range labels {
			byName[l.Name] = l.ID
		}
		if resp.NextPage <= page {
			break
		}
		page = resp.NextPage
	}
	var ids []int64
	var warnings []string
	for _, n := range names {
		if id, ok := byName[n]; ok {
			ids = append(ids, id)
		} else {
			warnings = append(warnings, fmt.Sprintf("label %q skipped: %s/%s has no such label (Gitea sets only labels that exist)", n, g.owner, g.repo))
		}
	}
	return ids, warnings, nil
}

// Update reads the pull request first: a draft keeps its prefix, and one that is no longer
// open is returned unchanged.
func (g *giteaHost) Update(ctx context.Context, number int64, title, body string) (*Request, error) {
	c, err := g.client(ctx, OpUpdate)
	if err != nil {
		return nil, err
	}
	cur, resp, err := c.GetPullRequest(g.owner, g.repo, number)
	if err := g.done(OpGet, giteaResponse(resp), err); err != nil {
		return nil, err
	}
	if now := fromGitea(cur); now.State != StateOpen {
		return now, nil
	}
	if cur.Draft && !hasPrefixFold(title, giteaDraftPrefixes) {
		title = giteaDraftPrefix + title
	}
	pr, resp, err := c.EditPullRequest(g.owner, g.repo, number, gitea.EditPullRequestOption{Title: title, Body: &body})
	if err := g.done(OpUpdate, giteaResponse(resp), err); err != nil {
		return nil, err
	}
	return fromGitea(pr), nil
}

// Get returns pull request number.
func (g *giteaHost) Get(ctx context.Context, number int64) (*Request, error) {
	c, err := g.client(ctx, OpGet)
	if err != nil {
		return nil, err
	}
	pr, resp, err := c.GetPullRequest(g.owner, g.repo, number)
	if err := g.done(OpGet, giteaResponse(resp), err); err != nil {
		return nil, err
	}
	return fromGitea(pr), nil
}

// Close sets the pull request's state to closed.
func (g *giteaHost) Close(ctx context.Context, number int64) error {
	c, err := g.client(ctx, OpClose)
	if err != nil {
		return err
	}
	closed := gitea.StateClosed
	_, resp, err := c.EditPullRequest(g.owner, g.repo, number, gitea.EditPullRequestOption{State: &closed})
	return g.done(OpClose, giteaResponse(resp), err)
}

// fromGitea converts the SDK's pull request.
func fromGitea(pr *gitea.PullRequest) *Request {
	r := &Request{
		Number: pr.Index, URL: pr.HTMLURL, State: StateOpen, Draft: pr.Draft,
		Title: pr.Title, Body: pr.Body,
	}
	switch {
	case pr.HasMerged:
		r.State = StateMerged
	case pr.State == gitea.StateClosed:
		r.State = StateClosed
	}
	if pr.Head != nil {
		r.Head, r.HeadCommit = pr.Head.Ref, pr.Head.Sha
	}
	if pr.Base != nil {
		r.Base = pr.Base.Ref
	}
	if pr.Created != nil {
		r.OpenedAt = *pr.Created
	}
	return r
}

// giteaResponse is the HTTP answer inside the SDK's response, nil when none came.
func giteaResponse(r *gitea.Response) *http.Response {
	if r == nil {
		return nil
	}
	return r.Response
}

// hasPrefixFold reports whether s starts with one of prefixes, ignoring case.
func hasPrefixFold(s string, prefixes []string) bool {
	for _, p := range prefixes {
		if len(s) >= len(p) && strings.EqualFold(s[:len(p)], p) {
			return true
		}
	}
	return false
}
