package crds_test

import (
	"fmt"
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

// pushing is a destination on main that delivers by mode.
func pushing(mode string, pr *crds.PullRequestPush) *crds.GitDestination {
	d := destination("main", "clusters/prod")
	d.Spec.Push = &crds.Push{Mode: mode, PullRequest: pr}
	return d
}

func watchRule(rules []crds.ResourceRule) *crds.WatchRule {
	return &crds.WatchRule{
		ObjectMeta: metav1.ObjectMeta{Name: "rule", Namespace: validationNS},
		Spec:       crds.WatchRuleSpec{DestinationRef: crds.NamespacedReference{Name: "dest"}, Rules: rules},
	}
}

// ruleSelecting is a WatchRule whose rule selects objects by sel.
func ruleSelecting(sel *metav1.LabelSelector) *crds.WatchRule {
	return watchRule([]crds.ResourceRule{{Resources: []string{"configmaps"}, ObjectSelector: sel}})
}

// ruleActingAs is a WatchRule that acts as the ServiceAccount sa.
func ruleActingAs(sa string) *crds.WatchRule {
	r := watchRule([]crds.ResourceRule{{Resources: []string{"configmaps"}}})
	r.Spec.ServiceAccountName = sa
	return r
}

func clusterWatchRule(ref crds.NamespacedReference, rules []crds.ClusterResourceRule) *crds.ClusterWatchRule {
	return &crds.ClusterWatchRule{
		ObjectMeta: metav1.ObjectMeta{Name: "cluster-rule"},
		Spec:       crds.ClusterWatchRuleSpec{DestinationRef: ref, Rules: rules},
	}
}

var destRef = crds.NamespacedReference{Name: "dest", Namespace: validationNS}

// destinationAdmitting is a destination whose accessPolicy admits the namespaces matching req.
func destinationAdmitting(req metav1.LabelSelectorRequirement) *crds.GitDestination {
	d := destination("main", "clusters/prod")
	d.Spec.AccessPolicy = &crds.AccessPolicy{Namespaces: []string{"team-a"},
		NamespaceSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{req}}}
	return d
}

// adoptedDestination is a valid destination with layout and existing set.
func adoptedDestination(layout string, existing *crds.ExistingLayout) *crds.GitDestination {
	d := destination("main", "apps")
	d.Spec.Layout, d.Spec.Existing = layout, existing
	return d
}

func destinationWithWriteBack(wb crds.WriteBack) *crds.GitDestination {
	d := destination("main", "clusters/prod")
	d.Spec.WriteBack = &wb
	return d
}

func destinationWithEncryption(age crds.AgeRecipients) *crds.GitDestination {
	d := destination("main", "clusters/prod")
	d.Spec.Encryption = &crds.Encryption{Provider: crds.EncryptionSOPS, Age: &age}
	return d
}

// proposalWith is a valid update Proposal in validationNS, changed by edit.
func proposalWith(edit func(*crds.ProposalSpec)) *crds.Proposal {
	p := fullProposal(validationNS, "proposal")
	p.Spec.Decision = crds.DecisionNone
	edit(&p.Spec)
	return p
}

// syncRunWith is a SyncRun in validationNS with every status field set, changed by edit.
func syncRunWith(edit func(*crds.SyncRun)) *crds.SyncRun {
	r := &crds.SyncRun{
		ObjectMeta: metav1.ObjectMeta{Name: "run", Namespace: validationNS},
		Spec:       crds.SyncRunSpec{DestinationRef: crds.LocalReference{Name: "dest"}, Trigger: crds.TriggerInterval},
		Status:     syncRunStatus(1).(crds.SyncRunStatus),
	}
	edit(r)
	return r
}

// names returns n distinct names with the given prefix.
func names(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s-%d", prefix, i)
	}
	return out
}

func refusedFiles(n int) []crds.RefusedFile {
	out := make([]crds.RefusedFile, n)
	for i := range out {
		out[i] = crds.RefusedFile{Path: fmt.Sprintf("clusters/prod/f%d.yaml", i), Reason: "Unparseable", Message: "not YAML"}
	}
	return out
}

// receiverWith is a valid github Receiver in validationNS, changed by edit.
func receiverWith(edit func(*crds.ReceiverSpec)) *crds.Receiver {
	r := &crds.Receiver{
		ObjectMeta: metav1.ObjectMeta{Name: "receiver", Namespace: validationNS},
		Spec: crds.ReceiverSpec{
			Type:      crds.ReceiverGitHub,
			SecretRef: crds.LocalReference{Name: "receiver-token"},
			Resources: []crds.ReceiverResource{{Kind: crds.KindGitDestination, Name: "dest"}},
		},
	}
	edit(&r.Spec)
	return r
}

