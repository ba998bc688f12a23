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

// fakeGitHub answers the pull request endpoints of GitHub's REST API for the repository
// octo/site, as documented at docs.github.com/rest/pulls/pulls and
// docs.github.com/rest/issues/labels. The JSON is written by hand from the documented shapes,
// with only the fields go-github reads for us. Listing ignores the head and base filters, so
// the tests see that Find checks every request itself; it answers pageSize requests a page
// and links the next page as GitHub does (Link: <...&page=2>; rel="next").
type fakeGitHub struct {
	mu       sync.Mutex
	pulls    []*ghPull
	pageSize int
	queries  []string // the query of every list call
	labelled map[int][]string
	noDrafts bool    // refuse drafts as GitHub does on plans without them
	labels   *answer // when set, answers labelling
	// fail, when set, answers every request instead.
	fail http.HandlerFunc
}

type ghPull struct {
	Number   int       `json:"number"`
	HTMLURL  string    `json:"html_url"`
	State    string    `json:"state"`
	Draft    bool      `json:"draft"`
	Merged   bool      `json:"merged"`
	MergedAt *string   `json:"merged_at"`
	Title    string    `json:"title"`
	Body     string    `json:"body"`
	Created  string    `json:"created_at"`
	Head     ghPullRef `json:"head"`
	Base     ghPullRef `json:"base"`
}

type ghPullRef struct {
	Ref   string `json:"ref"`
	SHA   string `json:"sha"`
	Label string `json:"label"`
}

// startGitHub serves f and returns a Host for octo/site on it, recording calls in log.
func startGitHub(t *testing.T, f *fakeGitHub, log *callLog, hc *http.Client) Host {
	t.Helper()
	if f.pageSize == 0 {
		f.pageSize = 2
	}
	f.labelled = map[int][]string{}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	return mustNew(t, Settings{
		Kind: KindGitHub, Repository: "https://github.com/octo/site.git", API: srv.URL + "/",
		Token: "ghp_test", HTTPClient: hc, UserAgent: "gitops-reverser-test",
	}, log)
}

func (f *fakeGitHub) add(head, base, label, state string) *ghPull {
	p := &ghPull{
		Number: len(f.pulls) + 1, State: state, Title: "t", Created: "2026-11-20T08:00:00Z",
		Head: ghPullRef{Ref: head, SHA: fmt.Sprintf("sha-%d", len(f.pulls)+1), Label: label + ":" + head},
		Base: ghPullRef{Ref: base, Label: "octo:" + base},
	}
	p.HTMLURL = fmt.Sprintf("https://github.com/octo/site/pull/%d", p.Number)
	f.pulls = append(f.pulls, p)
	return p
}

func (f *fakeGitHub) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if f.fail != nil {
		f.fail(w, r)
		return
	}
	if r.Header.Get("Authorization") != "Bearer ghp_test" {
		answer{401, nil, `{"message":"Bad credentials","documentation_url":"https://docs.github.com/rest"}`}.write(w)
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	rest, ok := strings.CutPrefix(r.URL.Path, "/repos/octo/site/")
	switch {
	case !ok:
		answer{404, nil, `{"message":"Not Found"}`}.write(w)
	case rest == "pulls" && r.Method == http.MethodGet:
		f.list(w, r)
	case rest == "pulls" && r.Method == http.MethodPost:
		f.create(w, r)
	case strings.HasPrefix(rest, "issues/") && strings.HasSuffix(rest, "/labels"):
		n, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(rest, "issues/"), "/labels"))
		if f.labels != nil {
			f.labels.write(w)
			return
		}
		var labels []string
		_ = json.NewDecoder(r.Body).Decode(&labels) // a plain array of names
		f.labelled[n] = labels
		writeJSON(w, http.StatusOK, []map[string]any{})
	case strings.HasPrefix(rest, "pulls/"):
		n, _ := strconv.Atoi(strings.TrimPrefix(rest, "pulls/"))
		if n < 1 || n > len(f.pulls) {
			answer{404, nil, `{"message":"Not Found"}`}.write(w)
			return
		}
		f.pull(w, r, f.pulls[n-1])
	default:
		answer{404, nil, `{"message":"Not Found"}`}.write(w)
	}
}

func (f *fakeGitHub) list(w http.ResponseWriter, r *http.Request) {
	f.queries = append(f.queries, r.URL.RawQuery)
	var open []*ghPull
	for _, p := range f.pulls {
		if p.State == "open" {
			open = append(open, p)
		}
	}
	page, _ := strconv.Atoi(r.URL.Query().Get("page"))
	page = max(page, 1)
	from, to := min((page-1)*f.pageSize, len(open)), min(page*f.pageSize, len(open))
	if to < len(open) {
		next := *r.URL
		q := next.Query()
		q.Set("page", strconv.Itoa(page+1))
		next.RawQuery = q.Encode()
		w.Header().Set("Link", fmt.Sprintf(`<http://%s%s>; rel="next"`, r.Host, next.RequestURI()))
	}
	writeJSON(w, http.StatusOK, open[from:to])
}

