package daemon

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"code.gitea.io/sdk/gitea"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/configbutler/gitops-reverser/crds"
	"github.com/configbutler/gitops-reverser/testenv"
)

// giteaWorld is a repository on a real Gitea whose main refuses every push, and a namespace
// whose ConfigMaps a destination delivers into it by pull request.
type giteaWorld struct {
	t    testing.TB
	g    *testenv.Gitea
	ns   string
	head string
	kube kubernetes.Interface
	dyn  dynamic.Interface
	git  string // a bare clone that reads the remote
}

const prRepo = "state"

func newGiteaWorld(t testing.TB, ns string) *giteaWorld {
	t.Helper()
	cp := planes.Of(t)
	ctx := context.Background()
	g := testenv.StartGitea(t)
	url := g.CreateRepo(t, testenv.GiteaAdmin, prRepo)
	g.ProtectBranch(t, testenv.GiteaAdmin, prRepo, "main")
	if _, _, err := g.Client(t).CreateLabel(testenv.GiteaAdmin, prRepo, gitea.CreateLabelOption{Name: "mirror", Color: "#00aabb"}); err != nil {
		t.Fatal(err)
	}
	w := &giteaWorld{t: t, g: g, ns: ns, head: "gitops-reverser/" + ns + "/dest",
		kube: kubernetes.NewForConfigOrDie(cp.AdminConfig()), dyn: dynamic.NewForConfigOrDie(cp.AdminConfig()), git: t.TempDir()}
	if _, err := w.kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "git", Namespace: ns},
		StringData: map[string]string{"username": testenv.GiteaAdmin, "password": g.AdminToken()}}
	if _, err := w.kube.CoreV1().Secrets(ns).Create(ctx, secret, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := crds.Install(ctx, cp.AdminConfig(), discardLogger()); err != nil {
		t.Fatal(err)
	}
	for _, o := range []struct {
		gvr schema.GroupVersionResource
		obj any
	}{
		{crds.GitRepoConfigs, &crds.GitRepoConfig{ObjectMeta: metav1.ObjectMeta{Name: "repo", Namespace: ns},
			Spec: crds.GitRepoConfigSpec{RepoURL: url, AllowedBranches: []string{"main"}, SecretRef: &crds.LocalReference{Name: "git"}}}},
		{crds.GitDestinations, &crds.GitDestination{ObjectMeta: metav1.ObjectMeta{Name: "dest", Namespace: ns},
			Spec: crds.GitDestinationSpec{RepoRef: crds.NamespacedReference{Name: "repo"}, Branch: "main", BaseFolder: "live",
				Push: &crds.Push{Mode: crds.PushPullRequest, PullRequest: &crds.PullRequestPush{Provider: crds.ProviderGitea, Labels: []string{"mirror"}}}}}},
		{crds.WatchRules, &crds.WatchRule{ObjectMeta: metav1.ObjectMeta{Name: "cms", Namespace: ns},
			Spec: crds.WatchRuleSpec{DestinationRef: crds.NamespacedReference{Name: "dest"}, Rules: []crds.ResourceRule{{Resources: []string{"configmaps"}}}}}},
	} {
		createAs(t, w.dyn, o.gvr, o.obj)
	}
	t.Cleanup(func() {
		for _, gvr := range []schema.GroupVersionResource{crds.WatchRules, crds.GitDestinations, crds.GitRepoConfigs} {
			_ = w.dyn.Resource(gvr).Namespace(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})
		}
	})
	w.run("init", "--quiet", "--bare")
	w.run("remote", "add", "origin", g.GitURL(testenv.GiteaAdmin, prRepo, testenv.GiteaAdmin, g.AdminToken()))
	return w
}

