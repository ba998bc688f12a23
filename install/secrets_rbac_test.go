package install

import (
	"slices"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
)

// TestChartReadsSecretsOnlyWithRBACSecrets: the ClusterRole reads Secrets cluster-wide (for
// encrypted mirroring) only with rbac.secrets=true, and then only get, list and watch.
func TestChartReadsSecretsOnlyWithRBACSecrets(t *testing.T) {
	secretRules := func(args ...string) [][]string {
		t.Helper()
		var role rbacv1.ClusterRole
		object(t, renderChart(t, args...).objs, "ClusterRole", chartRelease, &role)
		var verbs [][]string
		for _, r := range role.Rules {
			if slices.Contains(r.Resources, "secrets") || slices.Contains(r.Resources, "*") {
				verbs = append(verbs, r.Verbs)
			}
		}
		return verbs
	}
	if got := secretRules(); len(got) != 0 {
		t.Errorf("by default the ClusterRole reaches Secrets: %v", got)
	}
	got := secretRules("--set", "rbac.secrets=true")
	if len(got) != 1 || !slices.Equal(got[0], []string{"get", "list", "watch"}) {
		t.Errorf("with rbac.secrets the ClusterRole's Secrets rules are %v, want one with get, list, watch", got)
	}
}
