package pullrequest

import (
	"context"
	"encoding/base64"
	"slices"
	"strings"
	"testing"
	"time"

	"code.gitea.io/sdk/gitea"

	"github.com/configbutler/gitops-reverser/gitops"
	"github.com/configbutler/gitops-reverser/testenv"
)

// giteaDelivery drives a Delivery as the Git worker does, against the real Gitea, and counts
// the calls: a head says nothing new, no call; a head that changed, one write; a request
// merged meanwhile, a new one opened; a withdrawn head, its request closed.
func giteaDelivery(t *testing.T, g *testenv.Gitea, repo string) {
	ctx := context.Background()
	pushHead(t, g, repo)
	log := &callLog{}
	d := NewDelivery(giteaHostOf(t, g, repo, log), gitops.RequestSettings{Head: giteaHead, Destination: "team-a/prod", Folder: "clusters/prod",
		Labels: []string{"no-such-label"}})
	head := gitops.Head{Branch: giteaHead, Target: "main", Commit: "c1",
		Commits: []gitops.HeadCommit{{Author: gitops.Signature{Name: "Alice", Email: "alice@example.com"}, When: time.Unix(1_700_000_000, 0), Subject: "update"}},
		Files:   []gitops.HeadFile{{Path: "clusters/prod/team-a/configmaps/web.yaml", Added: true}}}
	writes := func() []string {
		var out []string
		for _, c := range log.list() {
			if op := strings.Fields(c)[1]; op != OpFind && op != OpGet && op != OpLabels {
				out = append(out, c)
			}
		}
		return out
	}
	first, err := d.Deliver(ctx, head)
	if err != nil || first.Event != "opened" || first.State != gitops.RequestOpen || first.Number == 0 || first.URL == "" {
		t.Fatalf("first delivery = %+v, %v", first, err)
	}
	if len(first.Warnings) != 1 || !strings.Contains(first.Warnings[0], "no-such-label") {
		t.Errorf("warnings of the open = %q, want the label the repository lacks", first.Warnings)
	}
	before := len(log.list())
	if again, err := d.Deliver(ctx, head); err != nil || again.Event != "" || again.Number != first.Number {
		t.Fatalf("the same head again = %+v, %v", again, err)
	}
	if calls := log.list()[before:]; len(calls) != 0 {
		t.Errorf("the same head called the host: %v", calls)
	}
	head.Files = append(head.Files, gitops.HeadFile{Path: "clusters/prod/team-a/configmaps/db.yaml", Deleted: true})
	w := len(writes())
	if upd, err := d.Deliver(ctx, head); err != nil || upd.Event != "updated" || upd.Number != first.Number {
		t.Fatalf("a changed head = %+v, %v", upd, err)
	}
	if n := len(writes()) - w; n != 1 {
		t.Errorf("a changed head made %d writes, want 1: %v", n, writes())
	}
	pr, _, err := g.Client(t).GetPullRequest(testenv.GiteaAdmin, repo, first.Number)
	if err != nil || pr == nil || !strings.Contains(pr.Body, "delete") || !strings.Contains(pr.Body, "Alice") {
		t.Errorf("the request's body does not describe the head: %q, %v", pr.Body, err)
	}

	g.MergePull(t, testenv.GiteaAdmin, repo, first.Number, "squash")
	if checked, err := d.Check(ctx, head); err != nil || checked.State != gitops.RequestMerged {
		t.Fatalf("check after the merge = %+v, %v", checked, err)
	}
	// The worker would have rebuilt the head with what is left.
	if _, _, err := g.Client(t).CreateFile(testenv.GiteaAdmin, repo, "clusters/prod/more.yaml", gitea.CreateFileOptions{
		FileOptions: gitea.FileOptions{Message: "mirror another change", BranchName: giteaHead},
		Content:     base64.StdEncoding.EncodeToString([]byte("kind: ConfigMap\n")),
	}); err != nil {
		t.Fatal(err)
	}
	second, err := d.Deliver(ctx, head)
	if err != nil || second.Event != "opened" || second.Number == first.Number {
		t.Fatalf("delivery after the merge = %+v, %v", second, err)
	}
	closed, err := d.Withdraw(ctx, gitops.Head{Branch: giteaHead, Target: "main"})
	if err != nil || closed.Event != "closed" || closed.State != gitops.RequestClosed {
		t.Fatalf("withdraw = %+v, %v", closed, err)
	}
	if open := g.Pulls(t, testenv.GiteaAdmin, repo, "open"); len(open) != 0 {
		t.Errorf("%d requests still open", len(open))
	}
	if all := g.Pulls(t, testenv.GiteaAdmin, repo, "all"); len(all) != 2 || !slices.ContainsFunc(all, func(p *gitea.PullRequest) bool { return p.HasMerged }) {
		t.Errorf("requests = %d, want the merged one and the closed one", len(all))
	}
}
