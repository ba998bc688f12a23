package crds_test

import (
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/configbutler/gitops-reverser/crds"
)

// fixture is one object of a kind with the resource it lives in, a status with every field set,
// and a decoder back into its Go type.
type fixture struct {
	kind string
	gvr  schema.GroupVersionResource
	obj  any
	// status returns a status of the kind's Go type with every field set.
	status func(generation int64) any
	// inlineStatus: the kind has no status subresource; its status is written with the object.
	inlineStatus bool
	decode       func(*unstructured.Unstructured) (any, error)
}

func decodeAs[T any](u *unstructured.Unstructured) (any, error) { return crds.FromUnstructured[T](u) }

// fixtureTime is a whole second in UTC: what survives the apiserver's RFC 3339 encoding.
var fixtureTime = metav1.NewTime(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))

// sourceCommit and liveDigest are well-formed values of their patterns.
var (
	sourceCommit = strings.Repeat("ab12", 10)
	liveDigest   = strings.Repeat("0f", 32)
)

// fullStatus sets every field of the shared status.
func fullStatus(generation int64) crds.Status {
	return crds.Status{
		Conditions:         []metav1.Condition{condition(crds.ConditionReady, generation)},
		ObservedGeneration: generation,
	}
}

func sharedStatus(generation int64) any { return fullStatus(generation) }

func condition(typ string, generation int64) metav1.Condition {
	return metav1.Condition{
		Type:               typ,
		Status:             metav1.ConditionTrue,
		ObservedGeneration: generation,
		LastTransitionTime: fixtureTime,
		Reason:             "Reconciled",
		Message:            "all good",
	}
}

