package pullrequest

import (
	"context"
	"encoding/base64"
	"slices"
	"strings"
	"testing"

	"code.gitea.io/sdk/gitea"

	"github.com/configbutler/gitops-reverser/testenv"
)

// TestGitea runs the Gitea host against a real Gitea server (testenv.StartGitea), one server
// for all its cases, each on a repository of its own whose main branch is protected.
func TestGitea(t *testing.T) {
	g := testenv.StartGitea(t)
	for _, tc := range []struct {
		name string
		run  func(t *testing.T, g *testenv.Gitea, repo string)
	}{
		{"LifecycleFromFindToClose", giteaLifecycle},
		{"MergedRequestIsReportedMerged", giteaMerged},
		{"OpeningTwiceGivesTheSameRequest", giteaOpenTwice},
		{"WrongTokenIsUnauthorized", giteaWrongToken},
		{"WrongRepositoryIsNotFound", giteaWrongRepository},
		{"ReaderIsForbidden", giteaReader},
		{"DeliveryWritesOnlyWhatChanged", giteaDelivery},
		{"StatusesFollowTheProposal", giteaStatuses},
		{"StatusRefusalsAreErrors", giteaStatusRefusals},
	} {
		t.Run(tc.name, func(t *testing.T) {
			repo := strings.ToLower(tc.name)
			g.CreateRepo(t, testenv.GiteaAdmin, repo)
			g.ProtectBranch(t, testenv.GiteaAdmin, repo, "main")
			tc.run(t, g, repo)
		})
	}
}

// giteaHead is the head branch the daemon would own.
const giteaHead = "gitops-reverser/prod"

// giteaHostOf is the Host of the repository, as the administrator, its API derived from the
// clone URL.
func giteaHostOf(t *testing.T, g *testenv.Gitea, repo string, log *callLog) Host {
	t.Helper()
	return mustNew(t, Settings{
		Kind: KindGitea, Repository: g.URL() + "/" + testenv.GiteaAdmin + "/" + repo + ".git",
		Token: g.AdminToken(), UserAgent: "gitops-reverser-test",
	}, log)
}

// pushHead commits a file to a new branch giteaHead of repo, from main.
func pushHead(t *testing.T, g *testenv.Gitea, repo string) {
	t.Helper()
	_, _, err := g.Client(t).CreateFile(testenv.GiteaAdmin, repo, "clusters/prod/cm.yaml", gitea.CreateFileOptions{
		FileOptions: gitea.FileOptions{Message: "mirror a change", BranchName: "main", NewBranchName: giteaHead},
		Content:     base64.StdEncoding.EncodeToString([]byte("kind: ConfigMap\n")),
	})
	if err != nil {
		t.Fatalf("push %s: %v", giteaHead, err)
	}
}

// giteaLifecycle: Find finds nothing, Open opens a draft with the label that exists (and warns
// about the one that does not), Find finds it, Update changes title and body and keeps the
// draft prefix, Get reads it, Close closes it, and Find finds nothing again.
func giteaLifecycle(t *testing.T, g *testenv.Gitea, repo string) {
	ctx := context.Background()
	pushHead(t, g, repo)
	if _, _, err := g.Client(t).CreateLabel(testenv.GiteaAdmin, repo, gitea.CreateLabelOption{Name: "mirror", Color: "#00aabb"}); err != nil {
		t.Fatal(err)
	}
	log := &callLog{}
	h := giteaHostOf(t, g, repo, log)
	if got, err := h.Find(ctx, giteaHead, "main"); got != nil || err != nil {
		t.Fatalf("Find before Open = %+v, %v; want nil, nil", got, err)
	}
	opened, err := h.Open(ctx, NewRequest{Head: giteaHead, Base: "main", Title: "changes", Body: "body",
		Labels: []string{"mirror", "missing"}, Draft: true})
	if err != nil {
		t.Fatal(err)
	}
	if !opened.Draft || opened.Title != "WIP: changes" || opened.State != StateOpen || opened.HeadCommit == "" ||
		opened.Head != giteaHead || opened.Base != "main" || opened.OpenedAt.IsZero() || !strings.HasPrefix(opened.URL, g.URL()) {
		t.Errorf("Open = %+v, want an open draft titled \"WIP: changes\"", opened)
	}
	if len(opened.Warnings) != 1 || !strings.Contains(opened.Warnings[0], `"missing"`) {
		t.Errorf("Open warnings %q, want one about the label missing", opened.Warnings)
	}
	pr, _, err := g.Client(t).GetPullRequest(testenv.GiteaAdmin, repo, opened.Number)
	if err != nil || len(pr.Labels) != 1 || pr.Labels[0].Name != "mirror" {
		t.Errorf("labels on the server: %+v, %v; want [mirror]", pr, err)
	}

	found, err := h.Find(ctx, giteaHead, "main")
	if err != nil || found == nil || found.Number != opened.Number {
		t.Fatalf("Find after Open = %+v, %v; want #%d", found, err, opened.Number)
	}
	updated, err := h.Update(ctx, opened.Number, "more changes", "new body")
	if err != nil {
		t.Fatal(err)
	}
	if updated.Title != "WIP: more changes" || updated.Body != "new body" || !updated.Draft {
		t.Errorf("Update = %+v, want the draft titled \"WIP: more changes\"", updated)
	}
	got, err := h.Get(ctx, opened.Number)
	if err != nil || got.Title != updated.Title || got.Body != "new body" || got.State != StateOpen {
		t.Errorf("Get = %+v, %v; want the updated request", got, err)
	}
	if err := h.Close(ctx, opened.Number); err != nil {
		t.Fatal(err)
	}
	if got, err = h.Get(ctx, opened.Number); err != nil || got.State != StateClosed {
		t.Errorf("Get after Close = %+v, %v; want closed", got, err)
	}
	if got, err := h.Find(ctx, giteaHead, "main"); got != nil || err != nil {
		t.Errorf("Find after Close = %+v, %v; want nil, nil", got, err)
	}
	for _, c := range log.list() {
		if !strings.HasPrefix(c, "gitea ") || !strings.HasSuffix(c, " 200") && !strings.HasSuffix(c, " 201") {
			t.Errorf("call %q: want a gitea call answered 200 or 201", c)
		}
	}
}