// repoWithReceiver is a valid GitRepoConfig in validationNS asking for a generated receiver.
func repoWithReceiver(r crds.GeneratedReceiver) *crds.GitRepoConfig {
	repo := repoWithURL("https://git.example.com/org/repo.git")
	repo.Spec.Receiver = &r
	return repo
}

// repoWithSigning is a valid GitRepoConfig in validationNS whose commits are signed.
func repoWithSigning(cs crds.CommitSigning) *crds.GitRepoConfig {
	repo := repoWithURL("https://git.example.com/org/repo.git")
	repo.Spec.CommitSigning = &cs
	return repo
}

// withoutField is obj as unstructured with the field at path removed: how a YAML manifest leaves
// out a field the Go type always sends.
func withoutField(obj any, path ...string) *unstructured.Unstructured {
	u, err := crds.ToUnstructured(obj)
	if err != nil {
		panic(err)
	}
	unstructured.RemoveNestedField(u.Object, path...)
	return u
}

// withField is obj as unstructured with value set at path: how a YAML manifest sends a zero the
// Go type leaves out.
func withField(obj any, value any, path ...string) *unstructured.Unstructured {
	u, err := crds.ToUnstructured(obj)
	if err != nil {
		panic(err)
	}
	if err := unstructured.SetNestedField(u.Object, value, path...); err != nil {
		panic(err)
	}
	return u
}

// remoteClusterWith is a valid RemoteCluster in validationNS (a Secret name and nothing else),
// changed by edit.
func remoteClusterWith(edit func(*crds.RemoteClusterSpec)) *crds.RemoteCluster {
	c := &crds.RemoteCluster{
		ObjectMeta: metav1.ObjectMeta{Name: "cluster", Namespace: validationNS},
		Spec: crds.RemoteClusterSpec{
			KubeConfig: crds.KubeConfigReference{SecretRef: crds.SecretKeyReference{Name: "prod-kubeconfig"}},
		},
	}
	edit(&c.Spec)
	return c
}

// destinationOf is a valid destination that mirrors the RemoteCluster ref names.
func destinationOf(ref crds.NamespacedReference) *crds.GitDestination {
	d := destination("main", "clusters/prod")
	d.Spec.ClusterRef = &ref
	return d
}

