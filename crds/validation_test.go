package crds_test

import (
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/configbutler/gitops-reverser/crds"
)

const validationNS = "validation"

func repoWithURL(url string) *crds.GitRepoConfig {
	return &crds.GitRepoConfig{
		ObjectMeta: metav1.ObjectMeta{Name: "repo", Namespace: validationNS},
		Spec:       crds.GitRepoConfigSpec{RepoURL: url, AllowedBranches: []string{"main"}},
	}
}

func destination(branch, baseFolder string) *crds.GitDestination {
	return &crds.GitDestination{
		ObjectMeta: metav1.ObjectMeta{Name: "dest", Namespace: validationNS},
		Spec: crds.GitDestinationSpec{
			RepoRef: crds.NamespacedReference{Name: "repo"}, Branch: branch, BaseFolder: baseFolder,
		},
	}
}

func watchRule(rules []crds.ResourceRule) *crds.WatchRule {
	return &crds.WatchRule{
		ObjectMeta: metav1.ObjectMeta{Name: "rule", Namespace: validationNS},
		Spec:       crds.WatchRuleSpec{DestinationRef: crds.NamespacedReference{Name: "dest"}, Rules: rules},
	}
}

func clusterWatchRule(ref crds.NamespacedReference, rules []crds.ClusterResourceRule) *crds.ClusterWatchRule {
	return &crds.ClusterWatchRule{
		ObjectMeta: metav1.ObjectMeta{Name: "cluster-rule"},
		Spec:       crds.ClusterWatchRuleSpec{DestinationRef: ref, Rules: rules},
	}
}

var destRef = crds.NamespacedReference{Name: "dest", Namespace: validationNS}

const credentialsMessage = "spec.repoUrl must not embed credentials"

