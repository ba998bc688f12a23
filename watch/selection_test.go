package watch

import (
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/configbutler/gitops-reverser/crds"
	"github.com/configbutler/gitops-reverser/kube"
)

var served = []kube.APIResource{
	{Resource: "configmaps", Kind: "ConfigMap", Versions: []string{"v1"}, Namespaced: true},
	{Resource: "pods", Kind: "Pod", Versions: []string{"v1"}, Namespaced: true},
	{Resource: "secrets", Kind: "Secret", Versions: []string{"v1"}, Namespaced: true},
	{Resource: "events", Kind: "Event", Versions: []string{"v1"}, Namespaced: true},
	{Resource: "services", Kind: "Service", Versions: []string{"v1"}, Namespaced: true},
	{Resource: "namespaces", Kind: "Namespace", Versions: []string{"v1"}},
	{Group: "apps", Resource: "deployments", Kind: "Deployment", Versions: []string{"v1"}, Namespaced: true},
	{Group: "apps", Resource: "replicasets", Kind: "ReplicaSet", Versions: []string{"v1"}, Namespaced: true},
	{Group: "rbac.authorization.k8s.io", Resource: "clusterroles", Kind: "ClusterRole", Versions: []string{"v1"}},
	{Group: "coordination.k8s.io", Resource: "leases", Kind: "Lease", Versions: []string{"v1"}, Namespaced: true},
	{Group: "example.com", Resource: "widgets", Kind: "Widget", Versions: []string{"v2", "v1"}, Namespaced: true},
	{Group: "flowcontrol.apiserver.k8s.io", Resource: "flowschemas", Kind: "FlowSchema", Versions: []string{"v1"}},
	{Group: "networking.k8s.io", Resource: "ipaddresses", Kind: "IPAddress", Versions: []string{"v1"}},
}

// names lists the selections as resource.group@version/namespace, sorted.
func names(sel []Selection) []string {
	var out []string
	for _, s := range sel {
		out = append(out, s.GVR.GroupResource().String()+"@"+s.GVR.Version+"/"+s.Namespace)
	}
	slices.Sort(out)
	return out
}