// signingRef is a valid secretRef of spec.commitSigning.
var signingRef = crds.LocalReference{Name: "signing-key"}

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
		// spec.accessPolicy: a selector that does not parse is refused here, never met by the daemon
		{"accessPolicy In without values", destinationAdmitting(metav1.LabelSelectorRequirement{Key: "team", Operator: metav1.LabelSelectorOpIn}),
			[]string{"spec.accessPolicy.namespaceSelector.matchExpressions[0]", "In and NotIn need values"}},
		{"accessPolicy Exists with values", destinationAdmitting(metav1.LabelSelectorRequirement{Key: "team", Operator: metav1.LabelSelectorOpExists, Values: []string{"a"}}),
			[]string{"Exists and DoesNotExist take none"}},
		{"accessPolicy unknown operator", destinationAdmitting(metav1.LabelSelectorRequirement{Key: "team", Operator: "Like", Values: []string{"a"}}),
			[]string{"spec.accessPolicy.namespaceSelector.matchExpressions[0].operator"}},
		{"accessPolicy empty namespace", func() *crds.GitRepoConfig {
			r := repoWithURL("https://h/r.git")
			r.Spec.AccessPolicy = &crds.AccessPolicy{Namespaces: []string{""}}
			return r
		}(), []string{"spec.accessPolicy.namespaces[0]"}},
		// spec.rules[].objectSelector and namespaceSelector
		{"objectSelector In without values", ruleSelecting(&metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: metav1.LabelSelectorOpIn}}}),
			[]string{"spec.rules[0].objectSelector.matchExpressions[0]", "In and NotIn need values"}},
		{"objectSelector key not a label key", ruleSelecting(&metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "not a key!", Operator: metav1.LabelSelectorOpExists}}}),
			[]string{"spec.rules[0].objectSelector.matchExpressions[0].key"}},
		{"objectSelector matchLabels key not a label key", ruleSelecting(&metav1.LabelSelector{MatchLabels: map[string]string{"a/b/c": "x"}}),
			[]string{"spec.rules[0].objectSelector.matchLabels", "a label key"}},
		{"objectSelector value not a label value", ruleSelecting(&metav1.LabelSelector{MatchLabels: map[string]string{"app": "-bad-"}}),
			[]string{"spec.rules[0].objectSelector.matchLabels.app"}},
		{"objectSelector accepted", ruleSelecting(&metav1.LabelSelector{MatchLabels: map[string]string{"example.com/app": "shop"},
			MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "tier", Operator: metav1.LabelSelectorOpDoesNotExist}}}), nil},
		{"namespaceSelector on a Cluster rule", clusterWatchRule(destRef, []crds.ClusterResourceRule{{Scope: crds.ScopeCluster,
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"team": "a"}}}}), []string{"spec.rules[0]", "needs scope Namespaced"}},
		{"namespaceSelector Exists with values", clusterWatchRule(destRef, []crds.ClusterResourceRule{{Scope: crds.ScopeNamespaced,
			NamespaceSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "team", Operator: metav1.LabelSelectorOpExists, Values: []string{"a"}}}}}}),
			[]string{"spec.rules[0].namespaceSelector.matchExpressions[0]", "Exists and DoesNotExist take none"}},
		{"namespaceSelector accepted", clusterWatchRule(destRef, []crds.ClusterResourceRule{{Scope: crds.ScopeNamespaced,
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"team": "a"}}}}), nil},
		{"serviceAccountName not a name", ruleActingAs("team-b/reader"), []string{"spec.serviceAccountName"}},
		{"serviceAccountName accepted", ruleActingAs("mirror-reader"), nil},
		{"accessPolicy accepted", destinationAdmitting(metav1.LabelSelectorRequirement{Key: "team", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"x"}}), nil},
		// spec.push
		{"PullRequest without pullRequest", pushing(crds.PushPullRequest, nil), []string{"spec.push", "pullRequest is required with mode PullRequest"}},
		{"pullRequest with Direct", pushing(crds.PushDirect, &crds.PullRequestPush{Provider: crds.ProviderGitHub}), []string{"spec.push", "pullRequest is required"}},
		{"unknown provider", pushing(crds.PushPullRequest, &crds.PullRequestPush{Provider: "bitbucket"}), []string{"spec.push.pullRequest.provider"}},
		{"head branch is the target", pushing(crds.PushPullRequest, &crds.PullRequestPush{Provider: crds.ProviderGitea, HeadBranch: "main"}),
			[]string{"must not be branch itself"}},
		{"head branch with a space", pushing(crds.PushPullRequest, &crds.PullRequestPush{Provider: crds.ProviderGitea, HeadBranch: "a b"}),
			[]string{"spec.push.pullRequest.headBranch", "valid Git branch name"}},
		{"head branch with ..", pushing(crds.PushPullRequest, &crds.PullRequestPush{Provider: crds.ProviderGitea, HeadBranch: "a..b"}),
			[]string{"valid Git branch name"}},
		{"head branch ending in .lock", pushing(crds.PushPullRequest, &crds.PullRequestPush{Provider: crds.ProviderGitea, HeadBranch: "a.lock"}),
			[]string{"valid Git branch name"}},
		{"head branch with a backslash", pushing(crds.PushPullRequest, &crds.PullRequestPush{Provider: crds.ProviderGitea, HeadBranch: `a\b`}),
			[]string{"valid Git branch name"}},
		{"apiURL not http", pushing(crds.PushPullRequest, &crds.PullRequestPush{Provider: crds.ProviderGitLab, APIURL: "ftp://x"}),
			[]string{"apiURL must be an http(s) URL"}},
		{"pull request accepted", pushing(crds.PushPullRequest, &crds.PullRequestPush{Provider: crds.ProviderGitLab,
			HeadBranch: "gitops-reverser/team-a/prod", Labels: []string{"mirror"}, Draft: true}), nil},
		{"Direct accepted", pushing(crds.PushDirect, nil), nil},
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
		// spec.layout and spec.existing
		{"unknown layout", adoptedDestination("Flat", nil), []string{"spec.layout", "Canonical", "Existing"}},
		{"existing without layout Existing", adoptedDestination("", &crds.ExistingLayout{Prune: true}), []string{"spec.existing applies only to layout Existing"}},
		{"newFiles without {name}", adoptedDestination(crds.LayoutExisting, &crds.ExistingLayout{NewFiles: "{namespace}/all.yaml"}), []string{"must contain {name}"}},
		{"newFiles not YAML", adoptedDestination(crds.LayoutExisting, &crds.ExistingLayout{NewFiles: "{name}.json"}), []string{"must end in .yaml or .yml"}},
		{"newFiles out of the folder", adoptedDestination(crds.LayoutExisting, &crds.ExistingLayout{NewFiles: "../{name}.yaml"}), []string{"inside baseFolder"}},
		{"absolute newFiles", adoptedDestination(crds.LayoutExisting, &crds.ExistingLayout{NewFiles: "/{name}.yaml"}), []string{"inside baseFolder"}},
		{"kustomization out of the folder", adoptedDestination(crds.LayoutExisting, &crds.ExistingLayout{Kustomization: "../production"}), []string{"spec.existing.kustomization must be a relative path inside baseFolder"}},
		{"absolute kustomization", adoptedDestination(crds.LayoutExisting, &crds.ExistingLayout{Kustomization: "/apps/production"}), []string{"spec.existing.kustomization must be a relative path"}},
		{"overlay accepted", adoptedDestination(crds.LayoutExisting, &crds.ExistingLayout{Kustomization: "apps/production"}), nil},
		{"adopted folder accepted", adoptedDestination(crds.LayoutExisting, &crds.ExistingLayout{NewFiles: "{namespace}/{name}-{kind}.yml", Prune: true}), nil},
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
		// spec.rules[].excludeUsers, excludeFieldManagers, keepGenerated
		{"exclusions accepted", watchRule([]crds.ResourceRule{{
			ExcludeUsers:         []string{"system:serviceaccount:flux-system:kustomize-controller", "system:serviceaccount:flux-system:*", "*"},
			ExcludeFieldManagers: []string{"kustomize-controller", "argocd-controller", "helm*"},
			KeepGenerated:        true,
		}}), nil},
		{"64 excluded users accepted", watchRule([]crds.ResourceRule{{ExcludeUsers: names("user", 64)}}), nil},
		{"excluded user with a '*' in the middle", watchRule([]crds.ResourceRule{{ExcludeUsers: []string{"system:*:flux"}}}),
			[]string{"spec.rules[0].excludeUsers[0]"}},
		{"excluded user with two '*'", watchRule([]crds.ResourceRule{{ExcludeUsers: []string{"system:**"}}}),
			[]string{"spec.rules[0].excludeUsers[0]"}},
		{"empty excluded user", watchRule([]crds.ResourceRule{{ExcludeUsers: []string{"alice", ""}}}),
			[]string{"spec.rules[0].excludeUsers[1]"}},
		{"excluded user too long", watchRule([]crds.ResourceRule{{ExcludeUsers: []string{strings.Repeat("a", 254)}}}),
			[]string{"spec.rules[0].excludeUsers[0]"}},
		{"65 excluded users", watchRule([]crds.ResourceRule{{ExcludeUsers: names("user", 65)}}),
			[]string{"spec.rules[0].excludeUsers"}},
		{"excluded field manager with a '*' in the middle", watchRule([]crds.ResourceRule{{ExcludeFieldManagers: []string{"helm", "*-controller"}}}),
			[]string{"spec.rules[0].excludeFieldManagers[1]"}},
		{"empty excluded field manager", watchRule([]crds.ResourceRule{{ExcludeFieldManagers: []string{""}}}),
			[]string{"spec.rules[0].excludeFieldManagers[0]"}},
		{"65 excluded field managers", watchRule([]crds.ResourceRule{{ExcludeFieldManagers: names("manager", 65)}}),
			[]string{"spec.rules[0].excludeFieldManagers"}},
		{"cluster rule exclusions accepted", clusterWatchRule(destRef, []crds.ClusterResourceRule{{Scope: crds.ScopeNamespaced,
			ResourceRule: crds.ResourceRule{ExcludeUsers: []string{"system:serviceaccount:argocd:*"}, ExcludeFieldManagers: []string{"helm*"}, KeepGenerated: true}}}), nil},
		{"cluster rule excluded user with a '*' in the middle", clusterWatchRule(destRef, []crds.ClusterResourceRule{{Scope: crds.ScopeCluster,
			ResourceRule: crds.ResourceRule{ExcludeUsers: []string{"a*b"}}}}), []string{"spec.rules[0].excludeUsers[0]"}},
		{"cluster rule empty excluded field manager", clusterWatchRule(destRef, []crds.ClusterResourceRule{{Scope: crds.ScopeCluster,
			ResourceRule: crds.ResourceRule{ExcludeFieldManagers: []string{""}}}}), []string{"spec.rules[0].excludeFieldManagers[0]"}},
		{"cluster rule with 65 excluded users", clusterWatchRule(destRef, []crds.ClusterResourceRule{{Scope: crds.ScopeCluster,
			ResourceRule: crds.ResourceRule{ExcludeUsers: names("user", 65)}}}), []string{"spec.rules[0].excludeUsers"}},
		// GitDestination spec.writeBack
		{"autoApply without enabled", destinationWithWriteBack(crds.WriteBack{AutoApply: true}),
			[]string{"spec.writeBack", "autoApply has no effect unless enabled is true"}},
		{"autoApply without enabled, suspended", destinationWithWriteBack(crds.WriteBack{AutoApply: true, Suspend: true}),
			[]string{"spec.writeBack", "autoApply has no effect unless enabled is true"}},
		{"autoApply with enabled accepted", destinationWithWriteBack(crds.WriteBack{Enabled: true, AutoApply: true}), nil},
		{"write-back enabled and suspended accepted", destinationWithWriteBack(crds.WriteBack{Enabled: true, Suspend: true}), nil},
		{"empty writeBack accepted", destinationWithWriteBack(crds.WriteBack{}), nil},
		// GitDestination spec.encryption
		{"recipient that is not age", destinationWithEncryption(crds.AgeRecipients{Recipients: []string{"ssh-ed25519 AAAAC3Nza"}}),
			[]string{"spec.encryption.age.recipients[0]", "must be an age X25519 recipient"}},
		{"recipient too short", destinationWithEncryption(crds.AgeRecipients{Recipients: []string{"age1short"}}),
			[]string{"spec.encryption.age.recipients[0]", "must be an age X25519 recipient"}},
		{"upper-case recipient", destinationWithEncryption(crds.AgeRecipients{Recipients: []string{strings.ToUpper(testRecipient)}}),
			[]string{"spec.encryption.age.recipients[0]"}},
		{"no recipients at all", destinationWithEncryption(crds.AgeRecipients{}),
			[]string{"spec.encryption", "give age.recipients, age.recipientsSecretRef, or both"}},
		{"recipients accepted", destinationWithEncryption(crds.AgeRecipients{Recipients: []string{testRecipient}}), nil},
		{"recipients Secret accepted", destinationWithEncryption(crds.AgeRecipients{RecipientsSecretRef: &crds.LocalReference{Name: "keys"}}), nil},
		// Proposal
		{"proposal accepted", proposalWith(func(*crds.ProposalSpec) {}), nil},
		{"approved proposal accepted", proposalWith(func(s *crds.ProposalSpec) { s.Decision = crds.DecisionApprove }), nil},
		{"create proposal without live state accepted", proposalWith(func(s *crds.ProposalSpec) {
			s.Change, s.LiveResourceVersion, s.LiveDigest = crds.ChangeCreate, "", ""
		}), nil},
		{"destroy proposal without desired accepted", proposalWith(func(s *crds.ProposalSpec) {
			s.Change, s.Desired = crds.ChangeDestroy, ""
		}), nil},
		{"cluster-scoped target accepted", proposalWith(func(s *crds.ProposalSpec) {
			s.Target = crds.ProposalTarget{APIVersion: "v1", Kind: "Namespace", Resource: "namespaces", Name: "team-a"}
		}), nil},
		{"desired of exactly 1 MiB accepted", proposalWith(func(s *crds.ProposalSpec) { s.Desired = strings.Repeat("a", 1<<20) }), nil},
		{"decision outside the enum", proposalWith(func(s *crds.ProposalSpec) { s.Decision = "Maybe" }), []string{"spec.decision"}},
		{"lower-case decision", proposalWith(func(s *crds.ProposalSpec) { s.Decision = "approve" }), []string{"spec.decision"}},
		{"unknown change", proposalWith(func(s *crds.ProposalSpec) { s.Change = "delete" }), []string{"spec.change"}},
		{"short sourceCommit", proposalWith(func(s *crds.ProposalSpec) { s.SourceCommit = "ab12cd3" }), []string{"spec.sourceCommit"}},
		{"upper-case sourceCommit", proposalWith(func(s *crds.ProposalSpec) { s.SourceCommit = strings.ToUpper(sourceCommit) }), []string{"spec.sourceCommit"}},
		{"empty sourceCommit", proposalWith(func(s *crds.ProposalSpec) { s.SourceCommit = "" }), []string{"spec.sourceCommit"}},
		{"liveDigest not sha256 hex", proposalWith(func(s *crds.ProposalSpec) { s.LiveDigest = "sha256:" + liveDigest }), []string{"spec.liveDigest"}},
		{"desired over 1 MiB", proposalWith(func(s *crds.ProposalSpec) { s.Desired = strings.Repeat("a", 1<<20+1) }), []string{"spec.desired"}},
		{"diff over 256 KiB", proposalWith(func(s *crds.ProposalSpec) { s.Diff = strings.Repeat("a", 262145) }), []string{"spec.diff"}},
		{"path over 4096", proposalWith(func(s *crds.ProposalSpec) { s.Path = strings.Repeat("a", 4097) }), []string{"spec.path"}},
		{"empty path", proposalWith(func(s *crds.ProposalSpec) { s.Path = "" }), []string{"spec.path"}},
		{"target without name", proposalWith(func(s *crds.ProposalSpec) { s.Target.Name = "" }), []string{"spec.target.name"}},
		{"proposal without destination", proposalWith(func(s *crds.ProposalSpec) { s.DestinationRef.Name = "" }), []string{"spec.destinationRef.name"}},
		// SyncRun
		{"sync run with status accepted", syncRunWith(func(*crds.SyncRun) {}), nil},
		{"50 refused files accepted", syncRunWith(func(r *crds.SyncRun) { r.Status.Refused = refusedFiles(50) }), nil},
		{"51 refused files", syncRunWith(func(r *crds.SyncRun) { r.Status.Refused = refusedFiles(51) }), []string{"status.refused"}},
		{"sync run without trigger", syncRunWith(func(r *crds.SyncRun) { r.Spec.Trigger = "" }), []string{"spec.trigger"}},
		{"unknown sync run phase", syncRunWith(func(r *crds.SyncRun) { r.Status.Phase = "Done" }), []string{"status.phase"}},
		{"negative count", syncRunWith(func(r *crds.SyncRun) { r.Status.DifferenceTotal = -1 }), []string{"status.differenceTotal"}},
		// Receiver
		{"receiver accepted", receiverWith(func(*crds.ReceiverSpec) {}), nil},
		{"every receiver field accepted", receiverWith(func(s *crds.ReceiverSpec) {
			s.Type, s.Events, s.Suspend = crds.ReceiverCDEvents, []string{"dev.cdevents.change.merged"}, true
			s.Resources = append(s.Resources, crds.ReceiverResource{Kind: crds.KindGitRepoConfig, Name: "repo", Namespace: "other"})
		}), nil},
		{"unknown receiver type", receiverWith(func(s *crds.ReceiverSpec) { s.Type = "gogs" }), []string{"spec.type"}},
		{"receiver type in upper case", receiverWith(func(s *crds.ReceiverSpec) { s.Type = "GitHub" }), []string{"spec.type"}},
		{"receiver without type", receiverWith(func(s *crds.ReceiverSpec) { s.Type = "" }), []string{"spec.type"}},
		{"receiver without resources", receiverWith(func(s *crds.ReceiverSpec) { s.Resources = []crds.ReceiverResource{} }), []string{"spec.resources"}},
		{"receiver resources missing", receiverWith(func(s *crds.ReceiverSpec) { s.Resources = nil }), []string{"spec.resources"}},
		{"receiver resource of another kind", receiverWith(func(s *crds.ReceiverSpec) { s.Resources[0].Kind = "WatchRule" }), []string{"spec.resources[0].kind"}},
		{"receiver resource without name", receiverWith(func(s *crds.ReceiverSpec) { s.Resources[0].Name = "" }), []string{"spec.resources[0].name"}},
		{"receiver without secret", receiverWith(func(s *crds.ReceiverSpec) { s.SecretRef.Name = "" }), []string{"spec.secretRef.name"}},
		{"receiver with an empty event", receiverWith(func(s *crds.ReceiverSpec) { s.Events = []string{""} }), []string{"spec.events[0]"}},
		{"receiver with a duplicate event", receiverWith(func(s *crds.ReceiverSpec) { s.Events = []string{"push", "push"} }), []string{"spec.events[1]"}},
		// GitRepoConfig spec.receiver
		{"generated receiver accepted", repoWithReceiver(crds.GeneratedReceiver{Type: crds.ReceiverGitLab}), nil},
		{"generated receiver with events accepted", repoWithReceiver(crds.GeneratedReceiver{Type: crds.ReceiverGitea, Events: []string{"push"}}), nil},
		{"generated receiver of unknown type", repoWithReceiver(crds.GeneratedReceiver{Type: "svn"}), []string{"spec.receiver.type"}},
		{"generated receiver without type", repoWithReceiver(crds.GeneratedReceiver{}), []string{"spec.receiver.type"}},
		// GitRepoConfig spec.commitSigning
		{"ssh signing accepted", repoWithSigning(crds.CommitSigning{Format: crds.SigningSSH, SecretRef: signingRef}), nil},
		{"openpgp signing accepted", repoWithSigning(crds.CommitSigning{Format: crds.SigningOpenPGP, SecretRef: signingRef}), nil},
		{"unknown signing format", repoWithSigning(crds.CommitSigning{Format: "x509", SecretRef: signingRef}), []string{"spec.commitSigning.format"}},
		{"signing format in upper case", repoWithSigning(crds.CommitSigning{Format: "SSH", SecretRef: signingRef}), []string{"spec.commitSigning.format"}},
		{"signing without format", repoWithSigning(crds.CommitSigning{SecretRef: signingRef}), []string{"spec.commitSigning.format"}},
		{"signing with an empty secret name", repoWithSigning(crds.CommitSigning{Format: crds.SigningSSH}), []string{"spec.commitSigning.secretRef.name"}},
		{"signing without secretRef", withoutField(repoWithSigning(crds.CommitSigning{Format: crds.SigningSSH, SecretRef: signingRef}),
			"spec", "commitSigning", "secretRef"), []string{"spec.commitSigning.secretRef"}},
		{"signing secret name too long", repoWithSigning(crds.CommitSigning{Format: crds.SigningOpenPGP,
			SecretRef: crds.LocalReference{Name: strings.Repeat("a", 254)}}), []string{"spec.commitSigning.secretRef.name"}},
		// RemoteCluster
		{"remote cluster accepted", remoteClusterWith(func(*crds.RemoteClusterSpec) {}), nil},
		{"every remote cluster field accepted", remoteClusterWith(func(s *crds.RemoteClusterSpec) {
			s.KubeConfig.SecretRef.Key, s.Namespaces, s.ClusterScoped = crds.KubeConfigKeyYAML, []string{"team-a", "team-b"}, true
			s.QPS, s.Burst = 10000, 20000
			s.AccessPolicy = &crds.AccessPolicy{Namespaces: []string{"team-a"}}
		}), nil},
		{"every namespace accepted", remoteClusterWith(func(s *crds.RemoteClusterSpec) { s.Namespaces = []string{crds.AllNamespaces} }), nil},
		{"remote cluster with an empty secret name", remoteClusterWith(func(s *crds.RemoteClusterSpec) { s.KubeConfig.SecretRef.Name = "" }),
			[]string{"spec.kubeConfig.secretRef.name"}},
		{"remote cluster without secret name", withoutField(remoteClusterWith(func(*crds.RemoteClusterSpec) {}), "spec", "kubeConfig", "secretRef", "name"),
			[]string{"spec.kubeConfig.secretRef.name", "Required value"}},
		{"remote cluster without secretRef", withoutField(remoteClusterWith(func(*crds.RemoteClusterSpec) {}), "spec", "kubeConfig", "secretRef"),
			[]string{"spec.kubeConfig.secretRef", "Required value"}},
		{"remote cluster without kubeConfig", withoutField(remoteClusterWith(func(*crds.RemoteClusterSpec) {}), "spec", "kubeConfig"),
			[]string{"spec.kubeConfig", "Required value"}},
		{"kubeconfig key with a slash", remoteClusterWith(func(s *crds.RemoteClusterSpec) { s.KubeConfig.SecretRef.Key = "kube/config" }),
			[]string{"spec.kubeConfig.secretRef.key"}},
		{"remote namespace not a namespace name", remoteClusterWith(func(s *crds.RemoteClusterSpec) { s.Namespaces = []string{"team-a", "Team_A"} }),
			[]string{"spec.namespaces[1]"}},
		{"empty remote namespace", remoteClusterWith(func(s *crds.RemoteClusterSpec) { s.Namespaces = []string{""} }), []string{"spec.namespaces[0]"}},
		{"remote namespace with a '*' in it", remoteClusterWith(func(s *crds.RemoteClusterSpec) { s.Namespaces = []string{"team-*"} }),
			[]string{"spec.namespaces[0]"}},
		{"remote namespace twice", remoteClusterWith(func(s *crds.RemoteClusterSpec) { s.Namespaces = []string{"team-a", "team-a"} }),
			[]string{"spec.namespaces[1]"}},
		{"qps 0", withField(remoteClusterWith(func(*crds.RemoteClusterSpec) {}), int64(0), "spec", "qps"), []string{"spec.qps"}},
		{"negative qps", remoteClusterWith(func(s *crds.RemoteClusterSpec) { s.QPS = -1 }), []string{"spec.qps"}},
		{"qps over 10000", remoteClusterWith(func(s *crds.RemoteClusterSpec) { s.QPS = 10001 }), []string{"spec.qps"}},
		{"burst 0", withField(remoteClusterWith(func(*crds.RemoteClusterSpec) {}), int64(0), "spec", "burst"), []string{"spec.burst"}},
		{"remote cluster accessPolicy In without values", remoteClusterWith(func(s *crds.RemoteClusterSpec) {
			s.AccessPolicy = &crds.AccessPolicy{NamespaceSelector: &metav1.LabelSelector{
				MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "team", Operator: metav1.LabelSelectorOpIn}}}}
		}), []string{"spec.accessPolicy.namespaceSelector.matchExpressions[0]", "In and NotIn need values"}},
		// GitDestination spec.clusterRef
		{"clusterRef accepted", destinationOf(crds.NamespacedReference{Name: "prod-cluster", Namespace: "fleet"}), nil},
		{"clusterRef without namespace accepted", destinationOf(crds.NamespacedReference{Name: "prod-cluster"}), nil},
		{"clusterRef without name", destinationOf(crds.NamespacedReference{}), []string{"spec.clusterRef.name"}},
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
	case crds.KindProposal:
		return crds.Proposals
	case crds.KindSyncRun:
		return crds.SyncRuns
	case crds.KindReceiver:
		return crds.Receivers
	case crds.KindRemoteCluster:
		return crds.RemoteClusters
	case crds.KindNotifyChannel:
		return crds.NotifyChannels
	case crds.KindNotifyRule:
		return crds.NotifyRules
	}
	tb.Fatalf("unknown kind %q", kind)
	return schema.GroupVersionResource{}
}

