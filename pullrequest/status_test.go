package pullrequest

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	"code.gitea.io/sdk/gitea"

	"github.com/configbutler/gitops-reverser/testenv"
)

// proposalContext is the context the daemon sets its statuses under.
const proposalContext = "gitops-reverser/proposal"

// longReason is a refusal's reason longer than any host keeps, and what SetStatus sends of it.
var (
	longReason    = "refused: " + strings.Repeat("the ConfigMap team-a/web may not be changed by this user; ", 4)
	longReasonCut = string([]rune(longReason)[:MaxStatusDescription-1]) + "…"
)

// headCommit returns the commit branch of repo points at on the Gitea server.
func headCommit(t *testing.T, g *testenv.Gitea, repo, branch string) string {
	t.Helper()
	b, _, err := g.Client(t).GetRepoBranch(testenv.GiteaAdmin, repo, branch)
	if err != nil || b.Commit == nil || b.Commit.ID == "" {
		t.Fatalf("branch %s of %s: %+v, %v", branch, repo, b, err)
	}
	return b.Commit.ID
}

// giteaStatusOf returns the latest status of context on commit sha, as the server holds it, and
// the commit's combined state.
func giteaStatusOf(t *testing.T, g *testenv.Gitea, repo, sha, context string) (*gitea.Status, gitea.StatusState) {
	t.Helper()
	combined, _, err := g.Client(t).GetCombinedStatus(testenv.GiteaAdmin, repo, sha)
	if err != nil {
		t.Fatalf("combined status of %s: %v", sha, err)
	}
	for _, s := range combined.Statuses {
		if s.Context == context {
			return s, combined.State
		}
	}
	t.Fatalf("commit %s has no status %q: %+v", sha, context, combined.Statuses)
	return nil, ""
}

// giteaStatuses sets pending, then success, then a failure with a long reason on a pushed
// commit that also carries another system's status, and reads each back from the server: the
// latest status of the context is the one set, with its description and link, the other
// context stays, and the commit's combined state follows. Gitea keeps every status it was
// given, so the list holds all three of ours.
func giteaStatuses(t *testing.T, g *testenv.Gitea, repo string) {
	ctx := context.Background()
	pushHead(t, g, repo)
	sha := headCommit(t, g, repo, giteaHead)
	if _, _, err := g.Client(t).CreateStatus(testenv.GiteaAdmin, repo, sha, gitea.CreateStatusOption{
		State: gitea.StatusSuccess, Context: "ci/build", Description: "built",
	}); err != nil {
		t.Fatal(err)
	}
	log := &callLog{}
	h := giteaHostOf(t, g, repo, log)
	link := "https://reverser.example.com/proposals/team-a/prod/1"

	if err := h.SetStatus(ctx, sha, Status{State: StatusPending, Context: proposalContext,
		Description: "waiting for review", TargetURL: link}); err != nil {
		t.Fatal(err)
	}
	got, combined := giteaStatusOf(t, g, repo, sha, proposalContext)
	if got.State != gitea.StatusPending || got.Description != "waiting for review" || got.TargetURL != link || combined != gitea.StatusPending {
		t.Errorf("after pending: %+v, combined %s; want pending \"waiting for review\" linking %s, combined pending", got, combined, link)
	}

	if err := h.SetStatus(ctx, sha, Status{State: StatusSuccess, Context: proposalContext, Description: "applied", TargetURL: link}); err != nil {
		t.Fatal(err)
	}
	got, combined = giteaStatusOf(t, g, repo, sha, proposalContext)
	if got.State != gitea.StatusSuccess || got.Description != "applied" || got.TargetURL != link || combined != gitea.StatusSuccess {
		t.Errorf("after success: %+v, combined %s; want success \"applied\", combined success", got, combined)
	}
	other, _ := giteaStatusOf(t, g, repo, sha, "ci/build")
	if other.State != gitea.StatusSuccess || other.Description != "built" {
		t.Errorf("the other context's status: %+v, want it left as it was", other)
	}

	if err := h.SetStatus(ctx, sha, Status{State: StatusFailure, Context: proposalContext, Description: longReason}); err != nil {
		t.Fatal(err)
	}
	got, combined = giteaStatusOf(t, g, repo, sha, proposalContext)
	if got.State != gitea.StatusFailure || got.Description != longReasonCut || got.TargetURL != "" || combined != gitea.StatusFailure {
		t.Errorf("after failure: %+v, combined %s; want failure %q without a link, combined failure", got, combined, longReasonCut)
	}
	all, _, err := g.Client(t).ListStatuses(testenv.GiteaAdmin, repo, sha, gitea.ListStatusesOption{})
	if err != nil {
		t.Fatal(err)
	}
	var ours []string
	for _, s := range all {
		if s.Context == proposalContext {
			ours = append(ours, string(s.State))
		}
	}
	if slices.Sort(ours); !slices.Equal(ours, []string{"failure", "pending", "success"}) {
		t.Errorf("statuses of %s on the server: %v, want pending, success and failure", proposalContext, ours)
	}
	if calls := log.list(); !slices.Equal(calls, []string{"gitea status 201", "gitea status 201", "gitea status 201"}) {
		t.Errorf("calls %v, want three statuses created", calls)
	}
}

