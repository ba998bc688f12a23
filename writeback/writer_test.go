package writeback

import (
	"slices"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/configbutler/gitops-reverser/crds"
)

// TestWriterIsTheRulesServiceAccount: a change is applied as the one ServiceAccount the rules that
// select its object name; with none, or with two different ones, it is not applied, and the
// problem says what to add.
func TestWriterIsTheRulesServiceAccount(t *testing.T) {
	deployer := crds.ServiceAccountReference{Namespace: "team-a", Name: "deployer"}
	platform := crds.ServiceAccountReference{Namespace: "platform", Name: "writer"}
	cms := schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	sel := func(namespace string, writers ...Writer) Selection {
		return Selection{GVR: cms, Kind: "ConfigMap", Namespaced: true, Namespace: namespace, Writers: writers}
	}
	named := Writer{Rule: "WatchRule team-a/apps", ServiceAccount: deployer}
	unnamed := Writer{Rule: "WatchRule team-a/extra"}
	cluster := Writer{Rule: "ClusterWatchRule all", ServiceAccount: platform}
	target := crds.ProposalTarget{APIVersion: "v1", Kind: "ConfigMap", Resource: "configmaps", Namespace: "team-a", Name: "x"}
	d := &dest{key: "team-a/dest"}
	for _, tc := range []struct {
		name    string
		sels    []Selection
		want    crds.ServiceAccountReference
		problem string // a part of the problem; "" when there is none
	}{
		{"the rule's ServiceAccount", []Selection{sel("team-a", named)}, deployer, ""},
		{"a named one wins over a rule naming none", []Selection{sel("team-a", unnamed, named)}, deployer, ""},
		{"the same one from two rules", []Selection{sel("team-a", named), sel("", Writer{Rule: "ClusterWatchRule x", ServiceAccount: deployer})}, deployer, ""},
		{"a WatchRule naming none", []Selection{sel("team-a", unnamed)}, crds.ServiceAccountReference{},
			"set spec.serviceAccountName on WatchRule team-a/extra to a ServiceAccount of team-a that may make the change, and annotate it configbutler.ai/watchrules=extra"},
		{"a ClusterWatchRule naming none", []Selection{sel("", Writer{Rule: "ClusterWatchRule all"})}, crds.ServiceAccountReference{},
			"set spec.serviceAccountRef (name, namespace) on ClusterWatchRule all"},
		{"two rules, two ServiceAccounts", []Selection{sel("team-a", named), sel("", cluster)}, crds.ServiceAccountReference{},
			"name different ServiceAccounts (WatchRule team-a/apps as team-a/deployer, ClusterWatchRule all as platform/writer)"},
		{"another namespace's rule", []Selection{sel("team-b", Writer{Rule: "WatchRule team-b/apps", ServiceAccount: crds.ServiceAccountReference{Namespace: "team-b", Name: "w"}})},
			crds.ServiceAccountReference{}, "no rule of GitDestination team-a/dest selects it"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, problem := writerOf(d, tc.sels, target)
			if got != tc.want || (tc.problem == "") != (problem == "") || !strings.Contains(problem, tc.problem) {
				t.Errorf("writer %v, problem %q; want %v and a problem with %q", got, problem, tc.want, tc.problem)
			}
		})
	}
}

// TestWritesAsConditionSaysWhatToAdd: the destination's WritesAs condition lists whom it writes
// as, or is False naming the rule that names no ServiceAccount.
func TestWritesAsConditionSaysWhatToAdd(t *testing.T) {
	cms := schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	named := Writer{Rule: "WatchRule team-a/apps", ServiceAccount: crds.ServiceAccountReference{Namespace: "team-a", Name: "deployer"}}
	ok := writersCondition([]Selection{{GVR: cms, Writers: []Writer{named}}})
	if ok.Status != metav1.ConditionTrue || !strings.Contains(ok.Message, "WatchRule team-a/apps as system:serviceaccount:team-a:deployer") {
		t.Errorf("with a ServiceAccount: %+v", ok)
	}
	missing := writersCondition([]Selection{{GVR: cms, Writers: []Writer{named, {Rule: "WatchRule team-a/extra"}}}})
	if missing.Status != metav1.ConditionFalse || missing.Reason != ReasonNoServiceAccount || !strings.Contains(missing.Message, "WatchRule team-a/extra names no ServiceAccount") {
		t.Errorf("with a rule naming none: %+v", missing)
	}
}

// TestPermissionsSpellOutARole: a Role's rules become one SubjectAccessReview per verb, group,
// resource (with its subresource) and name, "*" kept as "*"; a ClusterRole's non-resource URLs only
// where it is bound cluster-wide.
func TestPermissionsSpellOutARole(t *testing.T) {
	rules := []rbacv1.PolicyRule{
		{Verbs: []string{"get", "patch"}, APIGroups: []string{""}, Resources: []string{"pods/log"}, ResourceNames: []string{"a"}},
		{Verbs: []string{"*"}, APIGroups: []string{"*"}, Resources: []string{"*"}},
		{Verbs: []string{"get"}, NonResourceURLs: []string{"/healthz"}},
	}
	spell := func(ns string) []string {
		var out []string
		for _, q := range permissions(rules, ns) {
			out = append(out, q.String())
		}
		return out
	}
	if got, want := spell("team-a"), []string{"get pods/log/a", "patch pods/log/a", "* *.*"}; !slices.Equal(got, want) {
		t.Errorf("in a namespace: %q, want %q", got, want)
	}
	if got := spell(""); len(got) != 4 || got[3] != "get /healthz" {
		t.Errorf("cluster-wide: %q, want the non-resource URL last", got)
	}
}