// TestInvalidObjectsRejected sends each object with dry run: the apiserver validates it fully
// and stores nothing. want lists what the error must contain (the field path, and for CEL rules
// the message); no want means the object is valid and must be accepted.
func TestInvalidObjectsRejected(t *testing.T) {
	dyn := mustInstall(t)
	mustNamespace(t, validationNS)
	cases := []struct {
		name string
		obj  any
		want []string
	}{
		// spec.repoUrl
		{"https URL with user and password", repoWithURL("https://user:pass@git.example.com/org/repo.git"), []string{"spec.repoUrl", credentialsMessage}},
		{"https URL with token as user", repoWithURL("https://ghp_token@github.com/org/repo.git"), []string{"spec.repoUrl", credentialsMessage}},
		{"http URL with user, upper-case scheme", repoWithURL("HTTP://user@127.0.0.1:1234/x.git"), []string{"spec.repoUrl", credentialsMessage}},
		{"ssh URL with password", repoWithURL("ssh://git:secret@git.example.com/org/repo.git"), []string{"spec.repoUrl", credentialsMessage}},
		{"other scheme with password", repoWithURL("git+ssh://git:secret@host:22/org/repo.git"), []string{"spec.repoUrl", credentialsMessage}},
		{"scp-like with password", repoWithURL("git:secret@git.example.com:org/repo.git"), []string{"spec.repoUrl", credentialsMessage}},
		{"empty repoUrl", repoWithURL(""), []string{"spec.repoUrl"}},
		{"https URL accepted", repoWithURL("https://git.example.com/org/repo.git"), nil},
		{"http URL with port accepted", repoWithURL("http://127.0.0.1:1234/x.git"), nil},
		{"https URL with @ in the path accepted", repoWithURL("https://git.example.com/org/repo@v1.git"), nil},
		{"ssh URL with user accepted", repoWithURL("ssh://git@git.example.com/org/repo.git"), nil},
		{"ssh URL with user and port accepted", repoWithURL("ssh://git@git.example.com:2222/org/repo.git"), nil},
		{"scp-like accepted", repoWithURL("git@git.example.com:org/repo.git"), nil},
		// spec.allowedBranches
		{"no allowed branches", &crds.GitRepoConfig{
			ObjectMeta: metav1.ObjectMeta{Name: "repo", Namespace: validationNS},
			Spec:       crds.GitRepoConfigSpec{RepoURL: "https://h/r.git", AllowedBranches: []string{}},
		}, []string{"spec.allowedBranches"}},
		{"empty allowed branch", &crds.GitRepoConfig{
			ObjectMeta: metav1.ObjectMeta{Name: "repo", Namespace: validationNS},
			Spec:       crds.GitRepoConfigSpec{RepoURL: "https://h/r.git", AllowedBranches: []string{""}},
		}, []string{"spec.allowedBranches[0]"}},
		// spec.baseFolder
		{"absolute baseFolder", destination("main", "/clusters/prod"), []string{"spec.baseFolder", "spec.baseFolder must be a relative path"}},
		{"dot-dot inside baseFolder", destination("main", "a/../b"), []string{"spec.baseFolder", "'..' segment"}},
		{"dot-dot baseFolder", destination("main", ".."), []string{"spec.baseFolder", "'..' segment"}},
		{"dot-dot first in baseFolder", destination("main", "../x"), []string{"spec.baseFolder", "'..' segment"}},
		{"dot-dot last in baseFolder", destination("main", "x/.."), []string{"spec.baseFolder", "'..' segment"}},
		{"dot segment in baseFolder", destination("main", "./x"), []string{"spec.baseFolder", "'.' segment"}},
		{"backslash in baseFolder", destination("main", `a\b`), []string{"spec.baseFolder", "backslashes"}},
		{"empty segment in baseFolder", destination("main", "a//b"), []string{"spec.baseFolder", "empty segments"}},
		{"trailing slash in baseFolder", destination("main", "a/"), []string{"spec.baseFolder", "empty segments"}},
		{"empty baseFolder", destination("main", ""), []string{"spec.baseFolder"}},
		{"too long baseFolder", destination("main", strings.Repeat("a", 513)), []string{"spec.baseFolder"}},
		{"nested baseFolder accepted", destination("main", "clusters/prod"), nil},
		{"dots inside names accepted", destination("main", ".config/a..b/v1.2"), nil},
		// spec.branch
		{"empty branch", destination("", "clusters/prod"), []string{"spec.branch"}},
		// spec.rules
		{"no rules", watchRule([]crds.ResourceRule{}), []string{"spec.rules"}},
		{"rules missing", watchRule(nil), []string{"spec.rules"}},
		{"unknown operation", watchRule([]crds.ResourceRule{{Operations: []crds.Operation{"PATCH"}}}), []string{"spec.rules[0].operations[0]"}},
		{"rule with only defaults accepted", watchRule([]crds.ResourceRule{{}}), nil},
		{"wildcards accepted", watchRule([]crds.ResourceRule{{
			Operations: []crds.Operation{crds.OperationAll}, APIGroups: []string{"*"}, APIVersions: []string{"*"}, Resources: []string{"*"},
		}}), nil},
		{"cluster rule with bad scope", clusterWatchRule(destRef, []crds.ClusterResourceRule{{Scope: "Global"}}), []string{"spec.rules[0].scope"}},
		{"cluster rule without scope", clusterWatchRule(destRef, []crds.ClusterResourceRule{{}}), []string{"spec.rules[0].scope"}},
		{"cluster rule without rules", clusterWatchRule(destRef, []crds.ClusterResourceRule{}), []string{"spec.rules"}},
		{"cluster rule without destination namespace", clusterWatchRule(crds.NamespacedReference{Name: "dest"},
			[]crds.ClusterResourceRule{{Scope: crds.ScopeCluster}}), []string{"spec.destinationRef.namespace"}},
		{"cluster rule accepted", clusterWatchRule(destRef, []crds.ClusterResourceRule{{Scope: crds.ScopeCluster}}), nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			u, err := crds.ToUnstructured(tc.obj)
			if err != nil {
				t.Fatal(err)
			}
			client := dyn.Resource(gvrOf(t, u.GetKind())).Namespace(u.GetNamespace())
			_, err = client.Create(testContext(t), u, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("valid object rejected: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("invalid object accepted, want an error containing %q", tc.want)
			}
			t.Logf("rejected: %v", err)
			if !apierrors.IsInvalid(err) {
				t.Errorf("got %v, want an Invalid error", err)
			}
			for _, want := range tc.want {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not contain %q", err, want)
				}
			}
			// A rejected URL may hold a secret: the error must not echo it back.
			if url, _, _ := unstructured.NestedString(u.Object, "spec", "repoUrl"); url != "" && strings.Contains(err.Error(), url) {
				t.Errorf("error %q echoes the repoUrl", err)
			}
		})
	}
}

func gvrOf(tb testing.TB, kind string) schema.GroupVersionResource {
	tb.Helper()
	switch kind {
	case crds.KindGitRepoConfig:
		return crds.GitRepoConfigs
	case crds.KindGitDestination:
		return crds.GitDestinations
	case crds.KindWatchRule:
		return crds.WatchRules
	case crds.KindClusterWatchRule:
		return crds.ClusterWatchRules
	}
	tb.Fatalf("unknown kind %q", kind)
	return schema.GroupVersionResource{}
}