// create answers 422 as GitHub does when an open pull request has the same head and base.
func (f *fakeGitHub) create(w http.ResponseWriter, r *http.Request) {
	var in struct {
		Title, Head, Base, Body string
		Draft                   bool
	}
	_ = json.NewDecoder(r.Body).Decode(&in)
	if in.Draft && f.noDrafts {
		answer{422, nil, `{"message":"Validation Failed","errors":[{"resource":"PullRequest","code":"custom",` +
			`"message":"Draft pull requests are not supported in this repository."}]}`}.write(w)
		return
	}
	for _, p := range f.pulls {
		if p.State == "open" && p.Head.Ref == in.Head && p.Base.Ref == in.Base {
			answer{422, nil, `{"message":"Validation Failed","errors":[{"resource":"PullRequest","code":"custom",` +
				`"message":"A pull request already exists for octo:` + in.Head + `."}],` +
				`"documentation_url":"https://docs.github.com/rest/pulls/pulls#create-a-pull-request","status":"422"}`}.write(w)
			return
		}
	}
	p := f.add(in.Head, in.Base, "octo", "open")
	p.Title, p.Body, p.Draft = in.Title, in.Body, in.Draft
	writeJSON(w, http.StatusCreated, p)
}

func (f *fakeGitHub) pull(w http.ResponseWriter, r *http.Request, p *ghPull) {
	if r.Method == http.MethodPatch {
		var in struct{ Title, Body, State *string }
		_ = json.NewDecoder(r.Body).Decode(&in)
		if in.Title != nil {
			p.Title = *in.Title
		}
		if in.Body != nil {
			p.Body = *in.Body
		}
		if in.State != nil {
			p.State = *in.State
		}
	}
	writeJSON(w, http.StatusOK, p)
}

// merge makes p merged, as the GitHub UI would.
func (p *ghPull) merge() {
	at := "2026-11-25T09:00:00Z"
	p.State, p.Merged, p.MergedAt = "closed", true, &at
}

// TestGitHubFindPagesAndMatchesHeadAndBase shows Find follows the Link header to the second
// page, sends the head and base filters, and still passes over requests of another base, another
// head and a fork's branch of the same name.
func TestGitHubFindPagesAndMatchesHeadAndBase(t *testing.T) {
	f := &fakeGitHub{}
	f.add("gitops-reverser/prod", "develop", "octo", "open") // another base
	f.add("feature", "main", "octo", "open")                 // another head
	f.add("gitops-reverser/prod", "main", "fork", "open")    // a fork's branch
	f.add("gitops-reverser/prod", "main", "octo", "closed")  // closed
	want := f.add("gitops-reverser/prod", "main", "octo", "open")
	log := &callLog{}
	h := startGitHub(t, f, log, nil)

	got, err := h.Find(context.Background(), "gitops-reverser/prod", "main")
	if err != nil {
		t.Fatal(err)
	}
	if got == nil || got.Number != int64(want.Number) || got.State != StateOpen || got.HeadCommit != want.Head.SHA ||
		got.URL != want.HTMLURL || got.OpenedAt != time.Date(2026, 11, 20, 8, 0, 0, 0, time.UTC) {
		t.Fatalf("Find = %+v, want #%d", got, want.Number)
	}
	if calls := log.list(); !slices.Equal(calls, []string{"github find 200", "github find 200"}) {
		t.Errorf("calls %v, want two pages", calls)
	}
	if q := f.queries[0]; !strings.Contains(q, "head=octo%3Agitops-reverser%2Fprod") ||
		!strings.Contains(q, "base=main") || !strings.Contains(q, "state=open") {
		t.Errorf("list query %q: want the state, head and base filters", q)
	}
	none, err := h.Find(context.Background(), "gitops-reverser/other", "main")
	if none != nil || err != nil {
		t.Errorf("Find of a head with no request = %+v, %v; want nil, nil", none, err)
	}
}