// fullFixtures returns a valid object of every kind with every spec field set, so a field the
// schema lacks would be pruned (or, with strict field validation, rejected).
func fullFixtures(namespace string) []fixture {
	meta := func(name string) metav1.ObjectMeta { return metav1.ObjectMeta{Name: name, Namespace: namespace} }
	selector := metav1.LabelSelector{
		MatchLabels:      map[string]string{"app.kubernetes.io/part-of": "shop"},
		MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "tier", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"scratch"}}},
	}
	rule := crds.ResourceRule{
		Operations:  []crds.Operation{crds.OperationCreate, crds.OperationUpdate, crds.OperationDelete},
		APIGroups:   []string{"", "apps"},
		APIVersions: []string{"v1", "*"},
		Resources:   []string{"configmaps", "deployments"},
		ExcludeUsers: []string{"system:serviceaccount:flux-system:kustomize-controller",
			"system:serviceaccount:argocd:*"},
		ExcludeFieldManagers: []string{"kustomize-controller", "helm*"},
		KeepGenerated:        true,
		ObjectSelector:       &selector,
	}
	return []fixture{
		{kind: crds.KindGitRepoConfig, gvr: crds.GitRepoConfigs, obj: &crds.GitRepoConfig{
			ObjectMeta: meta("repo"),
			Spec: crds.GitRepoConfigSpec{
				RepoURL:         "https://git.example.com/org/repo.git",
				AllowedBranches: []string{"main", "release/v1"},
				SecretRef:       &crds.LocalReference{Name: "repo-creds"},
				Receiver:        &crds.GeneratedReceiver{Type: crds.ReceiverGitHub, Events: []string{"push", "ping"}},
				CommitSigning:   &crds.CommitSigning{Format: crds.SigningSSH, SecretRef: crds.LocalReference{Name: "repo-signing"}},
				AccessPolicy: &crds.AccessPolicy{Namespaces: []string{"team-a"}, NamespaceSelector: &metav1.LabelSelector{
					MatchLabels:      map[string]string{"tenant": "a"},
					MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "env", Operator: metav1.LabelSelectorOpIn, Values: []string{"prod"}}},
				}},
			},
		}, status: repoStatus, decode: decodeAs[crds.GitRepoConfig]},
		{kind: crds.KindGitDestination, gvr: crds.GitDestinations, obj: &crds.GitDestination{
			ObjectMeta: meta("dest"),
			Spec: crds.GitDestinationSpec{
				RepoRef:    crds.NamespacedReference{Name: "repo", Namespace: "other"},
				Branch:     "main",
				BaseFolder: "clusters/prod",
				Layout:     crds.LayoutExisting,
				Existing:   &crds.ExistingLayout{NewFiles: "{namespace}/{name}-{kind}.yaml", Prune: true, Kustomization: "production"},
				WriteBack:  &crds.WriteBack{Enabled: true, AutoApply: true, Suspend: true},
				Encryption: &crds.Encryption{Provider: crds.EncryptionSOPS, Age: &crds.AgeRecipients{
					Recipients:          []string{testRecipient},
					RecipientsSecretRef: &crds.LocalReference{Name: "sops-recipients"},
				}},
				AccessPolicy: &crds.AccessPolicy{Namespaces: []string{"team-a"}, NamespaceSelector: &metav1.LabelSelector{
					MatchLabels:      map[string]string{"tenant": "a"},
					MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "env", Operator: metav1.LabelSelectorOpIn, Values: []string{"prod"}}},
				}},
				Push: &crds.Push{Mode: crds.PushPullRequest, PullRequest: &crds.PullRequestPush{
					Provider: crds.ProviderGitea, APIURL: "https://git.example.com/api/v1", HeadBranch: "mirror/prod",
					Labels: []string{"mirror"}, Draft: true,
				}},
				ClusterRef: &crds.NamespacedReference{Name: "prod-cluster", Namespace: "other"},
			},
		}, status: destinationStatus, decode: decodeAs[crds.GitDestination]},
		{kind: crds.KindWatchRule, gvr: crds.WatchRules, obj: &crds.WatchRule{
			ObjectMeta: meta("rule"),
			Spec: crds.WatchRuleSpec{
				DestinationRef:     crds.NamespacedReference{Name: "dest", Namespace: "other"},
				Rules:              []crds.ResourceRule{rule, {Operations: []crds.Operation{crds.OperationAll}}},
				ServiceAccountName: "mirror-reader",
			},
		}, status: sharedStatus, decode: decodeAs[crds.WatchRule]},
		{kind: crds.KindClusterWatchRule, gvr: crds.ClusterWatchRules, obj: &crds.ClusterWatchRule{
			ObjectMeta: metav1.ObjectMeta{Name: namespace + "-cluster-rule"},
			Spec: crds.ClusterWatchRuleSpec{
				DestinationRef: crds.NamespacedReference{Name: "dest", Namespace: namespace},
				Rules: []crds.ClusterResourceRule{
					{ResourceRule: rule, Scope: crds.ScopeNamespaced, NamespaceSelector: &selector},
					{ResourceRule: crds.ResourceRule{Resources: []string{"namespaces"}}, Scope: crds.ScopeCluster},
				},
				ServiceAccountRef: &crds.ServiceAccountReference{Name: "platform-writer", Namespace: namespace},
			},
		}, status: sharedStatus, decode: decodeAs[crds.ClusterWatchRule]},
		{kind: crds.KindProposal, gvr: crds.Proposals, obj: fullProposal(namespace, "proposal"),
			status: proposalStatus, decode: decodeAs[crds.Proposal]},
		{kind: crds.KindSyncRun, gvr: crds.SyncRuns, obj: &crds.SyncRun{
			ObjectMeta: metav1.ObjectMeta{Name: "dest-run", Namespace: namespace,
				Labels: map[string]string{crds.LabelDestination: "dest"}},
			Spec: crds.SyncRunSpec{DestinationRef: crds.LocalReference{Name: "dest"}, Trigger: crds.TriggerSyncNow},
		}, status: syncRunStatus, inlineStatus: true, decode: decodeAs[crds.SyncRun]},
		{kind: crds.KindReceiver, gvr: crds.Receivers, obj: &crds.Receiver{
			ObjectMeta: meta("receiver"),
			Spec: crds.ReceiverSpec{
				Type:      crds.ReceiverCDEvents,
				Events:    []string{"dev.cdevents.change.merged", "dev.cdevents.artifact.published.0.2.0"},
				SecretRef: crds.LocalReference{Name: "receiver-token"},
				Resources: []crds.ReceiverResource{
					{Kind: crds.KindGitDestination, Name: "dest", Namespace: "other"},
					{Kind: crds.KindGitRepoConfig, Name: "repo"},
				},
				Suspend: true,
			},
		}, status: receiverStatus, decode: decodeAs[crds.Receiver]},
		{kind: crds.KindRemoteCluster, gvr: crds.RemoteClusters, obj: &crds.RemoteCluster{
			ObjectMeta: meta("prod-cluster"),
			Spec: crds.RemoteClusterSpec{
				KubeConfig:       crds.KubeConfigReference{SecretRef: crds.SecretKeyReference{Name: "prod-kubeconfig", Key: crds.KubeConfigKeyYAML}},
				Namespaces:       []string{"team-a", "team-b"},
				ClusterScoped:    true,
				QPS:              50,
				Burst:            100,
				SharedIdentities: true,
				AccessPolicy: &crds.AccessPolicy{Namespaces: []string{"team-a"}, NamespaceSelector: &metav1.LabelSelector{
					MatchLabels:      map[string]string{"tenant": "a"},
					MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "env", Operator: metav1.LabelSelectorOpIn, Values: []string{"prod"}}},
				}},
			},
		}, status: remoteClusterStatus, decode: decodeAs[crds.RemoteCluster]},
		{kind: crds.KindNotifyChannel, gvr: crds.NotifyChannels, obj: &crds.NotifyChannel{
			ObjectMeta: meta("statuses"),
			Spec: crds.NotifyChannelSpec{
				Type: crds.ChannelCommitStatus, SecretRef: crds.LocalReference{Name: "gitea-token"},
				Provider: crds.ProviderGitea, APIURL: "https://git.example.com/api/v1",
				Timeout: &metav1.Duration{Duration: 15 * time.Second}, PerMinute: 120, Suspend: true,
			},
		}, status: channelStatus, decode: decodeAs[crds.NotifyChannel]},
		{kind: crds.KindNotifyRule, gvr: crds.NotifyRules, obj: &crds.NotifyRule{
			ObjectMeta: meta("reviews"),
			Spec: crds.NotifyRuleSpec{
				ChannelRef: crds.LocalReference{Name: "statuses"},
				Events: []crds.NotifyEventSelector{{Kind: crds.KindProposal, Reasons: []string{"Opened", "Applied"}},
					{Kind: crds.KindGitDestination}},
				Severity: crds.SeverityError, Destinations: []string{"dest"}, Namespaces: []string{"team-a"},
				Include: []string{"^update "}, Exclude: []string{"kube-system"}, Summary: "production",
				DuplicateWindow: &metav1.Duration{Duration: 10 * time.Minute}, Suspend: true,
			},
		}, status: ruleStatus, decode: decodeAs[crds.NotifyRule]},
	}
}

