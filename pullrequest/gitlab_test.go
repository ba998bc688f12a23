package pullrequest

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// glProject is the project of the GitLab tests, in a subgroup, as GitLab's API takes it in a
// path: one URL-encoded segment (docs.gitlab.com/api/rest, "Namespaced paths").
const glProject = "group%2Fsub%2Fsite"

// fakeGitLab answers the merge request endpoints of GitLab's REST API (docs.gitlab.com/api/
// merge_requests) for project group/sub/site. The JSON is written by hand from the documented
// shapes, with only the fields client-go reads for us. Listing ignores the branch filters, so
// the tests see that Find checks every request itself, and pages pageSize requests a page with
// GitLab's offset pagination headers (X-Page, X-Next-Page, X-Total-Pages, ...).
type fakeGitLab struct {
	mu       sync.Mutex
	mrs      []*glMR
	pageSize int
	queries  []string
	fail     http.HandlerFunc // when set, answers every request instead
}

type glMR struct {
	ID              int64    `json:"id"`
	IID             int64    `json:"iid"`
	ProjectID       int64    `json:"project_id"`
	Title           string   `json:"title"`
	Description     string   `json:"description"`
	State           string   `json:"state"`
	Draft           bool     `json:"draft"`
	CreatedAt       string   `json:"created_at"`
	SourceBranch    string   `json:"source_branch"`
	TargetBranch    string   `json:"target_branch"`
	SourceProjectID int64    `json:"source_project_id"`
	TargetProjectID int64    `json:"target_project_id"`
	SHA             string   `json:"sha"`
	WebURL          string   `json:"web_url"`
	Labels          []string `json:"labels"`
}

// startGitLab serves f and returns a Host for group/sub/site on it, recording calls in log.
func startGitLab(t *testing.T, f *fakeGitLab, log *callLog, hc *http.Client) Host {
	t.Helper()
	if f.pageSize == 0 {
		f.pageSize = 2
	}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	return mustNew(t, Settings{
		Kind: KindGitLab, Repository: "git@gitlab.example.com:group/sub/site.git", API: srv.URL + "/api/v4",
		Token: "glpat-test", HTTPClient: hc,
	}, log)
}

func (f *fakeGitLab) add(source, target string, sourceProject int64, state string) *glMR {
	n := int64(len(f.mrs) + 1)
	mr := &glMR{
		ID: 1000 + n, IID: n, ProjectID: 7, Title: "t", State: state, CreatedAt: "2026-11-20T08:00:00.000Z",
		SourceBranch: source, TargetBranch: target, SourceProjectID: sourceProject, TargetProjectID: 7,
		SHA: fmt.Sprintf("sha-%d", n), WebURL: fmt.Sprintf("https://gitlab.example.com/group/sub/site/-/merge_requests/%d", n),
	}
	f.mrs = append(f.mrs, mr)
	return mr
}

func (f *fakeGitLab) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if f.fail != nil {
		f.fail(w, r)
		return
	}
	if r.Header.Get("PRIVATE-TOKEN") != "glpat-test" {
		answer{401, nil, `{"message":"401 Unauthorized"}`}.write(w)
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	rest, ok := strings.CutPrefix(r.URL.EscapedPath(), "/api/v4/projects/"+glProject+"/merge_requests")
	switch {
	case !ok:
		answer{404, nil, `{"message":"404 Project Not Found"}`}.write(w)
	case rest == "" && r.Method == http.MethodGet:
		f.list(w, r)
	case rest == "" && r.Method == http.MethodPost:
		f.create(w, r)
	default:
		n, _ := strconv.Atoi(strings.TrimPrefix(rest, "/"))
		if n < 1 || n > len(f.mrs) {
			answer{404, nil, `{"message":"404 Not found"}`}.write(w)
			return
		}
		f.mr(w, r, f.mrs[n-1])
	}
}