// TestGitHubOpenLabelsAndAnswersDuplicatesWithTheExisting shows Open creates a draft request
// and labels it, and that a second Open for the same head, answered 422 "A pull request
// already exists", returns the first request instead of a second one.
func TestGitHubOpenLabelsAndAnswersDuplicatesWithTheExisting(t *testing.T) {
	f := &fakeGitHub{}
	h := startGitHub(t, f, nil, nil)
	ctx := context.Background()
	nr := NewRequest{Head: "gitops-reverser/prod", Base: "main", Title: "t1", Body: "b1", Labels: []string{"mirror"}, Draft: true}

	first, err := h.Open(ctx, nr)
	if err != nil {
		t.Fatal(err)
	}
	if first.Number != 1 || !first.Draft || first.State != StateOpen || len(first.Warnings) != 0 {
		t.Errorf("Open = %+v, want draft #1 without warnings", first)
	}
	if got := f.labelled[1]; !slices.Equal(got, []string{"mirror"}) {
		t.Errorf("labels on #1 = %v, want [mirror]", got)
	}
	second, err := h.Open(ctx, nr)
	if err != nil {
		t.Fatal(err)
	}
	if second.Number != first.Number || len(f.pulls) != 1 {
		t.Errorf("second Open = #%d with %d requests on the host, want #%d and 1", second.Number, len(f.pulls), first.Number)
	}
}

// TestGitHubOpenWarnsWhatItCouldNotDo shows a draft on a plan without drafts is opened ready
// for review, and labels GitHub refuses do not fail Open: both come back as warnings.
func TestGitHubOpenWarnsWhatItCouldNotDo(t *testing.T) {
	f := &fakeGitHub{noDrafts: true, labels: &answer{403, nil, `{"message":"Resource not accessible by personal access token"}`}}
	log := &callLog{}
	h := startGitHub(t, f, log, nil)
	got, err := h.Open(context.Background(), NewRequest{Head: "h", Base: "main", Title: "t", Labels: []string{"mirror"}, Draft: true})
	if err != nil {
		t.Fatal(err)
	}
	if got.Draft || len(got.Warnings) != 2 || !strings.Contains(got.Warnings[0], "ready for review") ||
		!strings.Contains(got.Warnings[1], "labels not added") {
		t.Errorf("Open = %+v, want a ready request and two warnings", got)
	}
	want := []string{"github open 422", "github open 201", "github labels 403"}
	if calls := log.list(); !slices.Equal(calls, want) {
		t.Errorf("calls %v, want %v", calls, want)
	}
}

// TestGitHubUpdateTellsMergedAndCloseCloses shows Update reports a request merged meanwhile,
// and Close closes an open one.
func TestGitHubUpdateTellsMergedAndCloseCloses(t *testing.T) {
	f := &fakeGitHub{}
	merged := f.add("gitops-reverser/prod", "main", "octo", "open")
	merged.merge()
	open := f.add("gitops-reverser/staging", "main", "octo", "open")
	h := startGitHub(t, f, nil, nil)
	ctx := context.Background()

	got, err := h.Update(ctx, int64(merged.Number), "new title", "new body")
	if err != nil {
		t.Fatal(err)
	}
	if got.State != StateMerged || got.Title != "new title" || got.Body != "new body" {
		t.Errorf("Update of a merged request = %+v, want state merged with the new text", got)
	}
	if err := h.Close(ctx, int64(open.Number)); err != nil {
		t.Fatal(err)
	}
	got, err = h.Get(ctx, int64(open.Number))
	if err != nil || got.State != StateClosed {
		t.Errorf("Get after Close = %+v, %v; want state closed", got, err)
	}
}

