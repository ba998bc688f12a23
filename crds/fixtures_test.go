package crds_test

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/configbutler/gitops-reverser/crds"
)

// fixture is one object of a kind with the resource it lives in and a decoder back into its
// Go type.
type fixture struct {
	kind   string
	gvr    schema.GroupVersionResource
	obj    any
	decode func(*unstructured.Unstructured) (any, error)
}

func decodeAs[T any](u *unstructured.Unstructured) (any, error) { return crds.FromUnstructured[T](u) }

// fullFixtures returns a valid object of every kind with every spec field set, so a field the
// schema lacks would be pruned (or, with strict field validation, rejected).
func fullFixtures(namespace string) []fixture {
	meta := func(name string) metav1.ObjectMeta { return metav1.ObjectMeta{Name: name, Namespace: namespace} }
	rule := crds.ResourceRule{
		Operations:  []crds.Operation{crds.OperationCreate, crds.OperationUpdate, crds.OperationDelete},
		APIGroups:   []string{"", "apps"},
		APIVersions: []string{"v1", "*"},
		Resources:   []string{"configmaps", "deployments"},
	}
	return []fixture{
		{crds.KindGitRepoConfig, crds.GitRepoConfigs, &crds.GitRepoConfig{
			ObjectMeta: meta("repo"),
			Spec: crds.GitRepoConfigSpec{
				RepoURL:         "https://git.example.com/org/repo.git",
				AllowedBranches: []string{"main", "release/v1"},
				SecretRef:       &crds.LocalReference{Name: "repo-creds"},
			},
		}, decodeAs[crds.GitRepoConfig]},
		{crds.KindGitDestination, crds.GitDestinations, &crds.GitDestination{
			ObjectMeta: meta("dest"),
			Spec: crds.GitDestinationSpec{
				RepoRef:    crds.NamespacedReference{Name: "repo", Namespace: "other"},
				Branch:     "main",
				BaseFolder: "clusters/prod",
			},
		}, decodeAs[crds.GitDestination]},
		{crds.KindWatchRule, crds.WatchRules, &crds.WatchRule{
			ObjectMeta: meta("rule"),
			Spec: crds.WatchRuleSpec{
				DestinationRef: crds.NamespacedReference{Name: "dest", Namespace: "other"},
				Rules:          []crds.ResourceRule{rule, {Operations: []crds.Operation{crds.OperationAll}}},
			},
		}, decodeAs[crds.WatchRule]},
		{crds.KindClusterWatchRule, crds.ClusterWatchRules, &crds.ClusterWatchRule{
			ObjectMeta: metav1.ObjectMeta{Name: namespace + "-cluster-rule"},
			Spec: crds.ClusterWatchRuleSpec{
				DestinationRef: crds.NamespacedReference{Name: "dest", Namespace: namespace},
				Rules: []crds.ClusterResourceRule{
					{ResourceRule: rule, Scope: crds.ScopeNamespaced},
					{ResourceRule: crds.ResourceRule{Resources: []string{"namespaces"}}, Scope: crds.ScopeCluster},
				},
			},
		}, decodeAs[crds.ClusterWatchRule]},
	}
}