// TestSkippedStatusValidated writes GitDestination status.skipped through the status
// subresource (dry run): the reasons are the SkipReasons, counts are not negative, and the list
// holds at most 16 items.
func TestSkippedStatusValidated(t *testing.T) {
	dyn := mustInstall(t)
	const ns = "skipped-status"
	mustNamespace(t, ns)
	ctx := testContext(t)
	d := destination("main", "clusters/prod")
	d.Namespace = ns
	u, err := crds.ToUnstructured(d)
	if err != nil {
		t.Fatal(err)
	}
	client := dyn.Resource(crds.GitDestinations).Namespace(ns)
	created, err := client.Create(ctx, u, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Delete(testContext(t), created.GetName(), metav1.DeleteOptions{}) })

	every := make([]crds.SkipCount, 0, len(crds.SkipReasons))
	for i, r := range crds.SkipReasons {
		every = append(every, crds.SkipCount{Reason: r, Count: int64(i)})
	}
	cases := []struct {
		name    string
		skipped []crds.SkipCount
		want    []string
	}{
		{"every reason accepted", every, nil},
		{"16 items accepted", make16(), nil},
		{"unknown reason", []crds.SkipCount{{Reason: "Noise", Count: 1}}, []string{"status.skipped[0].reason"}},
		{"negative count", []crds.SkipCount{{Reason: crds.SkipReasonExcludedUser, Count: -1}}, []string{"status.skipped[0].count"}},
		{"17 items", append(make16(), crds.SkipCount{Reason: crds.SkipReasonKubeRootCA}), []string{"status.skipped"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			obj := created.DeepCopy()
			obj.Object["status"] = mustToMap(t, crds.GitDestinationStatus{Skipped: tc.skipped})
			_, err := client.UpdateStatus(testContext(t), obj, metav1.UpdateOptions{DryRun: []string{metav1.DryRunAll}, FieldValidation: strict})
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("valid status rejected: %v", err)
				}
				return
			}
			if !apierrors.IsInvalid(err) {
				t.Fatalf("got %v, want an Invalid error", err)
			}
			for _, want := range tc.want {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not contain %q", err, want)
				}
			}
		})
	}
}