// run runs git in the world's bare clone.
func (w *giteaWorld) run(args ...string) string {
	w.t.Helper()
	out, err := exec.Command("git", append([]string{"--git-dir=" + w.git}, args...)...).CombinedOutput()
	if err != nil {
		w.t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

// branch fetches the remote's branches and returns the files and the commits (author: subject,
// newest first) of branch; ok is false when the remote has no such branch.
func (w *giteaWorld) branch(name string) (files, commits []string, ok bool) {
	w.t.Helper()
	w.run("fetch", "--quiet", "--prune", "origin", "+refs/heads/*:refs/remotes/origin/*")
	ref := "refs/remotes/origin/" + name
	if _, err := exec.Command("git", "--git-dir="+w.git, "rev-parse", "--verify", "--quiet", ref).Output(); err != nil {
		return nil, nil, false
	}
	files = strings.Split(w.run("ls-tree", "-r", "--name-only", ref), "\n")
	commits = strings.Split(w.run("log", "--format=%an: %s", ref), "\n")
	return files, commits, true
}

// open is the open pull requests of the repository.
func (w *giteaWorld) open() []*gitea.PullRequest {
	return w.g.Pulls(w.t, testenv.GiteaAdmin, prRepo, "open")
}

// oneOpen waits until exactly one request is open, from the head branch into main, and the
// head branch holds file; it returns the request.
func (w *giteaWorld) oneOpen(d *testenv.Daemon, file string) *gitea.PullRequest {
	w.t.Helper()
	var pr *gitea.PullRequest
	testenv.Eventually(w.t, 2*time.Minute, "one request open with "+file, func() (bool, string) {
		open := w.open()
		files, _, _ := w.branch(w.head)
		if len(open) != 1 || !slices.Contains(files, file) {
			return false, fmt.Sprintf("%d open, head files %v", len(open), files)
		}
		pr = open[0]
		return pr.Head.Ref == w.head && pr.Base.Ref == "main", fmt.Sprintf("request %s → %s", pr.Head.Ref, pr.Base.Ref)
	}, d.FailFast())
	return pr
}

// changeAs creates or updates ConfigMap name as user ("": the admin).
func (w *giteaWorld) changeAs(user, name, value string) {
	w.t.Helper()
	kube := w.kube
	if user != "" {
		kube = userClient(planes.Of(w.t).ImpersonatingConfig(user))
	}
	cms := kube.CoreV1().ConfigMaps(w.ns)
	ctx := context.Background()
	cm, err := cms.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		cm = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: w.ns}, Data: map[string]string{"v": value}}
		_, err = cms.Create(ctx, cm, metav1.CreateOptions{})
	} else {
		cm.Data = map[string]string{"v": value}
		_, err = cms.Update(ctx, cm, metav1.UpdateOptions{})
	}
	if err != nil {
		w.t.Fatalf("%s changes %s: %v", user, name, err)
	}
}

// status is the destination's status.pullRequest.
func (w *giteaWorld) status() *crds.PullRequestStatus {
	u, err := w.dyn.Resource(crds.GitDestinations).Namespace(w.ns).Get(context.Background(), "dest", metav1.GetOptions{})
	if err != nil {
		w.t.Fatal(err)
	}
	d, err := crds.FromUnstructured[crds.GitDestination](u)
	if err != nil {
		w.t.Fatal(err)
	}
	return d.Status.PullRequest
}

// waitEvent waits for an Event with reason on the destination.
func (w *giteaWorld) waitEvent(d *testenv.Daemon, reason string) {
	w.t.Helper()
	testenv.Eventually(w.t, time.Minute, "Event "+reason, func() (bool, string) {
		events, err := w.kube.CoreV1().Events(w.ns).List(context.Background(), metav1.ListOptions{
			FieldSelector: "involvedObject.name=dest,reason=" + reason})
		return err == nil && len(events.Items) > 0, fmt.Sprint(err)
	}, d.FailFast())
}

// metricAtMost is a condition for testenv.Eventually: the daemon's sample name is at most want.
func metricAtMost(t testing.TB, d *testenv.Daemon, name string, want float64) func() (bool, string) {
	return func() (bool, string) {
		v := d.Metric(t, name)
		return v <= want, fmt.Sprintf("%s = %v", name, v)
	}
}

// pushToMain lands a person's commit adding file on main (see landOnMain).
func (w *giteaWorld) pushToMain(file string) { w.landOnMain(map[string]string{file: "by hand\n"}) }