// giteaMerged: a request merged on the server is reported merged by Get, and by Update, which
// leaves it unchanged.
func giteaMerged(t *testing.T, g *testenv.Gitea, repo string) {
	ctx := context.Background()
	pushHead(t, g, repo)
	h := giteaHostOf(t, g, repo, nil)
	opened, err := h.Open(ctx, NewRequest{Head: giteaHead, Base: "main", Title: "changes", Body: "body"})
	if err != nil {
		t.Fatal(err)
	}
	g.MergePull(t, testenv.GiteaAdmin, repo, opened.Number, "merge")
	if got, err := h.Get(ctx, opened.Number); err != nil || got.State != StateMerged {
		t.Errorf("Get of the merged request = %+v, %v; want merged", got, err)
	}
	got, err := h.Update(ctx, opened.Number, "new title", "new body")
	if err != nil || got.State != StateMerged || got.Title != "changes" {
		t.Errorf("Update of the merged request = %+v, %v; want it merged and unchanged", got, err)
	}
}

// giteaOpenTwice: the second Open for the same head is answered 409 by Gitea and returns the
// first request; the server holds one.
func giteaOpenTwice(t *testing.T, g *testenv.Gitea, repo string) {
	ctx := context.Background()
	pushHead(t, g, repo)
	log := &callLog{}
	h := giteaHostOf(t, g, repo, log)
	nr := NewRequest{Head: giteaHead, Base: "main", Title: "changes"}
	first, err := h.Open(ctx, nr)
	if err != nil {
		t.Fatal(err)
	}
	second, err := h.Open(ctx, nr)
	if err != nil {
		t.Fatal(err)
	}
	if second.Number != first.Number {
		t.Errorf("second Open = #%d, want #%d", second.Number, first.Number)
	}
	if open := g.Pulls(t, testenv.GiteaAdmin, repo, "open"); len(open) != 1 {
		t.Errorf("open pull requests on the server: %d, want 1", len(open))
	}
	if calls := log.list(); !slices.Contains(calls, "gitea open 409") {
		t.Errorf("calls %v: want the second open answered 409", calls)
	}
}

// giteaWrongToken: a token the server does not know gives Unauthorized, with the hint to fix the
// Secret.
func giteaWrongToken(t *testing.T, g *testenv.Gitea, repo string) {
	h := mustNew(t, Settings{Kind: KindGitea, Repository: g.URL() + "/" + testenv.GiteaAdmin + "/" + repo, Token: "not-a-token"}, nil)
	_, err := h.Find(context.Background(), giteaHead, "main")
	e := mustAPIError(t, err)
	checkError(t, e, KindGitea, OpFind, 401, wantError{ReasonUnauthorized, false, 0, "GitRepoConfig's Secret"})
}

// giteaWrongRepository: a repository that does not exist gives RepositoryNotFound.
func giteaWrongRepository(t *testing.T, g *testenv.Gitea, _ string) {
	h := giteaHostOf(t, g, "does-not-exist", nil)
	_, err := h.Open(context.Background(), NewRequest{Head: giteaHead, Base: "main", Title: "t"})
	checkError(t, mustAPIError(t, err), KindGitea, OpOpen, 404, wantError{ReasonRepositoryNotFound, false, 0, "check the repository URL"})
}

// giteaReader: a user who may only read the repository cannot edit the daemon's request:
// Forbidden, with the hint naming the permission Gitea needs.
func giteaReader(t *testing.T, g *testenv.Gitea, repo string) {
	ctx := context.Background()
	pushHead(t, g, repo)
	opened, err := giteaHostOf(t, g, repo, nil).Open(ctx, NewRequest{Head: giteaHead, Base: "main", Title: "changes"})
	if err != nil {
		t.Fatal(err)
	}
	token := g.CreateUser(t, "reader")
	g.AddCollaborator(t, testenv.GiteaAdmin, repo, "reader", "read")
	h := mustNew(t, Settings{Kind: KindGitea, Repository: g.URL() + "/" + testenv.GiteaAdmin + "/" + repo, Token: token}, nil)
	_, err = h.Update(ctx, opened.Number, "taken over", "")
	checkError(t, mustAPIError(t, err), KindGitea, OpUpdate, 403, wantError{ReasonForbidden, false, 0, "write:repository"})
}
