package daemon

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
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
	const ns, objects = "quiet-start", 2500
	srv, kube := mirrorSetup(t, ns)
	ctx := context.Background()
	dyn := dynamic.NewForConfigOrDie(cp.AdminConfig())
	patch := `{"spec":{"writeBack":{"enabled":true}}}`
	if _, err := dyn.Resource(crds.GitDestinations).Namespace(ns).Patch(ctx, "dest", types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	createConfigMaps(t, kube, ns, objects)

	d := startDaemon(t, t.TempDir(), "--log-format", "json")
	testenv.Eventually(t, 3*time.Minute, "every ConfigMap on the remote", func() (bool, string) {
		files, err := srv.Files("state", "main")
		if err != nil {
			return false, err.Error()
		}
		n := 0
		for _, f := range files {
			if strings.HasPrefix(f, "live/"+ns+"/configmaps/cm-") {
				n++
			}
		}
		return n == objects, fmt.Sprintf("%d of %d", n, objects)
	}, d.FailFast())
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
	events, err := kube.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "type=" + corev1.EventTypeWarning})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range events.Items {
		t.Errorf("a normal start raised a Warning Event: %s %s/%s: %s", e.Reason, e.InvolvedObject.Kind, e.InvolvedObject.Name, e.Message)
	}
}

// createConfigMaps creates ConfigMaps cm-00000… of about 1 KiB each, eight at a time.
func createConfigMaps(t *testing.T, kube kubernetes.Interface, ns string, n int) {
	t.Helper()
	next := make(chan int)
	errs := make(chan error, 8)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for i := range next {
				cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%05d", i), Namespace: ns},
					Data: map[string]string{"payload": strings.Repeat(fmt.Sprintf("%05d ", i), 170)}}
				if _, err := kube.CoreV1().ConfigMaps(ns).Create(context.Background(), cm, metav1.CreateOptions{}); err != nil {
					select { // the first error is enough; keep taking work so the feeder never blocks
					case errs <- err:
					default:
					}
				}
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		t.Fatal(err)
	}
}