// giteaStatusRefusals: a commit the repository does not have is CommitNotFound (Gitea answers
// it 500), and so is a repository that does not exist (404); a user who may only read the
// repository is Forbidden, and the server holds no status of theirs.
func giteaStatusRefusals(t *testing.T, g *testenv.Gitea, repo string) {
	ctx := context.Background()
	sha := headCommit(t, g, repo, "main")
	st := pendingStatus()

	log := &callLog{}
	err := giteaHostOf(t, g, repo, log).SetStatus(ctx, strings.Repeat("0123456789", 4), st)
	e := mustAPIError(t, err)
	checkError(t, e, KindGitea, OpStatus, 500, wantError{ReasonCommitNotFound, false, 0, "no such commit"})
	if !strings.HasPrefix(e.Error(), "gitea set commit status: 500 ") {
		t.Errorf("error %q: want it to say a commit status failed", e)
	}
	if calls := log.list(); !slices.Equal(calls, []string{"gitea status 500"}) {
		t.Errorf("calls %v, want one status answered 500", calls)
	}

	err = giteaHostOf(t, g, "does-not-exist", nil).SetStatus(ctx, sha, st)
	checkError(t, mustAPIError(t, err), KindGitea, OpStatus, 404, wantError{ReasonCommitNotFound, false, 0, "check the repository URL"})

	token := g.CreateUser(t, "status-reader")
	g.AddCollaborator(t, testenv.GiteaAdmin, repo, "status-reader", "read")
	h := mustNew(t, Settings{Kind: KindGitea, Repository: g.URL() + "/" + testenv.GiteaAdmin + "/" + repo, Token: token}, nil)
	err = h.SetStatus(ctx, sha, st)
	checkError(t, mustAPIError(t, err), KindGitea, OpStatus, 403, wantError{ReasonForbidden, false, 0, "write:repository"})
	if all, _, err := g.Client(t).ListStatuses(testenv.GiteaAdmin, repo, sha, gitea.ListStatusesOption{}); err != nil || len(all) != 0 {
		t.Errorf("statuses on %s after the refusals: %+v, %v; want none", sha, all, err)
	}
}

// TestSetStatusRefusesWhatNoHostTakes shows a status with an unknown state, no context or no
// commit fails as Rejected before any call, on every host.
func TestSetStatusRefusesWhatNoHostTakes(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t.Errorf("unexpected call %s %s", r.Method, r.URL)
	}))
	t.Cleanup(srv.Close)
	sha := strings.Repeat("a", 40)
	tests := []struct {
		name string
		sha  string
		s    Status
	}{
		{"GitLab's state name", sha, Status{State: "failed", Context: proposalContext}},
		{"no state", sha, Status{Context: proposalContext}},
		{"no context", sha, Status{State: StatusSuccess, Context: " "}},
		{"no commit", "", Status{State: StatusSuccess, Context: proposalContext}},
	}
	for _, kind := range []string{KindGitea, KindGitHub, KindGitLab} {
		for _, tt := range tests {
			t.Run(kind+"/"+tt.name, func(t *testing.T) {
				log := &callLog{}
				h := mustNew(t, Settings{Kind: kind, Repository: "https://example.com/octo/site.git", API: srv.URL}, log)
				err := h.SetStatus(context.Background(), tt.sha, tt.s)
				checkError(t, mustAPIError(t, err), kind, OpStatus, 0, wantError{ReasonRejected, false, 0, "refused"})
				if calls := log.list(); len(calls) != 0 {
					t.Errorf("calls %v, want none", calls)
				}
			})
		}
	}
}

