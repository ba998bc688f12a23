package testenv

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"code.gitea.io/sdk/gitea"
)

// TestGiteaRefusesPushesToAProtectedBranch shows the Gitea of StartGitea is a real Git host: its
// pre-receive hook refuses a collaborator's push to a protected branch, the same commit goes in on
// another branch, and merging a pull request of that branch brings it to the protected one.
func TestGiteaRefusesPushesToAProtectedBranch(t *testing.T) {
	g := StartGitea(t)
	g.CreateRepo(t, GiteaAdmin, "site")
	g.ProtectBranch(t, GiteaAdmin, "site", "main")
	token := g.CreateUser(t, "dev")
	g.AddCollaborator(t, GiteaAdmin, "site", "dev", "write")
	dir := t.TempDir()
	git := giteaGitIn(t, dir)
	git("clone", g.GitURL(GiteaAdmin, "site", "dev", token), ".")
	if err := os.WriteFile(filepath.Join(dir, "change.txt"), []byte("a change\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	git("add", "change.txt")
	git("-c", "user.name=Tester", "-c", "user.email=tester@example.com", "commit", "-m", "a change")
	commit := strings.TrimSpace(git("rev-parse", "HEAD"))

	out, err := giteaGitCmd(dir, "push", "origin", "HEAD:main").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "protected branch") {
		t.Fatalf("push to the protected main: want it refused as a protected branch, got %v:\n%s", err, out)
	}
	git("push", "origin", "HEAD:refs/heads/change")
	if !g.BranchExists(t, GiteaAdmin, "site", "change") || g.BranchExists(t, GiteaAdmin, "site", "other") {
		t.Fatal("the server has not the branch pushed, or has one never pushed")
	}

	pr, _, err := g.Client(t).CreatePullRequest(GiteaAdmin, "site", gitea.CreatePullRequestOption{
		Head: "change", Base: "main", Title: "a change",
	})
	if err != nil {
		t.Fatal(err)
	}
	g.MergePull(t, GiteaAdmin, "site", pr.Index, "merge")
	git("fetch", "origin", "main")
	if _, err := giteaGitCmd(dir, "merge-base", "--is-ancestor", commit, "origin/main").CombinedOutput(); err != nil {
		t.Errorf("main after the merge does not contain %s: %v", commit, err)
	}
	if closed := g.Pulls(t, GiteaAdmin, "site", "closed"); len(closed) != 1 || !closed[0].HasMerged {
		t.Errorf("closed pull requests after the merge: %d, want the merged one", len(closed))
	}
}

// giteaGitIn returns a function that runs git in dir and returns its output, failing t on an error.
func giteaGitIn(t *testing.T, dir string) func(args ...string) string {
	return func(args ...string) string {
		t.Helper()
		out, err := giteaGitCmd(dir, args...).CombinedOutput()
		if err != nil {
			t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
}

// giteaGitCmd is git args in dir, with no user or system configuration and no prompts.
func giteaGitCmd(dir string, args ...string) *exec.Cmd {
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL="+os.DevNull,
		"GIT_TERMINAL_PROMPT=0", "LC_ALL=C")
	return cmd
}