func (f *fakeGitLab) list(w http.ResponseWriter, r *http.Request) {
	f.queries = append(f.queries, r.URL.RawQuery)
	var open []*glMR
	for _, mr := range f.mrs {
		if mr.State == "opened" {
			open = append(open, mr)
		}
	}
	page, _ := strconv.Atoi(r.URL.Query().Get("page"))
	page = max(page, 1)
	pages := max((len(open)+f.pageSize-1)/f.pageSize, 1)
	from, to := min((page-1)*f.pageSize, len(open)), min(page*f.pageSize, len(open))
	h := w.Header()
	h.Set("X-Page", strconv.Itoa(page))
	h.Set("X-Per-Page", strconv.Itoa(f.pageSize))
	h.Set("X-Total", strconv.Itoa(len(open)))
	h.Set("X-Total-Pages", strconv.Itoa(pages))
	if page < pages {
		h.Set("X-Next-Page", strconv.Itoa(page+1))
	} else {
		h.Set("X-Next-Page", "")
	}
	writeJSON(w, http.StatusOK, open[from:to])
}

// create answers 409 as GitLab does when an open merge request has the same source branch.
func (f *fakeGitLab) create(w http.ResponseWriter, r *http.Request) {
	var in struct {
		Title        string `json:"title"`
		Description  string `json:"description"`
		SourceBranch string `json:"source_branch"`
		TargetBranch string `json:"target_branch"`
		Labels       string `json:"labels"` // comma-separated names
	}
	_ = json.NewDecoder(r.Body).Decode(&in)
	for _, mr := range f.mrs {
		if mr.State == "opened" && mr.SourceBranch == in.SourceBranch {
			answer{409, nil, fmt.Sprintf(`{"message":["Another open merge request already exists for this source branch: !%d"]}`, mr.IID)}.write(w)
			return
		}
	}
	mr := f.add(in.SourceBranch, in.TargetBranch, 7, "opened")
	mr.Title, mr.Description, mr.Draft = in.Title, in.Description, strings.HasPrefix(in.Title, "Draft:")
	if in.Labels != "" {
		mr.Labels = strings.Split(in.Labels, ",")
	}
	writeJSON(w, http.StatusCreated, mr)
}

func (f *fakeGitLab) mr(w http.ResponseWriter, r *http.Request, mr *glMR) {
	if r.Method == http.MethodPut {
		var in struct {
			Title       *string `json:"title"`
			Description *string `json:"description"`
			StateEvent  string  `json:"state_event"`
		}
		_ = json.NewDecoder(r.Body).Decode(&in)
		if in.Title != nil {
			mr.Title, mr.Draft = *in.Title, strings.HasPrefix(*in.Title, "Draft:")
		}
		if in.Description != nil {
			mr.Description = *in.Description
		}
		if in.StateEvent == "close" {
			mr.State = "closed"
		}
	}
	writeJSON(w, http.StatusOK, mr)
}

// TestGitLabFindPagesAndMatchesHeadAndBase shows Find reads X-Next-Page to the second page,
// sends the state and branch filters, addresses the project by its encoded full path, and
// passes over requests of another target, another source and a fork's branch of the same name.
func TestGitLabFindPagesAndMatchesHeadAndBase(t *testing.T) {
	f := &fakeGitLab{}
	f.add("gitops-reverser/prod", "develop", 7, "opened") // another target
	f.add("feature", "main", 7, "opened")                 // another source
	f.add("gitops-reverser/prod", "main", 99, "opened")   // from a fork
	f.add("gitops-reverser/prod", "main", 7, "merged")    // merged
	want := f.add("gitops-reverser/prod", "main", 7, "opened")
	log := &callLog{}
	h := startGitLab(t, f, log, nil)

	got, err := h.Find(context.Background(), "gitops-reverser/prod", "main")
	if err != nil {
		t.Fatal(err)
	}
	if got == nil || got.Number != want.IID || got.HeadCommit != want.SHA || got.URL != want.WebURL ||
		got.State != StateOpen || !got.OpenedAt.Equal(time.Date(2026, 11, 20, 8, 0, 0, 0, time.UTC)) {
		t.Fatalf("Find = %+v, want !%d", got, want.IID)
	}
	if calls := log.list(); !slices.Equal(calls, []string{"gitlab find 200", "gitlab find 200"}) {
		t.Errorf("calls %v, want two pages", calls)
	}
	if q := f.queries[0]; !strings.Contains(q, "state=opened") || !strings.Contains(q, "source_branch=gitops-reverser%2Fprod") ||
		!strings.Contains(q, "target_branch=main") {
		t.Errorf("list query %q: want the state and branch filters", q)
	}
}