// TestCutKeepsShortDescriptions shows cut leaves a description that fits as it is, and cuts a
// longer one to exactly n characters (not bytes), ending in "…".
func TestCutKeepsShortDescriptions(t *testing.T) {
	if got := cut("applied", 140); got != "applied" {
		t.Errorf("cut of a short description = %q", got)
	}
	exact := strings.Repeat("é", 140)
	if got := cut(exact, 140); got != exact {
		t.Errorf("cut of a description of exactly 140 characters changed it: %q", got)
	}
	got := cut(strings.Repeat("é", 141), 140)
	if utf8.RuneCountInString(got) != 140 || !strings.HasSuffix(got, "é…") {
		t.Errorf("cut of 141 characters = %q (%d characters), want 140 ending in …", got, utf8.RuneCountInString(got))
	}
	if got := cut(longReason, MaxStatusDescription); got != longReasonCut || utf8.RuneCountInString(got) > MaxStatusDescription {
		t.Errorf("cut = %q, want %q", got, longReasonCut)
	}
}

// statusRequest is one request a fake host received for a status: method, escaped path,
// the token header and the JSON body.
type statusRequest struct {
	method, path, token string
	body                map[string]any
}

// recordStatusRequest reads r into a statusRequest; tokenHeader names the header the host
// authenticates with.
func recordStatusRequest(t *testing.T, r *http.Request, tokenHeader string) statusRequest {
	req := statusRequest{method: r.Method, path: r.URL.EscapedPath(), token: r.Header.Get(tokenHeader)}
	if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Errorf("%s %s: Content-Type %q, want JSON", r.Method, req.path, ct)
	}
	if err := json.NewDecoder(r.Body).Decode(&req.body); err != nil {
		t.Errorf("%s %s: body is not JSON: %v", r.Method, req.path, err)
	}
	return req
}

// fakeGitHubStatuses answers POST /repos/octo/site/statuses/{sha} as GitHub's REST API
// documents it (docs.github.com/rest/commits/statuses#create-a-commit-status): 201 with the
// status, 422 "No commit found for SHA" for a commit it does not have, and records what it was
// sent. It is a fake because GitHub cannot run here.
type fakeGitHubStatuses struct {
	t       *testing.T
	commits []string // the commits the repository has
	mu      sync.Mutex
	got     []statusRequest
}

func (f *fakeGitHubStatuses) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	sha, ok := strings.CutPrefix(r.URL.Path, "/repos/octo/site/statuses/")
	if !ok || r.Method != http.MethodPost {
		answer{404, nil, `{"message":"Not Found","documentation_url":"https://docs.github.com/rest"}`}.write(w)
		return
	}
	req := recordStatusRequest(f.t, r, "Authorization")
	f.got = append(f.got, req)
	if !slices.Contains(f.commits, sha) {
		answer{422, nil, `{"message":"No commit found for SHA: ` + sha + `",` +
			`"documentation_url":"https://docs.github.com/rest/commits/statuses#create-a-commit-status","status":"422"}`}.write(w)
		return
	}
	out := map[string]any{
		"url": "https://api.github.com/repos/octo/site/statuses/" + sha, "id": len(f.got), "node_id": "SC_kwDO",
		"state": req.body["state"], "description": req.body["description"], "target_url": req.body["target_url"],
		"context": req.body["context"], "created_at": "2026-11-25T10:00:00Z", "updated_at": "2026-11-25T10:00:00Z",
		"creator": map[string]any{"login": "gitops-reverser", "id": 1},
	}
	writeJSON(w, http.StatusCreated, out)
}

