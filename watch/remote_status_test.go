package watch

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/configbutler/gitops-reverser/crds"
	"github.com/configbutler/gitops-reverser/metrics"
	"github.com/configbutler/gitops-reverser/shard"
	"github.com/configbutler/gitops-reverser/testenv"
)

// ownsBranches is a sharing of destinations in which this replica owns the shards of branches.
type ownsBranches []string

func (o ownsBranches) Want([]shard.Key)         {}
func (o ownsBranches) Owns(k shard.Key) bool    { return slices.Contains(o, k.Branch) }
func (o ownsBranches) Owner(k shard.Key) string { return "" }

// TestARemoteClusterIsReportedByOneReplica: two replicas share the destinations out, and each
// owns one of the two destinations that mirror RemoteCluster "self" (this control plane, reached
// by its kubeconfig): replica a watches one resource there, replica b two. The RemoteCluster's
// status is written by one of them only, and counts what the rules select there, which both
// replicas agree on; otherwise each would write its own count over the other's at every reconcile.
func TestARemoteClusterIsReportedByOneReplica(t *testing.T) {
	e := newEnv(t)
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := cp.WriteKubeconfig(path); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.kube.CoreV1().Secrets(e.ns).Create(e.ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "self-kubeconfig", Namespace: e.ns},
		Data: map[string][]byte{crds.DefaultKubeConfigKey: data}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.apply(crds.RemoteClusters, &crds.RemoteCluster{ObjectMeta: metav1.ObjectMeta{Name: "self", Namespace: e.ns},
		Spec: crds.RemoteClusterSpec{KubeConfig: crds.KubeConfigReference{SecretRef: crds.SecretKeyReference{Name: "self-kubeconfig"}}, Namespaces: []string{e.ns}}})
	t.Cleanup(func() { _ = e.resource(crds.RemoteClusters, e.ns).Delete(e.ctx, "self", metav1.DeleteOptions{}) })
	e.apply(crds.GitRepoConfigs, &crds.GitRepoConfig{ObjectMeta: metav1.ObjectMeta{Name: "repo", Namespace: e.ns},
		Spec: crds.GitRepoConfigSpec{RepoURL: gitSrv.RepoURL(e.repo), AllowedBranches: []string{"main", "east-a", "east-b"},
			SecretRef: &crds.LocalReference{Name: "git"}}})
	for name, resources := range map[string][]string{"a": {"configmaps"}, "b": {"configmaps", "services"}} {
		e.apply(crds.GitDestinations, &crds.GitDestination{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.ns},
			Spec: crds.GitDestinationSpec{RepoRef: crds.NamespacedReference{Name: "repo"}, Branch: "east-" + name, BaseFolder: "clusters/" + name,
				ClusterRef: &crds.NamespacedReference{Name: "self"}}})
		e.apply(crds.WatchRules, &crds.WatchRule{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.ns},
			Spec: crds.WatchRuleSpec{DestinationRef: crds.NamespacedReference{Name: name}, Rules: []crds.ResourceRule{{Resources: resources}}}})
	}

	writers := e.statusWriters(crds.RemoteClusters, "self")

	regs, stops := map[string]*metrics.Registry{}, map[string]func(){}
	for _, replica := range []string{"a", "b"} {
		e.reg, e.shards, e.userAgent = metrics.New(), ownsBranches{"east-" + replica}, "replica-"+replica
		regs[replica], stops[replica] = e.reg, e.startManager()
	}
	cluster := e.ns + "/self"
	testenv.Eventually(t, time.Minute, "each replica watching its own there, and the status counting both", func() (bool, string) {
		a := testutil.ToFloat64(regs["a"].Mirror.ClusterWatches.WithLabelValues(cluster))
		b := testutil.ToFloat64(regs["b"].Mirror.ClusterWatches.WithLabelValues(cluster))
		rc := e.remoteCluster("self")
		return a == 1 && b == 2 && rc.Status.Watches == 2, fmt.Sprintf("replica a watches %v, b %v; status %+v", a, b, rc.Status)
	})
	stops["a"]()
	stops["b"]()

	rc := e.remoteCluster("self")
	if got := writers(rc.ResourceVersion); len(got) != 1 {
		t.Errorf("the status of RemoteCluster self was written by %v, want one replica", got)
	}
	if rc.Status.Watches != 2 {
		t.Errorf("status.watches %d, want 2: what the rules select there", rc.Status.Watches)
	}
}

// statusWriters follows the object name of kind gvr in the test's namespace, and returns what
// says, once it has seen resourceVersion rv, which field managers wrote its status meanwhile.
func (e *env) statusWriters(gvr schema.GroupVersionResource, name string) func(rv string) []string {
	e.t.Helper()
	w, err := e.resource(gvr, e.ns).Watch(e.ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + name})
	if err != nil {
		e.t.Fatal(err)
	}
	var mu sync.Mutex
	writers, seen := map[string]bool{}, ""
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			u, ok := ev.Object.(*unstructured.Unstructured)
			if !ok {
				continue
			}
			mu.Lock()
			for _, f := range u.GetManagedFields() {
				if f.Subresource == "status" {
					writers[f.Manager] = true
				}
			}
			seen = u.GetResourceVersion()
			mu.Unlock()
		}
	}()
	stop := sync.OnceFunc(func() { w.Stop(); <-done })
	e.t.Cleanup(stop)
	return func(rv string) []string {
		testenv.Eventually(e.t, time.Minute, "the watch of "+name+" at resourceVersion "+rv, func() (bool, string) {
			mu.Lock()
			defer mu.Unlock()
			return seen == rv, seen
		})
		stop()
		return slices.Sorted(maps.Keys(writers))
	}
}

// remoteCluster reads a RemoteCluster of the test's namespace.
func (e *env) remoteCluster(name string) *crds.RemoteCluster {
	e.t.Helper()
	u, err := e.resource(crds.RemoteClusters, e.ns).Get(e.ctx, name, metav1.GetOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	rc, err := crds.FromUnstructured[crds.RemoteCluster](u)
	if err != nil {
		e.t.Fatal(err)
	}
	return rc
}