// landOnMain lands a person's commit writing files on main the only way main takes one: a pull
// request of their own, merged.
func (w *giteaWorld) landOnMain(files map[string]string) {
	w.t.Helper()
	work := w.t.TempDir()
	url := w.g.GitURL(testenv.GiteaAdmin, prRepo, testenv.GiteaAdmin, w.g.AdminToken())
	git := func(args ...string) {
		cmd := exec.Command("git", append([]string{"-c", "user.name=Carol", "-c", "user.email=carol@example.com"}, args...)...)
		cmd.Dir = work
		if out, err := cmd.CombinedOutput(); err != nil {
			w.t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	git("clone", "--quiet", url, ".")
	for file, content := range files {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(work, file)), 0o755); err != nil {
			w.t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(work, file), []byte(content), 0o644); err != nil {
			w.t.Fatal(err)
		}
		git("add", file)
	}
	branch := fmt.Sprintf("carol-%d", time.Now().UnixNano())
	git("commit", "--quiet", "-m", "carol's edit")
	git("push", "--quiet", "origin", "HEAD:refs/heads/"+branch)
	pr, _, err := w.g.Client(w.t).CreatePullRequest(testenv.GiteaAdmin, prRepo, gitea.CreatePullRequestOption{Head: branch, Base: "main", Title: "carol's edit"})
	if err != nil {
		w.t.Fatal(err)
	}
	w.g.MergePull(w.t, testenv.GiteaAdmin, prRepo, pr.Index, "merge")
}

