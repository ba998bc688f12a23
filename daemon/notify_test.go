package daemon

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/configbutler/gitops-reverser/crds"
	"github.com/configbutler/gitops-reverser/testenv"
)

// TestAPushedEditsCommitShowsWhatBecameOfItsProposal: the destination's repository is on a real
// Gitea. Alice pushes an edit; the proposal it opens puts a pending status
// gitops-reverser/proposal on her commit, linking to the proposal on the page, and posts to the
// team's Slack channel. Bob, who may review but not change ConfigMaps, approves: the approval is
// refused and the status says failure, with the reason. Carol, who may, approves: success.
func TestAPushedEditsCommitShowsWhatBecameOfItsProposal(t *testing.T) {
	planes.Lend(t)
	const ns = "notify-statuses"
	w := prepareWBWorld(t, ns, crds.WriteBack{Enabled: true})
	w.reviewers("bob", "carol")
	grant(t, w.kube, ns, "carol")
	g := testenv.StartGitea(t)
	url := g.CreateRepo(t, testenv.GiteaAdmin, "fleet")
	ctx := context.Background()
	if _, err := w.kube.CoreV1().Secrets(ns).Update(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "git", Namespace: ns},
		StringData: map[string]string{"username": testenv.GiteaAdmin, "password": g.AdminToken()}}, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	w.patch(crds.GitRepoConfigs, "repo", map[string]any{"spec": map[string]any{"repoUrl": url}})
	slack := newSlackSink(t)
	for name, data := range map[string]map[string]string{
		"statuses": {crds.ChannelTokenKey: g.AdminToken()},
		"slack":    {crds.ChannelAddressKey: slack.URL},
	} {
		if _, err := w.kube.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, StringData: data}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	proposals := []crds.NotifyEventSelector{{Kind: crds.KindProposal}}
	createAs(t, w.dyn, crds.NotifyChannels, &crds.NotifyChannel{ObjectMeta: metav1.ObjectMeta{Name: "statuses", Namespace: ns},
		Spec: crds.NotifyChannelSpec{Type: crds.ChannelCommitStatus, Provider: crds.ProviderGitea, SecretRef: crds.LocalReference{Name: "statuses"}}})
	createAs(t, w.dyn, crds.NotifyChannels, &crds.NotifyChannel{ObjectMeta: metav1.ObjectMeta{Name: "slack", Namespace: ns},
		Spec: crds.NotifyChannelSpec{Type: crds.ChannelSlack, SecretRef: crds.LocalReference{Name: "slack"}}})
	for _, ch := range []string{"statuses", "slack"} {
		createAs(t, w.dyn, crds.NotifyRules, &crds.NotifyRule{ObjectMeta: metav1.ObjectMeta{Name: ch, Namespace: ns},
			Spec: crds.NotifyRuleSpec{ChannelRef: crds.LocalReference{Name: ch}, Events: proposals}})
	}
	w.d = startDaemon(t, t.TempDir(), "--git-batch-quiet-ms", "200", "--page-url", "https://gitops.example.com")

	clone := cloneOf(t, g.GitURL(testenv.GiteaAdmin, "fleet", testenv.GiteaAdmin, g.AdminToken()))
	path := w.cmPath("seed")
	testenv.Eventually(t, time.Minute, "seed mirrored to Gitea", func() (bool, string) {
		err := exec.Command("git", "-C", clone, "pull", "--quiet", "origin", "main").Run() // the branch may not exist yet
		_, statErr := os.Stat(filepath.Join(clone, path))
		return err == nil && statErr == nil, fmt.Sprint(err, statErr)
	}, w.d.FailFast())
	testenv.Eventually(t, time.Minute, "write-back baseline", func() (bool, string) {
		if w.destStatus().LastRevision != "" {
			return true, ""
		}
		w.syncNow()
		return false, "no baseline"
	}, w.d.FailFast())

	data, err := os.ReadFile(filepath.Join(clone, path))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(clone, path), []byte(w.replace(string(data), "k: v", "k: edited-by-alice")), 0o644); err != nil {
		t.Fatal(err)
	}
	testenv.MustGit(t, "-C", clone, "-c", "user.name="+alice.Name, "-c", "user.email="+alice.Email, "commit", "--quiet", "-am", "edit by alice")
	testenv.MustGit(t, "-C", clone, "push", "--quiet", "origin", "main")
	sha := testenv.MustGit(t, "-C", clone, "rev-parse", "HEAD")
	w.syncNow()
	p := w.waitProposal(path, "alice's proposal pending", func(p *crds.Proposal) bool { return p.Spec.SourceCommit == sha && p.Status.Phase == crds.PhasePending })

	link := "https://gitops.example.com/proposals/" + ns + "/" + p.Name
	status := func(want, says string) {
		t.Helper()
		testenv.Eventually(t, time.Minute, "status "+want+" on alice's commit", func() (bool, string) {
			got, _, err := g.Client(t).GetCombinedStatus(testenv.GiteaAdmin, "fleet", sha) // the latest of each context
			if err != nil {
				return false, err.Error()
			}
			for _, s := range got.Statuses {
				if s.Context == crds.CommitStatusContext {
					return string(s.State) == want && strings.Contains(s.Description, says) && s.TargetURL == link,
						fmt.Sprintf("%s %q → %s", s.State, s.Description, s.TargetURL)
				}
			}
			return false, fmt.Sprintf("%d statuses, none of %s", len(got.Statuses), crds.CommitStatusContext)
		}, w.d.FailFast())
	}
	status("pending", "Opened: update ConfigMap "+ns+"/seed")
	slack.waitFor(t, "Opened", sha[:12])

	w.decide("bob", p, crds.DecisionApprove)
	status("failure", "bob approved it but may not patch ConfigMap "+ns+"/seed")
	w.decide("carol", p, crds.DecisionApprove)
	status("success", "Applied")
	slack.waitFor(t, "Applied")
}

// cloneOf clones url into a temporary folder, as a person's working copy.
func cloneOf(t *testing.T, url string) string {
	t.Helper()
	dir := t.TempDir()
	testenv.MustGit(t, "-C", dir, "clone", "--quiet", url, ".")
	return dir
}

// slackSink is a loopback Slack incoming webhook: it keeps the text of each message whose body
// has Slack's shape (text, and blocks of known types).
type slackSink struct {
	*httptest.Server
	mu    sync.Mutex
	texts []string
}

func newSlackSink(t *testing.T) *slackSink {
	s := &slackSink{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var msg struct {
			Text   string           `json:"text"`
			Blocks []map[string]any `json:"blocks"`
		}
		if json.Unmarshal(body, &msg) != nil || msg.Text == "" || len(msg.Blocks) == 0 {
			http.Error(w, "invalid_payload", http.StatusBadRequest)
			return
		}
		s.mu.Lock()
		s.texts = append(s.texts, string(body))
		s.mu.Unlock()
		_, _ = io.WriteString(w, "ok")
	}))
	t.Cleanup(s.Close)
	return s
}

// waitFor waits for a message holding every one of words.
func (s *slackSink) waitFor(t *testing.T, words ...string) {
	t.Helper()
	testenv.Eventually(t, time.Minute, "a Slack message with "+strings.Join(words, ", "), func() (bool, string) {
		s.mu.Lock()
		defer s.mu.Unlock()
		for _, text := range s.texts {
			all := true
			for _, w := range words {
				all = all && strings.Contains(text, w)
			}
			if all {
				return true, ""
			}
		}
		return false, fmt.Sprintf("%d messages", len(s.texts))
	})
}
