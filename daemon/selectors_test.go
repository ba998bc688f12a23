package daemon

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/configbutler/gitops-reverser/crds"
	"github.com/configbutler/gitops-reverser/testenv"
)

// relabel merge-patches the labels of a ConfigMap as user.
func relabel(t *testing.T, user, ns, name, labels string) {
	t.Helper()
	kube := userClient(planes.Of(t).UserConfig(user))
	if _, err := kube.CoreV1().ConfigMaps(ns).Patch(context.Background(), name, types.MergePatchType,
		[]byte(`{"metadata":{"labels":`+labels+`}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
}

// remoteLacks waits until file is gone from the remote.
func remoteLacks(srv *testenv.GitServer, file string) func() (bool, string) {
	return func() (bool, string) {
		ok, why := remoteHas(srv, file)()
		return !ok, why
	}
}

// newestAuthor is the author of the newest commit of the remote that touched path.
func newestAuthor(t *testing.T, srv *testenv.GitServer, path string) string {
	t.Helper()
	if authors := commitsTouching(t, srv, path); len(authors) > 0 {
		return authors[0]
	}
	return ""
}

// TestSelectorsFollowLabels: a WatchRule with an objectSelector writes only the ConfigMaps whose
// labels match (one selector on the resource: the apiserver applies it). carol relabelling one in
// writes it, credited to her; dave relabelling one out deletes its file, credited to him. A
// ClusterWatchRule with a namespaceSelector and an objectSelector (matched by the daemon itself)
// writes a namespace's ConfigMaps once the namespace is labelled, deletes them when the label goes,
// and follows its objects' labels in and out the same way.
func TestSelectorsFollowLabels(t *testing.T) {
	cp := planes.Lend(t)
	const ns, other = "sel-a", "sel-b"
	srv, kube := mirrorSetup(t, ns)
	ctx := context.Background()
	dyn := dynamic.NewForConfigOrDie(cp.AdminConfig())
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: other}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{ns, other} {
		grant(t, kube, n, "alice", "carol", "dave")
	}
	adminPatch(t, crds.WatchRules, ns, "cms", `{"spec":{"rules":[{"resources":["configmaps"],"objectSelector":{"matchLabels":{"mirror":"yes"}}}]}}`)
	createAs(t, dyn, crds.GitDestinations, &crds.GitDestination{ObjectMeta: metav1.ObjectMeta{Name: "by-ns", Namespace: ns},
		Spec: crds.GitDestinationSpec{RepoRef: crds.NamespacedReference{Name: "repo"}, Branch: "main", BaseFolder: "by-ns"}})
	createAs(t, dyn, crds.ClusterWatchRules, &crds.ClusterWatchRule{ObjectMeta: metav1.ObjectMeta{Name: "sel-by-ns"},
		Spec: crds.ClusterWatchRuleSpec{DestinationRef: crds.NamespacedReference{Name: "by-ns", Namespace: ns}, Rules: []crds.ClusterResourceRule{{
			ResourceRule: crds.ResourceRule{Resources: []string{"configmaps"}, ObjectSelector: &metav1.LabelSelector{
				MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "skip", Operator: metav1.LabelSelectorOpDoesNotExist}}}},
			Scope:             crds.ScopeNamespaced,
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"mirror-ns": "yes"}}}}}})
	t.Cleanup(func() {
		_ = dyn.Resource(crds.ClusterWatchRules).Delete(context.Background(), "sel-by-ns", metav1.DeleteOptions{})
	})

	d := startAttributingDaemon(t, "")
	waitRegistered(t, d, kube, ns)
	alice := userClient(cp.UserConfig("alice"))
	for _, cm := range []*corev1.ConfigMap{
		{ObjectMeta: metav1.ObjectMeta{Name: "plain", Namespace: ns}},
		{ObjectMeta: metav1.ObjectMeta{Name: "chosen", Namespace: ns, Labels: map[string]string{"mirror": "yes"}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "b1", Namespace: other}},
		{ObjectMeta: metav1.ObjectMeta{Name: "b2", Namespace: other, Labels: map[string]string{"skip": "1"}}},
	} {
		if _, err := alice.CoreV1().ConfigMaps(cm.Namespace).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	path := func(base, ns, name string) string { return fmt.Sprintf("%s/%s/configmaps/%s.yaml", base, ns, name) }

	// The objectSelector of the WatchRule.
	testenv.Eventually(t, time.Minute, "the labelled ConfigMap in Git", remoteHas(srv, path("live", ns, "chosen")), d.FailFast())
	if ok, _ := remoteHas(srv, path("live", ns, "plain"))(); ok {
		t.Errorf("a ConfigMap outside the objectSelector was written")
	}
	relabel(t, "carol", ns, "plain", `{"mirror":"yes"}`)
	testenv.Eventually(t, time.Minute, "relabelled in: written", remoteHas(srv, path("live", ns, "plain")), d.FailFast())
	if got := newestAuthor(t, srv, path("live", ns, "plain")); got != "carol" {
		t.Errorf("relabelled in: credited to %q, want carol", got)
	}
	relabel(t, "dave", ns, "chosen", `{"mirror":null}`)
	testenv.Eventually(t, time.Minute, "relabelled out: deleted", remoteLacks(srv, path("live", ns, "chosen")), d.FailFast())
	if got := newestAuthor(t, srv, path("live", ns, "chosen")); got != "dave" {
		t.Errorf("relabelled out: deleted by %q, want dave", got)
	}

	// The namespaceSelector of the ClusterWatchRule: nothing of sel-b until it is labelled.
	waitReadyReason(t, d, crds.ClusterWatchRules, "", "sel-by-ns", "Watching")
	if ok, _ := remoteHas(srv, path("by-ns", other, "b1"))(); ok {
		t.Errorf("a ConfigMap of a namespace outside the namespaceSelector was written")
	}
	labelNamespace(t, kube, other, `{"mirror-ns":"yes"}`)
	testenv.Eventually(t, time.Minute, "namespace relabelled in: its ConfigMap written", remoteHas(srv, path("by-ns", other, "b1")), d.FailFast())
	if ok, _ := remoteHas(srv, path("by-ns", other, "b2"))(); ok {
		t.Errorf("a ConfigMap outside the ClusterWatchRule's objectSelector was written")
	}
	// Its objectSelector, matched by the daemon: in and out, credited to whoever relabelled.
	relabel(t, "carol", other, "b2", `{"skip":null}`)
	testenv.Eventually(t, time.Minute, "b2 relabelled in", remoteHas(srv, path("by-ns", other, "b2")), d.FailFast())
	if got := newestAuthor(t, srv, path("by-ns", other, "b2")); got != "carol" {
		t.Errorf("b2 relabelled in: credited to %q, want carol", got)
	}
	relabel(t, "dave", other, "b1", `{"skip":"now"}`)
	testenv.Eventually(t, time.Minute, "b1 relabelled out", remoteLacks(srv, path("by-ns", other, "b1")), d.FailFast())
	if got := newestAuthor(t, srv, path("by-ns", other, "b1")); got != "dave" {
		t.Errorf("b1 relabelled out: deleted by %q, want dave", got)
	}
	labelNamespace(t, kube, other, `{"mirror-ns":null}`)
	testenv.Eventually(t, time.Minute, "namespace relabelled out: its ConfigMaps deleted", remoteLacks(srv, path("by-ns", other, "b2")), d.FailFast())
	if ok, _ := remoteHas(srv, path("live", ns, "plain"))(); !ok {
		t.Errorf("the WatchRule's files were disturbed")
	}
}

func labelNamespace(t *testing.T, kube kubernetes.Interface, ns, labels string) {
	t.Helper()
	if _, err := kube.CoreV1().Namespaces().Patch(context.Background(), ns, types.MergePatchType,
		[]byte(`{"metadata":{"labels":`+labels+`}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
}

// createAs creates one of our objects with dyn.
func createAs(t testing.TB, dyn dynamic.Interface, gvr schema.GroupVersionResource, obj any) {
	t.Helper()
	u, err := crds.ToUnstructured(obj)
	if err != nil {
		t.Fatal(err)
	}
	var res dynamic.ResourceInterface = dyn.Resource(gvr)
	if ns := u.GetNamespace(); ns != "" {
		res = dyn.Resource(gvr).Namespace(ns)
	}
	if _, err := res.Create(context.Background(), u, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}