func channelStatus(generation int64) any {
	return crds.NotifyChannelStatus{Status: fullStatus(generation), LastSentTime: &fixtureTime, Sent: 12, Failed: 1, Dropped: 3}
}

func ruleStatus(generation int64) any {
	return crds.NotifyRuleStatus{Status: fullStatus(generation), LastMatchTime: &fixtureTime}
}

// webhookPath is a well-formed status.webhookPath.
var webhookPath = "/hook/" + liveDigest

func repoStatus(generation int64) any {
	return crds.GitRepoConfigStatus{
		Status: fullStatus(generation),
		Receiver: &crds.GeneratedReceiverStatus{
			Name:        "repo-receiver",
			SecretName:  "repo-receiver-token",
			WebhookPath: webhookPath,
		},
		SigningKey: &crds.SigningKeyStatus{
			Format:      crds.SigningSSH,
			PublicKey:   testSSHPublicKey,
			Fingerprint: "SHA256:" + strings.Repeat("A", 43),
		},
	}
}

// testSSHPublicKey is a well-formed authorized_keys line (its private key is not kept anywhere).
const testSSHPublicKey = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGb9ECWmEzf6FQbrBZ9w7lshQhqowtrbLDFw4rXAxZuE gitops-reverser"

func receiverStatus(generation int64) any {
	return crds.ReceiverStatus{
		Status:        fullStatus(generation),
		WebhookPath:   webhookPath,
		LastEventTime: &fixtureTime,
		LastEvent:     "push from https://git.example.com/org/repo.git: triggered 2 destinations",
		LastOutcome:   crds.OutcomeTriggered,
	}
}

func remoteClusterStatus(generation int64) any {
	return crds.RemoteClusterStatus{
		Status:        fullStatus(generation),
		Server:        "https://prod.example.com:6443",
		Version:       "v1.34.1",
		Resources:     61,
		Watches:       12,
		LastEventTime: &fixtureTime,
		Attribution:   crds.AttributionWorking,
	}
}

