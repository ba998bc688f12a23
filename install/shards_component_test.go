package install

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/configbutler/gitops-reverser/daemon"
)

// shardLeaseRule is the rule shards add to leader election: the Leases of the shards and the
// replicas' memberships, whose names are digests, so not limited by name.
var shardLeaseRule = rbacv1.PolicyRule{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"},
	Verbs: []string{"get", "list", "watch", "update", "delete"}}

// TestShardsComponentMatchesTheChartsHighAvailability renders deploy/ with the kustomize component
// components/shards, as an overlay would, and expects what the chart's ha.enabled gives: the Lease
// rules shards need, two replicas with a PodDisruptionBudget, --shards=auto and the peer address;
// the apiserver admits it all (server dry run).
func TestShardsComponentMatchesTheChartsHighAvailability(t *testing.T) {
	overlay := t.TempDir()
	deploy, err := filepath.Abs(deployPath())
	if err != nil {
		t.Fatal(err)
	}
	rel, err := filepath.Rel(overlay, deploy) // kustomize takes relative paths only
	if err != nil {
		t.Fatal(err)
	}
	k := fmt.Sprintf("apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources: [%s]\ncomponents: [%s]\n",
		rel, filepath.Join(rel, "components", "shards"))
	if err := os.WriteFile(filepath.Join(overlay, "kustomization.yaml"), []byte(k), 0o644); err != nil {
		t.Fatal(err)
	}
	kubeconfig := adminKubeconfig(t)
	rendered, _ := kubectl(t, kubeconfig, nil, "kustomize", overlay)
	objs := decodeObjects(t, []byte(rendered))

	var role rbacv1.Role
	object(t, objs, "Role", "gitops-reverser-leader-election", &role)
	if diff := cmp.Diff(append(leaderElectionRules("gitops-reverser-leader"), shardLeaseRule), role.Rules); diff != "" {
		t.Errorf("leader election rules with the component (-want +got):\n%s", diff)
	}
	chart := renderChart(t, "--set", "ha.enabled=true")
	var chartRole rbacv1.Role
	object(t, chart.objs, "Role", chartRelease+"-leader-election", &chartRole)
	if diff := cmp.Diff(append(leaderElectionRules(chartRelease+"-leader"), shardLeaseRule), chartRole.Rules); diff != "" {
		t.Errorf("the chart's leader election rules with ha.enabled (-want +got):\n%s", diff)
	}

	var deployment appsv1.Deployment
	object(t, objs, "Deployment", "gitops-reverser", &deployment)
	if got := deref(deployment.Spec.Replicas); got != int32(2) {
		t.Errorf("replicas = %v, want 2", got)
	}
	env := map[string]string{}
	for _, e := range deployment.Spec.Template.Spec.Containers[0].Env {
		env[e.Name] = e.Value
		if e.ValueFrom != nil && e.ValueFrom.FieldRef != nil {
			env[e.Name] = "field:" + e.ValueFrom.FieldRef.FieldPath
		}
	}
	for name, want := range map[string]string{"POD_IP": "field:status.podIP", daemon.EnvVar("shards"): "auto",
		daemon.EnvVar("peer-address"): "$(POD_IP):9443", daemon.EnvVar("pod-name"): "field:metadata.name"} {
		if env[name] != want {
			t.Errorf("env %s = %q, want %q (all: %v)", name, env[name], want, env)
		}
	}
	if a := deployment.Spec.Template.Spec.Affinity; a == nil || a.PodAntiAffinity == nil {
		t.Errorf("affinity %+v, want the replicas spread over nodes", a)
	}
	var pdb policyv1.PodDisruptionBudget
	object(t, objs, "PodDisruptionBudget", "gitops-reverser", &pdb)
	if pdb.Spec.MinAvailable == nil || pdb.Spec.MinAvailable.String() != "1" || pdb.Spec.Selector == nil ||
		!cmp.Equal(pdb.Spec.Selector.MatchLabels, deployment.Spec.Selector.MatchLabels) {
		t.Errorf("PodDisruptionBudget %+v, want minAvailable 1 over the Deployment's Pods", pdb.Spec)
	}

	kubectl(t, kubeconfig, nil, "apply", "-f", deployPath("namespace.yaml"))
	stdout, stderr := kubectl(t, kubeconfig, nil, "apply", "-k", overlay, "--dry-run=server")
	checkDryRun(t, objs, stdout, stderr)
}