func TestExpandRules(t *testing.T) {
	cases := []struct {
		name        string
		rules       []ruleSpec
		opts        ExpandOptions
		encrypted   bool // the destination encrypts Secrets
		want        []string
		wantSecrets bool
	}{
		{
			name:  "omitted resources take the desired-state default in the rule's namespace",
			rules: []ruleSpec{{namespace: "team-a"}},
			want: []string{"configmaps@v1/team-a", "deployments.apps@v1/team-a", "services@v1/team-a",
				"widgets.example.com@v2/team-a"},
		},
		{
			name:  "watch-all selects everything but Secrets",
			rules: []ruleSpec{{namespace: "team-a"}},
			opts:  ExpandOptions{WatchAll: true},
			want: []string{"configmaps@v1/team-a", "deployments.apps@v1/team-a", "events@v1/team-a",
				"leases.coordination.k8s.io@v1/team-a", "pods@v1/team-a", "replicasets.apps@v1/team-a",
				"services@v1/team-a", "widgets.example.com@v2/team-a"},
			wantSecrets: true,
		},
		{
			name:  "explicit resources and groups",
			rules: []ruleSpec{{ResourceRule: crds.ResourceRule{APIGroups: []string{"apps"}, Resources: []string{"deployments", "configmaps"}}}},
			want:  []string{"deployments.apps@v1/"},
		},
		{
			name:        "secrets are reported, never selected",
			rules:       []ruleSpec{{ResourceRule: crds.ResourceRule{Resources: []string{"secrets", "configmaps"}}, namespace: "x"}},
			want:        []string{"configmaps@v1/x"},
			wantSecrets: true,
		},
		{
			name:      "secrets named by a rule of an encrypting destination are selected",
			rules:     []ruleSpec{{ResourceRule: crds.ResourceRule{Resources: []string{"secrets", "configmaps"}}, namespace: "x"}},
			encrypted: true,
			want:      []string{"configmaps@v1/x", "secrets@v1/x"},
		},
		{
			name:        "an encrypting destination still leaves out Secrets a wildcard selects",
			rules:       []ruleSpec{{ResourceRule: crds.ResourceRule{Resources: []string{"*"}}, namespace: "n"}},
			opts:        ExpandOptions{Exclude: []string{"configmaps", "widgets.example.com", "deployments", "pods", "events", "leases", "replicasets"}},
			encrypted:   true,
			want:        []string{"services@v1/n"},
			wantSecrets: true,
		},
		{
			name:  "cluster scope selects only cluster-scoped resources",
			rules: []ruleSpec{{clusterScoped: true}},
			want:  []string{"clusterroles.rbac.authorization.k8s.io@v1/", "namespaces@v1/"},
		},
		{
			name:  "what the apiserver makes for itself is left out of everything, wildcard and watch-all too",
			rules: []ruleSpec{{clusterScoped: true, ResourceRule: crds.ResourceRule{Resources: []string{"*"}}}},
			opts:  ExpandOptions{WatchAll: true},
			want:  []string{"clusterroles.rbac.authorization.k8s.io@v1/", "namespaces@v1/"},
		},
		{
			name:  "what the apiserver makes for itself is selected when a rule names it",
			rules: []ruleSpec{{clusterScoped: true, ResourceRule: crds.ResourceRule{Resources: []string{"flowschemas", "ipaddresses"}}}},
			want:  []string{"flowschemas.flowcontrol.apiserver.k8s.io@v1/", "ipaddresses.networking.k8s.io@v1/"},
		},
		{
			name:  "apiVersions picks a non-preferred version when asked",
			rules: []ruleSpec{{ResourceRule: crds.ResourceRule{Resources: []string{"widgets"}, APIVersions: []string{"v1"}}}},
			want:  []string{"widgets.example.com@v1/"},
		},
		{
			name:  "exclude by resource in any group and by resource.group",
			rules: []ruleSpec{{ResourceRule: crds.ResourceRule{Resources: []string{"*"}}, namespace: "n"}},
			opts:  ExpandOptions{Exclude: []string{"configmaps", "widgets.example.com", "deployments", "pods.apps"}},
			want: []string{"events@v1/n", "leases.coordination.k8s.io@v1/n", "pods@v1/n",
				"replicasets.apps@v1/n", "services@v1/n"},
			wantSecrets: true,
		},
		{
			name: "two rules on one resource merge their operations",
			rules: []ruleSpec{
				{ResourceRule: crds.ResourceRule{Resources: []string{"configmaps"}, Operations: []crds.Operation{crds.OperationCreate}}},
				{ResourceRule: crds.ResourceRule{Resources: []string{"configmaps"}, Operations: []crds.Operation{crds.OperationDelete}}},
			},
			want: []string{"configmaps@v1/"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			sel, secrets := expand(tc.rules, served, tc.opts, tc.encrypted)
			if diff := cmp.Diff(tc.want, names(sel)); diff != "" {
				t.Errorf("selections (-want +got):\n%s", diff)
			}
			if secrets != tc.wantSecrets {
				t.Errorf("secrets skipped = %v, want %v", secrets, tc.wantSecrets)
			}
		})
	}
}

func TestMergedOperations(t *testing.T) {
	sel, _ := expand([]ruleSpec{
		{ResourceRule: crds.ResourceRule{Resources: []string{"configmaps"}, Operations: []crds.Operation{crds.OperationCreate}}},
		{ResourceRule: crds.ResourceRule{Resources: []string{"configmaps"}, Operations: []crds.Operation{crds.OperationDelete}}},
	}, served, ExpandOptions{}, false)
	if len(sel) != 1 || sel[0].Ops != opCreate|opDelete {
		t.Fatalf("selections = %+v, want one with CREATE|DELETE", sel)
	}
}
