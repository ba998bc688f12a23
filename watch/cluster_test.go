package watch

import (
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/configbutler/gitops-reverser/crds"
	"github.com/configbutler/gitops-reverser/testenv"
)

func TestClusterWatchRuleMirrorsEveryNamespaceAndClusterScope(t *testing.T) {
	e := newEnv(t)
	other := e.ns + "-other"
	e.createNamespace(other)
	e.configMap("here", map[string]string{"k": "v"})
	e.create(configMapIn(other, "there"))
	orphan := baseFolder + "/" + e.ns + "-gone/configmaps/old.yaml"
	if _, err := gitSrv.PushCommit(e.repo, "main", testenv.Signature{Name: "dora", Email: "dora@example.com"}, "left over",
		map[string]string{orphan: "kind: ConfigMap\n"}, nil); err != nil {
		t.Fatal(err)
	}
	e.apply(crds.ClusterWatchRules, &crds.ClusterWatchRule{ObjectMeta: metav1.ObjectMeta{Name: e.ns + "-everything"},
		Spec: crds.ClusterWatchRuleSpec{DestinationRef: crds.NamespacedReference{Name: "dest", Namespace: e.ns},
			Rules: []crds.ClusterResourceRule{
				{ResourceRule: crds.ResourceRule{Resources: []string{"configmaps"}}, Scope: crds.ScopeNamespaced},
				{ResourceRule: crds.ResourceRule{Resources: []string{"namespaces"}}, Scope: crds.ScopeCluster},
			}}})
	e.startManager()

	want := []string{e.cmPath("here"), other + "/configmaps/there.yaml", "_cluster/namespaces/" + e.ns + ".yaml", "_cluster/namespaces/" + other + ".yaml"}
	testenv.Eventually(e.t, time.Minute, "every namespace and the cluster scope mirrored, the orphan gone", func() (bool, string) {
		files := e.files()
		for _, w := range want {
			if !slices.Contains(files, w) {
				return false, "missing " + w
			}
		}
		if slices.Contains(files, e.ns+"-gone/configmaps/old.yaml") {
			return false, "orphan still there"
		}
		return true, ""
	})
	testenv.Eventually(e.t, time.Minute, "rule ready", func() (bool, string) {
		c := e.readyCondition(crds.ClusterWatchRules, "", e.ns+"-everything")
		return c != nil && c.Status == metav1.ConditionTrue, "not ready"
	})
}