// TestGitHubSetStatusPostsTheDocumentedStatus shows SetStatus posts state, context,
// description and target_url to the commit's statuses, leaves target_url out when there is no
// link, cuts a long description to GitHub's 140 characters, and that a commit GitHub does not
// have (422) is CommitNotFound.
func TestGitHubSetStatusPostsTheDocumentedStatus(t *testing.T) {
	sha := strings.Repeat("c0ffee", 6) + "c0de"
	f := &fakeGitHubStatuses{t: t, commits: []string{sha}}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	log := &callLog{}
	h := mustNew(t, Settings{Kind: KindGitHub, Repository: "https://github.com/octo/site.git", API: srv.URL + "/", Token: "ghp_test"}, log)
	ctx := context.Background()
	link := "https://reverser.example.com/proposals/1"

	for _, s := range []Status{
		{State: StatusPending, Context: proposalContext, Description: "waiting for review", TargetURL: link},
		{State: StatusSuccess, Context: proposalContext, Description: "applied", TargetURL: link},
		{State: StatusFailure, Context: proposalContext, Description: longReason},
	} {
		if err := h.SetStatus(ctx, sha, s); err != nil {
			t.Fatalf("SetStatus(%+v): %v", s, err)
		}
	}
	want := []map[string]any{
		{"state": "pending", "context": proposalContext, "description": "waiting for review", "target_url": link},
		{"state": "success", "context": proposalContext, "description": "applied", "target_url": link},
		{"state": "failure", "context": proposalContext, "description": longReasonCut},
	}
	if len(f.got) != len(want) {
		t.Fatalf("GitHub received %d requests, want %d", len(f.got), len(want))
	}
	for i, req := range f.got {
		if req.method != http.MethodPost || req.path != "/repos/octo/site/statuses/"+sha || req.token != "Bearer ghp_test" {
			t.Errorf("request %d: %s %s with %q, want POST /repos/octo/site/statuses/%s with the token", i, req.method, req.path, req.token, sha)
		}
		if fmt.Sprint(req.body) != fmt.Sprint(want[i]) {
			t.Errorf("request %d body %v, want %v", i, req.body, want[i])
		}
	}

	err := h.SetStatus(ctx, strings.Repeat("0", 40), pendingStatus())
	checkError(t, mustAPIError(t, err), KindGitHub, OpStatus, 422, wantError{ReasonCommitNotFound, false, 0, "no such commit"})
	wantCalls := []string{"github status 201", "github status 201", "github status 201", "github status 422"}
	if calls := log.list(); !slices.Equal(calls, wantCalls) {
		t.Errorf("calls %v, want %v", calls, wantCalls)
	}
}

// pendingStatus is a pending proposal status, for calls whose answer is all that matters.
func pendingStatus() Status {
	return Status{State: StatusPending, Context: proposalContext, Description: "waiting for review"}
}

// TestGitHubSetStatusErrors drives GitHub's documented refusals of a status through go-github:
// a token without "Commit statuses" is told which permission to add.
func TestGitHubSetStatusErrors(t *testing.T) {
	tests := []errorCase{
		{"bad credentials", OpStatus, answer{401, nil, `{"message":"Bad credentials","documentation_url":"https://docs.github.com/rest"}`},
			wantError{ReasonUnauthorized, false, 0, "invalid or expired"}},
		{"token without commit statuses", OpStatus, answer{403, map[string]string{"X-RateLimit-Remaining": "4999"},
			`{"message":"Resource not accessible by personal access token","documentation_url":"https://docs.github.com/rest/commits/statuses#create-a-commit-status","status":"403"}`},
			wantError{ReasonForbidden, false, 0, `"Commit statuses: read and write"`}},
		{"repository not found", OpStatus, answer{404, nil, `{"message":"Not Found","documentation_url":"https://docs.github.com/rest/commits/statuses#create-a-commit-status","status":"404"}`},
			wantError{ReasonCommitNotFound, false, 0, "check the repository URL"}},
		{"too many statuses", OpStatus, answer{422, nil, `{"message":"Validation Failed","errors":[{"resource":"Status","code":"custom",` +
			`"message":"This SHA and context has reached the maximum number of statuses."}],"documentation_url":"https://docs.github.com/rest/commits/statuses#create-a-commit-status"}`},
			wantError{ReasonConflict, false, 0, "refused"}},
	}
	runErrorCases(t, KindGitHub, tests, func(t *testing.T, fail http.HandlerFunc, log *callLog) Host {
		return startGitHub(t, &fakeGitHub{fail: fail}, log, nil)
	})
}

// fakeGitLabStatuses answers POST /api/v4/projects/group%2Fsub%2Fsite/statuses/{sha} as GitLab
// documents it (docs.gitlab.com/api/commits, "Set the pipeline status of a commit") and as its
// Ci::CreateCommitStatusService behaves: a status is an external job named after name; a
// pending or running job of that name is moved to the new state, a finished one is followed by
// a new job; enqueueing a job that is pending or running is refused with 400 "Cannot
// transition status via :enqueue from :pending", and the job keeps its description. It is a
// fake because GitLab cannot run here.
type fakeGitLabStatuses struct {
	t       *testing.T
	commits []string
	mu      sync.Mutex
	got     []statusRequest
	jobs    []*glJob // in the order created; the last of a name is its current one
}