// TestProtectedBranchGetsOnePullRequest delivers into a main that refuses every push, on a real
// Gitea: the changes open one pull request from the daemon's head branch, whose commits name the
// people who made them; a push to main rebuilds the head on it; a merge deletes the head and the
// next change opens a new request; a daemon killed and replaced by another opens no second one.
func TestProtectedBranchGetsOnePullRequest(t *testing.T) {
	planes.Lend(t)
	w := newGiteaWorld(t, "pull-requests")
	grant(t, w.kube, w.ns, "alice", "bob")
	workDir := t.TempDir()
	d := startDaemon(t, workDir, "--git-batch-quiet-ms", "200", "--pull-request-poll", "1s")
	testenv.Eventually(t, time.Minute, "daemon watching", metricAtLeast(t, d, "gitops_reverser_watches", 1), d.FailFast())
	waitRegistered(t, d, w.kube, w.ns)

	w.changeAs("alice", "a", "1")
	w.changeAs("bob", "b", "1")
	fileA, fileB := "live/"+w.ns+"/configmaps/a.yaml", "live/"+w.ns+"/configmaps/b.yaml"
	pr := w.oneOpen(d, fileB)
	files, commits, _ := w.branch(w.head)
	if !slices.Contains(files, fileA) {
		t.Fatalf("head files %v lack %s", files, fileA)
	}
	if mainFiles, _, _ := w.branch("main"); slices.Contains(mainFiles, fileA) {
		t.Fatalf("main holds %s: nothing may reach a protected main but a merge", fileA)
	}
	if !slices.ContainsFunc(commits, func(c string) bool { return strings.HasPrefix(c, "alice: ") && strings.Contains(c, "/a") }) ||
		!slices.ContainsFunc(commits, func(c string) bool { return strings.HasPrefix(c, "bob: ") && strings.Contains(c, "/b") }) {
		t.Errorf("head commits %v: want alice's and bob's changes under their names", commits)
	}
	if len(pr.Labels) != 1 || pr.Labels[0].Name != "mirror" {
		t.Errorf("labels %v, want the destination's label mirror", pr.Labels)
	}
	testenv.Eventually(t, time.Minute, "status.pullRequest", func() (bool, string) {
		s := w.status()
		return s != nil && s.Number == pr.Index && s.URL == pr.HTMLURL && s.State == "open" && s.ChangesWaiting >= 2, fmt.Sprintf("%+v", s)
	}, d.FailFast())
	testenv.Eventually(t, time.Minute, "one request counted open, with its age", func() (bool, string) {
		open, opened := d.Metric(t, "gitops_reverser_pull_requests_open"), d.Metric(t, "gitops_reverser_pull_requests_oldest_opened_timestamp_seconds")
		return open == 1 && opened > 0, fmt.Sprintf("open %v, oldest opened %v", open, opened)
	}, d.FailFast())
	w.waitEvent(d, "PullRequestOpened")

	// A commit lands on main: the head branch is rebuilt on it, the same request stays open.
	w.pushToMain("NOTES.md")
	testenv.Eventually(t, time.Minute, "head rebuilt on main", func() (bool, string) {
		files, _, _ := w.branch(w.head)
		open := w.open()
		return slices.Contains(files, "NOTES.md") && slices.Contains(files, fileA) && len(open) == 1 && open[0].Index == pr.Index,
			fmt.Sprintf("head files %v, %d open", files, len(open))
	}, d.FailFast())

	// A person merges the request: the head branch goes, the next change opens a new request.
	w.g.MergePull(t, testenv.GiteaAdmin, prRepo, pr.Index, "squash")
	testenv.Eventually(t, time.Minute, "head deleted after the merge", func() (bool, string) {
		_, _, exists := w.branch(w.head)
		s := w.status()
		return !exists && s != nil && s.State == "merged", fmt.Sprintf("head exists %v, status %+v", exists, s)
	}, d.FailFast())
	w.waitEvent(d, "PullRequestMerged")
	testenv.Eventually(t, time.Minute, "no request counted open", metricAtMost(t, d, "gitops_reverser_pull_requests_open", 0), d.FailFast())
	if mainFiles, _, _ := w.branch("main"); !slices.Contains(mainFiles, fileA) || !slices.Contains(mainFiles, fileB) {
		t.Fatalf("main after the merge holds %v", mainFiles)
	}
	w.changeAs("alice", "a", "2")
	second := w.oneOpen(d, fileA)
	if second.Index == pr.Index {
		t.Fatalf("the next change reused the merged request #%d", pr.Index)
	}

	// Killed at once after a change, and replaced by a daemon with a clone of its own: the
	// change arrives in the same request, and no second request is opened.
	w.changeAs("bob", "b", "2")
	d.Kill(t)
	d2 := startDaemon(t, t.TempDir(), "--git-batch-quiet-ms", "200", "--pull-request-poll", "1s")
	testenv.Eventually(t, 2*time.Minute, "bob's change in the open request", func() (bool, string) {
		_, commits, _ := w.branch(w.head)
		open := w.open()
		return len(open) == 1 && open[0].Index == second.Index && slices.ContainsFunc(commits, func(c string) bool { return strings.Contains(c, "/b") }),
			fmt.Sprintf("%d open, head commits %v", len(open), commits)
	}, d2.FailFast())
	// Ours merged and ours open, and carol's merged: no duplicate. (Gitea may close a request of a
	// head branch made again soon after its deletion, handling the deletion late; the daemon then
	// opens another, and the one Gitea closed is not counted.)
	var kept []int64
	for _, pr := range w.g.Pulls(t, testenv.GiteaAdmin, prRepo, "all") {
		if pr.HasMerged || pr.State == gitea.StateOpen {
			kept = append(kept, pr.Index)
		}
	}
	if len(kept) != 3 {
		t.Errorf("requests merged or open: %v, want 3: no duplicate", kept)
	}
}