// make16 is 16 SkipCounts, the most status.skipped holds.
func make16() []crds.SkipCount {
	out := make([]crds.SkipCount, 16)
	for i := range out {
		out[i] = crds.SkipCount{Reason: crds.SkipReasons[i%len(crds.SkipReasons)], Count: int64(i)}
	}
	return out
}

// TestRemoteClusterStatusValidated writes RemoteCluster statuses through the status subresource
// (dry run): attribution is one of the Attribution constants, counts are not negative.
func TestRemoteClusterStatusValidated(t *testing.T) {
	dyn := mustInstall(t)
	const ns = "remote-status"
	mustNamespace(t, ns)
	c := remoteClusterWith(func(*crds.RemoteClusterSpec) {})
	c.Namespace = ns
	u, err := crds.ToUnstructured(c)
	if err != nil {
		t.Fatal(err)
	}
	client := dyn.Resource(crds.RemoteClusters).Namespace(ns)
	created, err := client.Create(testContext(t), u, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Delete(testContext(t), created.GetName(), metav1.DeleteOptions{}) })

	full := func(edit func(*crds.RemoteClusterStatus)) crds.RemoteClusterStatus {
		st := remoteClusterStatus(created.GetGeneration()).(crds.RemoteClusterStatus)
		edit(&st)
		return st
	}
	cases := []struct {
		name   string
		status crds.RemoteClusterStatus
		want   []string
	}{
		{"full status accepted", full(func(*crds.RemoteClusterStatus) {}), nil},
		{"empty status accepted", crds.RemoteClusterStatus{}, nil},
		{"attribution Off accepted", full(func(s *crds.RemoteClusterStatus) { s.Attribution = crds.AttributionOff }), nil},
		{"attribution Registered accepted", full(func(s *crds.RemoteClusterStatus) { s.Attribution = crds.AttributionRegistered }), nil},
		{"attribution Failing accepted", full(func(s *crds.RemoteClusterStatus) { s.Attribution = crds.AttributionFailing }), nil},
		{"unknown attribution", full(func(s *crds.RemoteClusterStatus) { s.Attribution = "On" }), []string{"status.attribution"}},
		{"attribution in lower case", full(func(s *crds.RemoteClusterStatus) { s.Attribution = "working" }), []string{"status.attribution"}},
		{"negative watches", full(func(s *crds.RemoteClusterStatus) { s.Watches = -1 }), []string{"status.watches"}},
		{"negative resources", full(func(s *crds.RemoteClusterStatus) { s.Resources = -1 }), []string{"status.resources"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			obj := created.DeepCopy()
			obj.Object["status"] = mustToMap(t, tc.status)
			_, err := client.UpdateStatus(testContext(t), obj, metav1.UpdateOptions{DryRun: []string{metav1.DryRunAll}, FieldValidation: strict})
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("valid status rejected: %v", err)
				}
				return
			}
			if !apierrors.IsInvalid(err) {
				t.Fatalf("got %v, want an Invalid error", err)
			}
			for _, want := range tc.want {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not contain %q", err, want)
				}
			}
		})
	}
}