type glJob struct {
	ID          int64  `json:"id"`
	SHA         string `json:"sha"`
	Ref         string `json:"ref"`
	Status      string `json:"status"`
	Name        string `json:"name"`
	Description string `json:"description"`
	TargetURL   string `json:"target_url"`
	CreatedAt   string `json:"created_at"`
}

// transitions are the events of GitLab's CommitStatus state machine the API's states fire,
// and the job states each may leave.
var transitions = map[string]struct {
	event string
	from  []string
}{
	"pending": {"enqueue", []string{"created"}},
	"success": {"success", []string{"created", "pending", "running"}},
	"failed":  {"drop", []string{"created", "pending", "running"}},
}

func (f *fakeGitLabStatuses) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	sha, ok := strings.CutPrefix(r.URL.EscapedPath(), "/api/v4/projects/"+glProject+"/statuses/")
	if !ok || r.Method != http.MethodPost {
		answer{404, nil, `{"message":"404 Project Not Found"}`}.write(w)
		return
	}
	req := recordStatusRequest(f.t, r, "PRIVATE-TOKEN")
	f.got = append(f.got, req)
	if !slices.Contains(f.commits, sha) {
		answer{404, nil, `{"message":"404 Commit Not Found"}`}.write(w)
		return
	}
	state, _ := req.body["state"].(string)
	name, _ := req.body["name"].(string)
	tr, ok := transitions[state]
	if !ok {
		answer{400, nil, `{"message":"invalid state"}`}.write(w)
		return
	}
	var job *glJob
	for _, j := range f.jobs {
		if j.SHA == sha && j.Name == name && (j.Status == "pending" || j.Status == "running") {
			job = j
		}
	}
	if job == nil {
		job = &glJob{ID: int64(len(f.jobs) + 1), SHA: sha, Ref: "main", Status: "created", Name: name, CreatedAt: "2026-11-25T10:00:00.000Z"}
		f.jobs = append(f.jobs, job)
	}
	if !slices.Contains(tr.from, job.Status) {
		answer{400, nil, fmt.Sprintf(`{"message":"Cannot transition status via :%s from :%s (Reason(s): Status cannot transition via \"%s\")"}`,
			tr.event, job.Status, tr.event)}.write(w)
		return
	}
	job.Status = state
	job.Description, _ = req.body["description"].(string)
	job.TargetURL, _ = req.body["target_url"].(string)
	writeJSON(w, http.StatusCreated, job)
}