// TestGitHubErrorsTellReasonAndWait drives each documented failure through go-github and checks
// the reason, whether it is temporary, and how long the host asked to wait. The answers follow
// docs.github.com/rest (client errors, "Rate limits for the REST API": a primary limit is a 403
// or 429 with x-ratelimit-remaining 0 and x-ratelimit-reset in epoch seconds; a secondary one a
// 403 or 429 whose message says so, with retry-after).
func TestGitHubErrorsTellReasonAndWait(t *testing.T) {
	reset := strconv.FormatInt(testNow.Add(2*time.Minute).Unix(), 10)
	secondary := `{"message":"You have exceeded a secondary rate limit. Please wait a few minutes before you try again.",` +
		`"documentation_url":"https://docs.github.com/free-pro-team@latest/rest/overview/rate-limits-for-the-rest-api#about-secondary-rate-limits"}`
	tests := []errorCase{
		{"bad credentials", OpFind, answer{401, nil, `{"message":"Bad credentials","documentation_url":"https://docs.github.com/rest"}`},
			wantError{ReasonUnauthorized, false, 0, "invalid or expired"}},
		{"token without the scope", OpOpen, answer{403, map[string]string{"X-RateLimit-Remaining": "4999", "X-RateLimit-Reset": reset},
			`{"message":"Resource not accessible by personal access token","documentation_url":"https://docs.github.com/rest/pulls/pulls#create-a-pull-request","status":"403"}`},
			wantError{ReasonForbidden, false, 0, `"Pull requests: read and write"`}},
		{"repository not found", OpFind, answer{404, nil, `{"message":"Not Found","documentation_url":"https://docs.github.com/rest/pulls/pulls#list-pull-requests"}`},
			wantError{ReasonRepositoryNotFound, false, 0, "check the repository URL"}},
		{"request not found", OpGet, answer{404, nil, `{"message":"Not Found"}`},
			wantError{ReasonRequestNotFound, false, 0, "find the open one by its branches"}},
		{"too many requests", OpFind, answer{429, map[string]string{"Retry-After": "30"}, `{"message":"Too Many Requests"}`},
			wantError{ReasonRateLimited, true, 30 * time.Second, "rate limit"}},
		{"primary rate limit", OpFind, answer{403, map[string]string{"X-RateLimit-Limit": "5000", "X-RateLimit-Remaining": "0", "X-RateLimit-Reset": reset},
			`{"message":"API rate limit exceeded for user ID 1.","documentation_url":"https://docs.github.com/rest/overview/rate-limits-for-the-rest-api#about-primary-rate-limits"}`},
			wantError{ReasonRateLimited, true, 2 * time.Minute, "rate limit"}},
		{"secondary rate limit", OpOpen, answer{403, map[string]string{"Retry-After": "60", "X-RateLimit-Remaining": "4990", "X-RateLimit-Reset": reset}, secondary},
			wantError{ReasonRateLimited, true, time.Minute, "rate limit"}},
		{"secondary rate limit without its documentation link", OpOpen, answer{403, map[string]string{"Retry-After": "60"},
			`{"message":"You have exceeded a secondary rate limit and have been temporarily blocked from content creation."}`},
			wantError{ReasonRateLimited, true, time.Minute, "rate limit"}},
		{"head branch missing", OpOpen, answer{422, nil, `{"message":"Validation Failed","errors":[{"resource":"PullRequest","field":"head","code":"invalid"}]}`},
			wantError{ReasonConflict, false, 0, "refused"}},
		{"server error", OpFind, answer{500, map[string]string{"X-RateLimit-Reset": reset}, `{"message":"Server Error"}`},
			wantError{ReasonHostUnavailable, true, 0, "failing"}},
		{"bad gateway", OpGet, answer{502, nil, `<html>502 Bad Gateway</html>`},
			wantError{ReasonHostUnavailable, true, 0, "failing"}},
		{"unavailable with a date to retry at", OpUpdate, answer{503, map[string]string{"Retry-After": testNow.Add(90 * time.Second).Format(http.TimeFormat)}, `{"message":"Service Unavailable"}`},
			wantError{ReasonHostUnavailable, true, 90 * time.Second, "failing"}},
	}
	runErrorCases(t, KindGitHub, tests, func(t *testing.T, fail http.HandlerFunc, log *callLog) Host {
		return startGitHub(t, &fakeGitHub{fail: fail}, log, nil)
	})
}

// TestGitHubTimeoutAndRefusedConnectionAreTemporary shows a host that does not answer within the
// client's timeout gives Timeout, and one that refuses the connection HostUnavailable, both
// temporary with status 0.
func TestGitHubTimeoutAndRefusedConnectionAreTemporary(t *testing.T) {
	log := &callLog{}
	h := startGitHub(t, &fakeGitHub{fail: blockUntilGone(t)}, log, &http.Client{Timeout: 50 * time.Millisecond})
	_, err := h.Find(context.Background(), "a", "main")
	checkError(t, mustAPIError(t, err), KindGitHub, OpFind, 0, wantError{ReasonTimeout, true, 0, "did not answer"})
	if calls := log.list(); !slices.Equal(calls, []string{"github find 0"}) {
		t.Errorf("calls %v, want one find with status 0", calls)
	}

	srv := httptest.NewServer(http.NotFoundHandler())
	srv.Close() // nothing listens there any more
	h = mustNew(t, Settings{Kind: KindGitHub, Repository: "git@github.com:octo/site.git", API: srv.URL}, nil)
	_, err = h.Get(context.Background(), 1)
	checkError(t, mustAPIError(t, err), KindGitHub, OpGet, 0, wantError{ReasonHostUnavailable, true, 0, "unreachable"})
}

// callOp makes the call op of h, with arguments that do not matter to a failing host.
func callOp(h Host, op string) error {
	ctx := context.Background()
	var err error
	switch op {
	case OpFind:
		_, err = h.Find(ctx, "gitops-reverser/prod", "main")
	case OpOpen:
		_, err = h.Open(ctx, NewRequest{Head: "gitops-reverser/prod", Base: "main", Title: "t"})
	case OpUpdate:
		_, err = h.Update(ctx, 1, "t", "b")
	case OpGet:
		_, err = h.Get(ctx, 1)
	case OpClose:
		err = h.Close(ctx, 1)
	case OpStatus:
		err = h.SetStatus(ctx, strings.Repeat("a", 40), Status{State: StatusPending, Context: "gitops-reverser/proposal"})
	}
	return err
}