// TestPullRequestHostTroubleIsACondition gives the daemon an API token the real Gitea refuses
// (while Git over HTTP still takes the password): the commits wait on the head branch, the
// destination says why and what to do, and a corrected token opens the request.
func TestPullRequestHostTroubleIsACondition(t *testing.T) {
	planes.Lend(t)
	w := newGiteaWorld(t, "pull-request-trouble")
	secret, err := w.kube.CoreV1().Secrets(w.ns).Get(context.Background(), "git", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	secret.StringData = map[string]string{"token": "not-a-token"}
	if secret, err = w.kube.CoreV1().Secrets(w.ns).Update(context.Background(), secret, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	grant(t, w.kube, w.ns, "alice")
	d := startDaemon(t, t.TempDir(), "--git-batch-quiet-ms", "200", "--pull-request-poll", "1s")
	w.changeAs("alice", "a", "1")
	msg := waitReadyReason(t, d, crds.GitDestinations, w.ns, "dest", "PullRequestUnauthorized")
	if !strings.Contains(msg, "token") {
		t.Errorf("Ready says %q: want what to do about the token", msg)
	}
	testenv.Eventually(t, time.Minute, "the commits waiting on the head branch", func() (bool, string) {
		files, _, _ := w.branch(w.head)
		return slices.Contains(files, "live/"+w.ns+"/configmaps/a.yaml"), fmt.Sprintf("head files %v", files)
	}, d.FailFast())
	if n := len(w.open()); n != 0 {
		t.Fatalf("%d requests open with a refused token", n)
	}
	if v := d.Metric(t, `gitops_reverser_pull_request_api_errors_total{code="401",host="gitea"}`); v < 1 {
		t.Errorf("api errors{401} = %v", v)
	}

	secret.StringData = map[string]string{"token": w.g.AdminToken()}
	if _, err := w.kube.CoreV1().Secrets(w.ns).Update(context.Background(), secret, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	w.oneOpen(d, "live/"+w.ns+"/configmaps/a.yaml")
	waitReadyReason(t, d, crds.GitDestinations, w.ns, "dest", "Ready")
}

// TestPeoplesEditsBesideAPullRequestBecomeProposals: with write-back on, a person's edit that lands
// on the protected main becomes a Proposal, except for a file the open request changes: that is
// the mirror's pending change, and the request, rebuilt on the edit, still delivers the cluster's
// version.
func TestPeoplesEditsBesideAPullRequestBecomeProposals(t *testing.T) {
	planes.Lend(t)
	w := newGiteaWorld(t, "pull-request-edits")
	patch := []byte(`{"spec":{"writeBack":{"enabled":true}}}`)
	if _, err := w.dyn.Resource(crds.GitDestinations).Namespace(w.ns).Patch(context.Background(), "dest", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	grant(t, w.kube, w.ns, "alice")
	d := startDaemon(t, t.TempDir(), "--git-batch-quiet-ms", "200", "--pull-request-poll", "1s", "--write-back-interval", "10s")
	w.changeAs("alice", "a", "1")
	w.changeAs("alice", "b", "1")
	fileA, fileB := "live/"+w.ns+"/configmaps/a.yaml", "live/"+w.ns+"/configmaps/b.yaml"
	first := w.oneOpen(d, fileB)
	w.g.MergePull(t, testenv.GiteaAdmin, prRepo, first.Index, "merge")
	testenv.Eventually(t, time.Minute, "head deleted after the merge", func() (bool, string) {
		_, _, exists := w.branch(w.head)
		return !exists, "head still there"
	}, d.FailFast())
	w.changeAs("alice", "a", "2")
	w.oneOpen(d, fileA)

	onMain := func(file string) string { return w.run("show", "refs/remotes/origin/main:"+file) }
	w.landOnMain(map[string]string{
		fileA: strings.Replace(onMain(fileA), `v: "1"`, `v: carol`, 1),
		fileB: strings.Replace(onMain(fileB), `v: "1"`, `v: carol`, 1),
	})
	var paths []string
	testenv.Eventually(t, 2*time.Minute, "a proposal for carol's edit of b", func() (bool, string) {
		list, err := w.dyn.Resource(crds.Proposals).Namespace(w.ns).List(context.Background(), metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		paths = nil
		for _, u := range list.Items {
			p, _, _ := unstructured.NestedString(u.Object, "spec", "path")
			paths = append(paths, p)
		}
		return slices.Contains(paths, fileB), fmt.Sprintf("proposals for %v", paths)
	}, d.FailFast())
	if slices.Contains(paths, fileA) {
		t.Errorf("carol's edit of %s, which the open request changes, was proposed: %v", fileA, paths)
	}
	testenv.Eventually(t, time.Minute, "the request rebuilt on carol's edit, with the cluster's a", func() (bool, string) {
		w.branch(w.head)
		a := w.run("show", "refs/remotes/origin/"+w.head+":"+fileA)
		return strings.Contains(a, `v: "2"`) && strings.Contains(w.run("log", "--format=%s", "-1", "refs/remotes/origin/"+w.head+"~1"), "carol"), a
	}, d.FailFast())
}