func destinationStatus(generation int64) any {
	return crds.GitDestinationStatus{
		Status: fullStatus(generation),
		WriteBack: &crds.WriteBackStatus{
			LastRevision:       sourceCommit,
			LastSyncRun:        "dest-run",
			LastSyncTime:       &fixtureTime,
			LastHandledSyncNow: "2026-01-02T03:04:05Z",
			PendingProposals:   3,
			Conditions:         []metav1.Condition{condition(crds.ConditionReady, 1)},
		},
		Git: &crds.GitProgress{LastPushedCommit: sourceCommit, LastPushTime: &fixtureTime, LastPushAuthor: "Alice <alice@example.com>",
			Pending: 2, Failures: 1, LastError: "push rejected", Owner: "gitops-reverser-7d9f_3a4b5c6d"},
		PullRequest: &crds.PullRequestStatus{HeadBranch: "mirror/prod", Number: 7, URL: "https://git.example.com/o/r/pulls/7",
			State: "open", HeadCommit: sourceCommit, ChangesWaiting: 3, OpenedAt: &fixtureTime},
		Skipped: []crds.SkipCount{
			{Reason: crds.SkipReasonKubeRootCA, Count: 12},
			{Reason: crds.SkipReasonExcludedFieldManager, Count: 0},
		},
		Adopted: &crds.AdoptedStatus{
			Problems:  []string{"apps/broken.yaml (document 2): does not parse as YAML: line 13: mapping values are not allowed in this context"},
			Unwritten: []string{"Deployment.apps team-a/web: the alias *base is not edited"},
			Absent:    []string{"ConfigMap team-a/legacy (apps/web.yaml, document 4)"},
		},
	}
}

// fullProposal is an update Proposal with every spec field set.
func fullProposal(namespace, name string) *crds.Proposal {
	return &crds.Proposal{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace,
			Labels: map[string]string{crds.LabelDestination: "dest"}},
		Spec: crds.ProposalSpec{
			DestinationRef: crds.LocalReference{Name: "dest"},
			Change:         crds.ChangeUpdate,
			Target: crds.ProposalTarget{APIVersion: "apps/v1", Kind: "Deployment", Resource: "deployments",
				Namespace: "team-a", Name: "web"},
			Path:                "clusters/prod/team-a/deployments.apps/web.yaml",
			SourceCommit:        sourceCommit,
			Author:              crds.GitAuthor{Name: "Alice", Email: "alice@example.com"},
			Desired:             "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\n  namespace: team-a\nspec:\n  replicas: 3\n",
			Diff:                "--- live\n+++ desired\n@@ -5 +5 @@\n-  replicas: 2\n+  replicas: 3\n",
			LiveResourceVersion: "12345",
			LiveDigest:          liveDigest,
			Decision:            crds.DecisionApprove,
			DecidedBy:           &crds.Reviewer{Username: "alice", UID: "uid-alice", Groups: []string{"developers"}, Stamp: "0123456789abcdef"},
		},
	}
}

func proposalStatus(generation int64) any {
	return crds.ProposalStatus{
		Conditions:         []metav1.Condition{condition(crds.ConditionApplied, generation)},
		ObservedGeneration: generation,
		Phase:              crds.PhaseApplied,
		Message:            "applied by server-side apply",
		ReviewedBy:         &crds.Reviewer{Username: "alice", UID: "u-1", Groups: []string{"team-a", "system:authenticated"}},
		AutoApplied:        true,
		AutoApplyAttempts:  2,
		AutoApplyRetryAt:   &fixtureTime,
		DecidedAt:          &fixtureTime,
		AppliedAt:          &fixtureTime,
		SupersededBy:       "proposal-2",
		Stamp:              "0123456789abcdef",
	}
}

func syncRunStatus(int64) any {
	return crds.SyncRunStatus{
		Conditions:   []metav1.Condition{condition(crds.ConditionComplete, 1)},
		Phase:        crds.SyncRunPartial,
		StartedAt:    &fixtureTime,
		CompletedAt:  &fixtureTime,
		BaseRevision: strings.Repeat("1", 40),
		Revision:     sourceCommit,
		Differences: []crds.DifferenceCount{
			{Group: "apps", Kind: "Deployment", Change: crds.ChangeUpdate, Count: 2},
			{Kind: "ConfigMap", Change: crds.ChangeCreate, Count: 1},
		},
		DifferenceTotal: 3,
		ProposalsOpened: 3,
		Applied:         1,
		Refused:         []crds.RefusedFile{{Path: "clusters/prod/team-a/configmaps/big.yaml", Reason: "TooLarge", Message: "over 1 MiB"}},
		RefusedTotal:    1,
		Error:           "1 file refused",
	}
}

// testRecipient is a well-formed age X25519 recipient (its identity is not kept anywhere).
const testRecipient = "age1ql3z7hjy54pw3hyww5ayyfg7zqgvc7w3j2elw8zmrj2kg5sfn9aqmcac8p"
