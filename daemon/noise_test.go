package daemon

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	"github.com/configbutler/gitops-reverser/crds"
	"github.com/configbutler/gitops-reverser/testenv"
)

// TestExcludedUsersAndFieldManagersMakeNoCommit runs the daemon with attribution: a change by a
// user the rule excludes (bob) makes no commit; a change alice makes through an excluded field
// manager makes none either, and the same change made by alice directly is committed and
// credited to her.
func TestExcludedUsersAndFieldManagersMakeNoCommit(t *testing.T) {
	cp := planes.Lend(t)
	const ns = "noise"
	ctx := context.Background()
	srv, kube := mirrorSetup(t, ns)
	grant(t, kube, ns, "alice", "bob")
	rules := `{"spec":{"rules":[{"resources":["configmaps"],"excludeUsers":["bob"],"excludeFieldManagers":["kustomize-controller"]}]}}`
	if _, err := dynamic.NewForConfigOrDie(cp.AdminConfig()).Resource(crds.WatchRules).Namespace(ns).Patch(ctx, "cms",
		types.MergePatchType, []byte(rules), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	d := startAttributingDaemon(t, "")
	waitRegistered(t, d, kube, ns)
	alice, bob := userClient(cp.UserConfig("alice")), userClient(cp.UserConfig("bob"))
	path := "live/" + ns + "/configmaps/app.yaml"
	remote := func() string {
		b, err := srv.ReadFile("state", "main", path)
		if err != nil {
			return ""
		}
		return string(b)
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: ns}, Data: map[string]string{"color": "blue"}}
	if _, err := alice.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, time.Minute, "alice's ConfigMap committed", func() (bool, string) {
		return strings.Contains(remote(), "color: blue"), remote()
	}, d.FailFast())
	markers := 0
	// marker has alice change another ConfigMap and waits for it in Git: the one watcher of
	// ConfigMaps handles events in order, so every change before it was handled by then.
	marker := func() {
		t.Helper()
		markers++
		m := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("marker-%d", markers), Namespace: ns}}
		if _, err := alice.CoreV1().ConfigMaps(ns).Create(ctx, m, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		testenv.Eventually(t, time.Minute, m.Name+" committed", remoteHas(srv, "live/"+ns+"/configmaps/"+m.Name+".yaml"), d.FailFast())
	}
	patch := func(client interface {
		Patch(context.Context, string, types.PatchType, []byte, metav1.PatchOptions, ...string) (*corev1.ConfigMap, error)
	}, color, manager string) {
		t.Helper()
		if _, err := client.Patch(ctx, "app", types.MergePatchType, []byte(`{"data":{"color":"`+color+`"}}`), metav1.PatchOptions{FieldManager: manager}); err != nil {
			t.Fatal(err)
		}
	}

	patch(bob.CoreV1().ConfigMaps(ns), "red", "")
	marker()
	if got := remote(); !strings.Contains(got, "color: blue") {
		t.Fatalf("bob's change was committed:\n%s", got)
	}
	// managedFields are stamped to the second: a change in the same second as bob's is not made
	// "only" by kustomize-controller, so the test waits for the apiserver's next second.
	last := newestManagedTime(t, kube.CoreV1().ConfigMaps(ns), "app")
	testenv.Eventually(t, 5*time.Second, "a second after the last change", func() (bool, string) {
		return time.Now().Truncate(time.Second).After(last), last.String()
	})
	patch(alice.CoreV1().ConfigMaps(ns), "green", "kustomize-controller")
	marker()
	if got := remote(); !strings.Contains(got, "color: blue") {
		t.Fatalf("the change through kustomize-controller was committed:\n%s", got)
	}
	patch(alice.CoreV1().ConfigMaps(ns), "yellow", "")
	testenv.Eventually(t, time.Minute, "alice's own change committed", func() (bool, string) {
		return strings.Contains(remote(), "color: yellow"), remote()
	}, d.FailFast())
	history, err := srv.History("state", "main")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range history { // newest first
		if _, ok := c.Files[path]; ok {
			if c.AuthorName != "alice" {
				t.Errorf("alice's change is credited to %q", c.AuthorName)
			}
			break
		}
	}
	for reason, want := range map[string]float64{crds.SkipReasonExcludedUser: 1, crds.SkipReasonExcludedFieldManager: 1} {
		if got := d.Metric(t, `gitops_reverser_changes_skipped_total{reason="`+reason+`"}`); got != want {
			t.Errorf("changes_skipped_total{%s} = %v, want %v", reason, got, want)
		}
	}
}

// newestManagedTime is the time of the newest managedFields entry of a ConfigMap.
func newestManagedTime(t *testing.T, client interface {
	Get(context.Context, string, metav1.GetOptions) (*corev1.ConfigMap, error)
}, name string) time.Time {
	t.Helper()
	cm, err := client.Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var newest time.Time
	for _, e := range cm.ManagedFields {
		if e.Time != nil && e.Time.After(newest) {
			newest = e.Time.Time
		}
	}
	return newest
}