// TestGitLabSetStatusMapsFailureAndTakesTheSameStateAsDone shows SetStatus posts the status as
// GitLab names it (failure as failed, the context as name), that a second pending on a pending
// job, which GitLab refuses with 400, is taken as done and leaves the job as it was, that
// success moves the job on, and a failure after it starts a new job with the description cut.
func TestGitLabSetStatusMapsFailureAndTakesTheSameStateAsDone(t *testing.T) {
	sha := strings.Repeat("beef", 10)
	f := &fakeGitLabStatuses{t: t, commits: []string{sha}}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	log := &callLog{}
	h := mustNew(t, Settings{Kind: KindGitLab, Repository: "git@gitlab.example.com:group/sub/site.git", API: srv.URL + "/api/v4", Token: "glpat-test"}, log)
	ctx := context.Background()
	link := "https://reverser.example.com/proposals/1"

	steps := []struct {
		s    Status
		jobs string // the jobs GitLab holds after the call: "id:status:description"
	}{
		{Status{State: StatusPending, Context: proposalContext, Description: "waiting for review", TargetURL: link}, "1:pending:waiting for review"},
		{Status{State: StatusPending, Context: proposalContext, Description: "still waiting", TargetURL: link}, "1:pending:waiting for review"},
		{Status{State: StatusSuccess, Context: proposalContext, Description: "applied", TargetURL: link}, "1:success:applied"},
		{Status{State: StatusFailure, Context: proposalContext, Description: longReason}, "1:success:applied 2:failed:" + longReasonCut},
	}
	for i, step := range steps {
		if err := h.SetStatus(ctx, sha, step.s); err != nil {
			t.Fatalf("step %d: SetStatus(%+v): %v", i, step.s, err)
		}
		var jobs []string
		for _, j := range f.jobs {
			jobs = append(jobs, fmt.Sprintf("%d:%s:%s", j.ID, j.Status, j.Description))
		}
		if got := strings.Join(jobs, " "); got != step.jobs {
			t.Errorf("step %d: GitLab holds %q, want %q", i, got, step.jobs)
		}
	}
	wantStates := []string{"pending", "pending", "success", "failed"}
	wantDescriptions := []string{"waiting for review", "still waiting", "applied", longReasonCut}
	for i, req := range f.got {
		if req.method != http.MethodPost || req.path != "/api/v4/projects/"+glProject+"/statuses/"+sha || req.token != "glpat-test" {
			t.Errorf("request %d: %s %s with %q, want POST to the commit's statuses with the token", i, req.method, req.path, req.token)
		}
		if req.body["state"] != wantStates[i] || req.body["name"] != proposalContext || req.body["description"] != wantDescriptions[i] {
			t.Errorf("request %d body %v, want state %s, name %s and the description", i, req.body, wantStates[i], proposalContext)
		}
		if _, has := req.body["target_url"]; has != (steps[i].s.TargetURL != "") {
			t.Errorf("request %d body %v: target_url sent %v, want only with a link", i, req.body, has)
		}
	}
	wantCalls := []string{"gitlab status 201", "gitlab status 400", "gitlab status 201", "gitlab status 201"}
	if calls := log.list(); !slices.Equal(calls, wantCalls) {
		t.Errorf("calls %v, want %v", calls, wantCalls)
	}
}

// TestGitLabSetStatusRefusalsStayErrors shows only GitLab's "already in that state" is taken as
// done: pending on a running job (another transition refused), and a commit GitLab does not
// have (404), come back as *Error.
func TestGitLabSetStatusRefusalsStayErrors(t *testing.T) {
	sha := strings.Repeat("beef", 10)
	f := &fakeGitLabStatuses{t: t, commits: []string{sha}}
	f.jobs = []*glJob{{ID: 1, SHA: sha, Name: proposalContext, Status: "running"}}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	h := mustNew(t, Settings{Kind: KindGitLab, Repository: "https://gitlab.example.com/group/sub/site", API: srv.URL + "/api/v4", Token: "glpat-test"}, nil)
	ctx := context.Background()

	err := h.SetStatus(ctx, sha, pendingStatus())
	e := mustAPIError(t, err)
	checkError(t, e, KindGitLab, OpStatus, 400, wantError{ReasonRejected, false, 0, "refused"})
	if !strings.Contains(e.Error(), "from :running") || f.jobs[0].Status != "running" {
		t.Errorf("error %q, job %+v: want GitLab's refusal and the job left running", e, f.jobs[0])
	}
	err = h.SetStatus(ctx, strings.Repeat("0", 40), pendingStatus())
	checkError(t, mustAPIError(t, err), KindGitLab, OpStatus, 404, wantError{ReasonCommitNotFound, false, 0, "no such commit"})
}

// TestGitLabSetStatusErrors drives GitLab's documented refusals of a status through client-go.
func TestGitLabSetStatusErrors(t *testing.T) {
	tests := []errorCase{
		{"invalid token", OpStatus, answer{401, nil, `{"message":"401 Unauthorized"}`},
			wantError{ReasonUnauthorized, false, 0, "invalid or expired"}},
		{"reporter may not set statuses", OpStatus, answer{403, nil, `{"message":"403 Forbidden"}`},
			wantError{ReasonForbidden, false, 0, "at least the Developer role"}},
		{"project not found", OpStatus, answer{404, nil, `{"message":"404 Project Not Found"}`},
			wantError{ReasonCommitNotFound, false, 0, "check the repository URL"}},
		{"commit on no branch", OpStatus, answer{404, nil, `{"message":"404 References for commit Not Found"}`},
			wantError{ReasonCommitNotFound, false, 0, "no such commit"}},
	}
	runErrorCases(t, KindGitLab, tests, func(t *testing.T, fail http.HandlerFunc, log *callLog) Host {
		return startGitLab(t, &fakeGitLab{fail: fail}, log, nil)
	})
}
