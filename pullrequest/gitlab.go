package pullrequest

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"

	gitlab "gitlab.com/gitlab-org/api/client-go"
)

// gitlabDraftPrefix marks a draft: GitLab's REST API has no draft flag on create or update; it
// reads a title starting with "Draft:", "[Draft]" or "(Draft)" as one.
const gitlabDraftPrefix = "Draft: "

var gitlabDraftPrefixes = []string{"Draft:", "[Draft]", "(Draft)"}

// gitLab is the Host of a project on GitLab, through GitLab's client-go.
type gitLab struct {
	caller
	client  *gitlab.Client
	project string // the full path, group/subgroup/project
}

func newGitLab(c caller, ep endpoint, token, userAgent string, hc *http.Client) (Host, error) {
	opts := []gitlab.ClientOptionFunc{
		gitlab.WithBaseURL(ep.api),
		gitlab.WithHTTPClient(hc),
		// The daemon retries on its own schedule, from Error.Temporary and RetryAfter; the
		// client's own retries (up to 5, on 429 and 5xx) would hide those from it.
		gitlab.WithoutRetries(),
		gitlab.WithURLWarningLogger(slog.New(slog.DiscardHandler)),
	}
	if userAgent != "" {
		opts = append(opts, gitlab.WithUserAgent(userAgent))
	}
	client, err := gitlab.NewClient(token, opts...)
	if err != nil {
		return nil, fmt.Errorf("create gitlab client: %w", err)
	}
	return &gitLab{caller: c, client: client, project: ep.project}, nil
}

// Find lists open merge requests filtered by source and target branch, page by page, and
// still checks each one.
func (g *gitLab) Find(ctx context.Context, head, base string) (*Request, error) {
	opts := &gitlab.ListProjectMergeRequestsOptions{
		ListOptions: gitlab.ListOptions{PerPage: 100, Page: 1},
		State:       gitlab.Ptr("opened"), SourceBranch: &head, TargetBranch: &base,
	}
	for range maxPages {
		mrs, resp, err := g.client.MergeRequests.ListProjectMergeRequests(g.project, opts, gitlab.WithContext(ctx))
		if err := g.done(OpFind, glResponse(resp), err); err != nil {
			return nil, err
		}
		for _, mr := range mrs {
			if mr.SourceBranch == head && mr.TargetBranch == base && mr.SourceProjectID == mr.TargetProjectID {
				return fromGitLab(mr), nil
			}
		}
		if resp.NextPage == 0 {
			break
		}
		opts.Page = resp.NextPage
	}
	return nil, nil
}

// Open creates the merge request; GitLab creates labels that do not exist yet.
func (g *gitLab) Open(ctx context.Context, r NewRequest) (*Request, error) {
	title := r.Title
	if r.Draft && !hasPrefixFold(title, gitlabDraftPrefixes) {
		title = gitlabDraftPrefix + title
	}
	opts := &gitlab.CreateMergeRequestOptions{
		Title: &title, Description: &r.Body, SourceBranch: &r.Head, TargetBranch: &r.Base,
	}
	if len(r.Labels) > 0 {
		labels := gitlab.LabelOptions(r.Labels)
		opts.Labels = &labels
	}
	mr, resp, err := g.client.MergeRequests.CreateMergeRequest(g.project, opts, gitlab.WithContext(ctx))
	err = g.done(OpOpen, glResponse(resp), err)
	if alreadyExists(err) {
		return existing(ctx, g, r, err)
	}
	if err != nil {
		return nil, err
	}
	return fromGitLab(&mr.BasicMergeRequest), nil
}

// Update reads the merge request first: a draft keeps its prefix, and one that is no longer
// open is returned unchanged.
func (g *gitLab) Update(ctx context.Context, number int64, title, body string) (*Request, error) {
	cur, err := g.get(ctx, OpGet, number)
	if err != nil {
		return nil, err
	}
	if now := fromGitLab(&cur.BasicMergeRequest); now.State != StateOpen {
		return now, nil
	}
	if cur.Draft && !hasPrefixFold(title, gitlabDraftPrefixes) {
		title = gitlabDraftPrefix + title
	}
	mr, resp, err := g.client.MergeRequests.UpdateMergeRequest(g.project, number,
		&gitlab.UpdateMergeRequestOptions{Title: &title, Description: &body}, gitlab.WithContext(ctx))
	if err := g.done(OpUpdate, glResponse(resp), err); err != nil {
		return nil, err
	}
	return fromGitLab(&mr.BasicMergeRequest), nil
}

// Get returns merge request number (its IID).
func (g *gitLab) Get(ctx context.Context, number int64) (*Request, error) {
	mr, err := g.get(ctx, OpGet, number)
	if err != nil {
		return nil, err
	}
	return fromGitLab(&mr.BasicMergeRequest), nil
}

func (g *gitLab) get(ctx context.Context, op string, number int64) (*gitlab.MergeRequest, error) {
	mr, resp, err := g.client.MergeRequests.GetMergeRequest(g.project, number, nil, gitlab.WithContext(ctx))
	if err := g.done(op, glResponse(resp), err); err != nil {
		return nil, err
	}
	return mr, nil
}

// Close sends the close state event.
func (g *gitLab) Close(ctx context.Context, number int64) error {
	_, resp, err := g.client.MergeRequests.UpdateMergeRequest(g.project, number,
		&gitlab.UpdateMergeRequestOptions{StateEvent: gitlab.Ptr("close")}, gitlab.WithContext(ctx))
	return g.done(OpClose, glResponse(resp), err)
}

// fromGitLab converts client-go's merge request. GitLab's states are opened, closed, locked
// (open, for a moment, while it changes) and merged.
func fromGitLab(mr *gitlab.BasicMergeRequest) *Request {
	r := &Request{
		Number: mr.IID, URL: mr.WebURL, State: StateOpen, Draft: mr.Draft,
		Head: mr.SourceBranch, Base: mr.TargetBranch, HeadCommit: mr.SHA,
		Title: mr.Title, Body: mr.Description,
	}
	switch mr.State {
	case "merged":
		r.State = StateMerged
	case "closed":
		r.State = StateClosed
	}
	if mr.CreatedAt != nil {
		r.OpenedAt = *mr.CreatedAt
	}
	return r
}

// glResponse is the HTTP answer inside client-go's response, nil when none came. It carries
// the status even of a 404, for which client-go returns the bare ErrNotFound.
func glResponse(r *gitlab.Response) *http.Response {
	if r == nil {
		return nil
	}
	return r.Response
}
