package watch

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/configbutler/gitops-reverser/crds"
	"github.com/configbutler/gitops-reverser/testenv"
)

func TestStatusExplainsEveryDestinationProblem(t *testing.T) {
	e := newEnv(t)
	e.create(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "wrong", Namespace: e.ns},
		StringData: map[string]string{"username": gitSrv.Username, "password": "not-the-password"}})
	repo := func(name, secret string) {
		e.apply(crds.GitRepoConfigs, &crds.GitRepoConfig{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.ns},
			Spec: crds.GitRepoConfigSpec{RepoURL: gitSrv.RepoURL(e.repo), AllowedBranches: []string{"main"},
				SecretRef: &crds.LocalReference{Name: secret}}})
	}
	dest := func(name, repo, branch, folder string) {
		e.apply(crds.GitDestinations, &crds.GitDestination{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.ns},
			Spec: crds.GitDestinationSpec{RepoRef: crds.NamespacedReference{Name: repo}, Branch: branch, BaseFolder: folder}})
	}
	requesting := func(name, folder string) { // two destinations asking for the same head branch
		e.apply(crds.GitDestinations, &crds.GitDestination{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.ns},
			Spec: crds.GitDestinationSpec{RepoRef: crds.NamespacedReference{Name: "repo"}, Branch: "main", BaseFolder: folder,
				Push: &crds.Push{Mode: crds.PushPullRequest, PullRequest: &crds.PullRequestPush{Provider: crds.ProviderGitea, HeadBranch: "mirror/shared"}}}})
	}
	requesting("head-first", "requests/first")
	requesting("head-second", "requests/second")
	repo("no-secret", "missing")
	repo("bad-password", "wrong")
	dest("wrong-branch", "repo", "release", "elsewhere")
	dest("overlap", "repo", "main", baseFolder+"/nested")
	dest("unknown-repo", "nope", "main", "x")
	e.apply(crds.WatchRules, &crds.WatchRule{ObjectMeta: metav1.ObjectMeta{Name: "to-bad-dest", Namespace: e.ns},
		Spec: crds.WatchRuleSpec{DestinationRef: crds.NamespacedReference{Name: "wrong-branch"},
			Rules: []crds.ResourceRule{{Resources: []string{"configmaps"}}}}})
	e.startManager()

	cases := []struct {
		gvr        schema.GroupVersionResource
		name       string
		wantStatus metav1.ConditionStatus
		wantReason string
	}{
		{crds.GitRepoConfigs, "repo", metav1.ConditionTrue, "Reachable"},
		{crds.GitRepoConfigs, "no-secret", metav1.ConditionFalse, "SecretInvalid"},
		{crds.GitRepoConfigs, "bad-password", metav1.ConditionFalse, "Unreachable"},
		{crds.GitDestinations, "dest", metav1.ConditionTrue, "Ready"},
		{crds.GitDestinations, "wrong-branch", metav1.ConditionFalse, "BranchNotAllowed"},
		{crds.GitDestinations, "overlap", metav1.ConditionFalse, "BaseFolderOverlap"},
		{crds.GitDestinations, "unknown-repo", metav1.ConditionFalse, "RepoNotFound"},
		{crds.GitDestinations, "head-second", metav1.ConditionFalse, ReasonHeadBranchInUse},
		{crds.WatchRules, "to-bad-dest", metav1.ConditionFalse, "DestinationNotReady"},
	}
	for _, tc := range cases {
		t.Run(tc.gvr.Resource+"/"+tc.name, func(t *testing.T) {
			testenv.Eventually(e.t, time.Minute, "Ready condition", func() (bool, string) {
				c := e.readyCondition(tc.gvr, e.ns, tc.name)
				if c == nil {
					return false, "no Ready condition"
				}
				return c.Status == tc.wantStatus && c.Reason == tc.wantReason, fmt.Sprintf("%s %s: %s", c.Status, c.Reason, c.Message)
			})
			if tc.wantStatus == metav1.ConditionTrue {
				return
			}
			testenv.Eventually(e.t, time.Minute, "Warning event", func() (bool, string) {
				events, err := e.kube.CoreV1().Events(e.ns).List(e.ctx, metav1.ListOptions{
					FieldSelector: "involvedObject.name=" + tc.name + ",reason=" + tc.wantReason + ",type=Warning"})
				return err == nil && len(events.Items) > 0, "no event"
			})
		})
	}
}