// TestGitLabOpenAnswersDuplicatesWithTheExisting shows Open creates a draft merge request with
// its labels, and that a second Open, answered 409 "Another open merge request already exists
// for this source branch", returns the first one instead of a second.
func TestGitLabOpenAnswersDuplicatesWithTheExisting(t *testing.T) {
	f := &fakeGitLab{}
	h := startGitLab(t, f, nil, nil)
	ctx := context.Background()
	nr := NewRequest{Head: "gitops-reverser/prod", Base: "main", Title: "t1", Body: "b1", Labels: []string{"mirror", "prod"}, Draft: true}

	first, err := h.Open(ctx, nr)
	if err != nil {
		t.Fatal(err)
	}
	if first.Number != 1 || !first.Draft || first.Title != "Draft: t1" || first.Body != "b1" {
		t.Errorf("Open = %+v, want draft !1 titled \"Draft: t1\"", first)
	}
	if got := f.mrs[0].Labels; !slices.Equal(got, []string{"mirror", "prod"}) {
		t.Errorf("labels = %v, want [mirror prod]", got)
	}
	second, err := h.Open(ctx, nr)
	if err != nil {
		t.Fatal(err)
	}
	if second.Number != first.Number || len(f.mrs) != 1 {
		t.Errorf("second Open = !%d with %d merge requests, want !%d and 1", second.Number, len(f.mrs), first.Number)
	}
}

// TestGitLabUpdateKeepsDraftsAndTellsMerged shows Update keeps a draft's prefix, leaves a
// merged request as it is and says it is merged, and Close closes.
func TestGitLabUpdateKeepsDraftsAndTellsMerged(t *testing.T) {
	f := &fakeGitLab{}
	draft := f.add("gitops-reverser/prod", "main", 7, "opened")
	draft.Title, draft.Draft = "Draft: old", true
	merged := f.add("gitops-reverser/staging", "main", 7, "merged")
	log := &callLog{}
	h := startGitLab(t, f, log, nil)
	ctx := context.Background()

	got, err := h.Update(ctx, draft.IID, "new", "body")
	if err != nil {
		t.Fatal(err)
	}
	if got.Title != "Draft: new" || !got.Draft || got.Body != "body" {
		t.Errorf("Update of a draft = %+v, want title \"Draft: new\"", got)
	}
	got, err = h.Update(ctx, merged.IID, "new", "body")
	if err != nil {
		t.Fatal(err)
	}
	if got.State != StateMerged || got.Title != "t" {
		t.Errorf("Update of a merged request = %+v, want it merged and unchanged", got)
	}
	if err := h.Close(ctx, draft.IID); err != nil {
		t.Fatal(err)
	}
	if got, err := h.Get(ctx, draft.IID); err != nil || got.State != StateClosed {
		t.Errorf("Get after Close = %+v, %v; want closed", got, err)
	}
	// Update reads the request first (a get), to keep a draft's prefix and leave a merged one be.
	want := []string{"gitlab get 200", "gitlab update 200", "gitlab get 200", "gitlab close 200", "gitlab get 200"}
	if calls := log.list(); !slices.Equal(calls, want) {
		t.Errorf("calls %v, want %v", calls, want)
	}
}

