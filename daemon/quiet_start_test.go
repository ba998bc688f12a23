package daemon

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/configbutler/gitops-reverser/crds"
	"github.com/configbutler/gitops-reverser/testenv"
)

// TestLargeSeedStartsQuietly starts the daemon on 2,500 ConfigMaps, more than a worker's queue
// holds before it merges waiting changes, with write-back enabled on the destination: the seed
// reaches the remote, and the daemon logs no warning and raises no Warning Event on the way.
func TestLargeSeedStartsQuietly(t *testing.T) {
	cp := planes.Lend(t)
	const ns, objects = "quiet-start", 2500
	m := newMirrorBench(t, ns)
	ctx := context.Background()
	dyn := dynamic.NewForConfigOrDie(cp.AdminConfig())
	patch := `{"spec":{"writeBack":{"enabled":true}}}`
	if _, err := dyn.Resource(crds.GitDestinations).Namespace(ns).Patch(ctx, "dest", types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	m.create(0, objects)

	start := time.Now()
	d := startDaemon(t, t.TempDir(), "--log-format", "json")
	m.converged(start)
	// Write-back looks at the destination once the mirror's worker runs: wait for that, so its
	// warnings would be seen too. (On a branch the mirror has not pushed to yet it records only
	// the time, and its first SyncRun comes at the next interval.)
	testenv.Eventually(t, time.Minute, "write-back's first look at the destination", func() (bool, string) {
		u, err := dyn.Resource(crds.GitDestinations).Namespace(ns).Get(ctx, "dest", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		at, _, _ := unstructured.NestedString(u.Object, "status", "writeBack", "lastSyncTime")
		return at != "", "no status.writeBack.lastSyncTime yet"
	}, d.FailFast())

	for _, line := range strings.Split(d.Output(), "\n") {
		var rec struct{ Level, Msg string }
		if json.Unmarshal([]byte(line), &rec) == nil && (rec.Level == "WARN" || rec.Level == "ERROR") {
			t.Errorf("a normal start logged %s %q: %s", rec.Level, rec.Msg, line)
		}
	}
	events, err := kubernetes.NewForConfigOrDie(cp.AdminConfig()).CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "type=" + corev1.EventTypeWarning})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range events.Items {
		t.Errorf("a normal start raised a Warning Event: %s %s/%s: %s", e.Reason, e.InvolvedObject.Kind, e.InvolvedObject.Name, e.Message)
	}
}