// TestGitLabErrorsTellReasonAndWait drives each documented failure through client-go, whose own
// retries are off. The answers follow docs.gitlab.com/api/rest/troubleshooting (status codes)
// and docs.gitlab.com/security/rate_limits (429 with RateLimit-Reset in Unix seconds and
// Retry-After).
func TestGitLabErrorsTellReasonAndWait(t *testing.T) {
	reset := strconv.FormatInt(testNow.Add(45*time.Second).Unix(), 10)
	tests := []errorCase{
		{"invalid token", OpFind, answer{401, nil, `{"message":"401 Unauthorized"}`},
			wantError{ReasonUnauthorized, false, 0, "invalid or expired"}},
		{"token without the api scope", OpOpen, answer{403, map[string]string{"WWW-Authenticate": `Bearer realm="", error="insufficient_scope"`},
			`{"error":"insufficient_scope","error_description":"The request requires higher privileges than provided by the access token.","scope":"api"}`},
			wantError{ReasonForbidden, false, 0, "api scope, and its user at least the Developer role"}},
		{"project not found", OpFind, answer{404, nil, `{"message":"404 Project Not Found"}`},
			wantError{ReasonRepositoryNotFound, false, 0, "check the repository URL"}},
		{"merge request not found", OpClose, answer{404, nil, `{"message":"404 Not found"}`},
			wantError{ReasonRequestNotFound, false, 0, "find the open one by its branches"}},
		{"rate limited with a reset time", OpFind, answer{429, map[string]string{"RateLimit-Limit": "600", "RateLimit-Observed": "601",
			"RateLimit-Remaining": "0", "RateLimit-Reset": reset}, `{"message":"Retry later"}`},
			wantError{ReasonRateLimited, true, 45 * time.Second, "rate limit"}},
		{"rate limited with retry-after", OpGet, answer{429, map[string]string{"Retry-After": "60", "RateLimit-Reset": reset}, `Retry later`},
			wantError{ReasonRateLimited, true, time.Minute, "rate limit"}},
		{"source branch missing", OpOpen, answer{422, nil, `{"message":["Source branch \"x\" does not exist"]}`},
			wantError{ReasonConflict, false, 0, "refused"}},
		{"server error", OpGet, answer{500, map[string]string{"RateLimit-Reset": reset}, `{"message":"500 Internal Server Error"}`},
			wantError{ReasonHostUnavailable, true, 0, "failing"}},
		{"bad gateway", OpFind, answer{502, nil, `<html>502 Bad Gateway</html>`},
			wantError{ReasonHostUnavailable, true, 0, "failing"}},
		{"unavailable", OpFind, answer{503, map[string]string{"Retry-After": "5"}, `{"message":"503 Service Unavailable"}`},
			wantError{ReasonHostUnavailable, true, 5 * time.Second, "failing"}},
	}
	runErrorCases(t, KindGitLab, tests, func(t *testing.T, fail http.HandlerFunc, log *callLog) Host {
		return startGitLab(t, &fakeGitLab{fail: fail}, log, nil)
	})
}

// TestGitLabTimeoutIsTemporary shows a host that does not answer within the client's timeout
// gives Timeout with status 0, after one try.
func TestGitLabTimeoutIsTemporary(t *testing.T) {
	log := &callLog{}
	h := startGitLab(t, &fakeGitLab{fail: blockUntilGone(t)}, log, &http.Client{Timeout: 50 * time.Millisecond})
	_, err := h.Get(context.Background(), 1)
	checkError(t, mustAPIError(t, err), KindGitLab, OpGet, 0, wantError{ReasonTimeout, true, 0, "did not answer"})
	if calls := log.list(); !slices.Equal(calls, []string{"gitlab get 0"}) {
		t.Errorf("calls %v, want one get with status 0", calls)
	}
}
