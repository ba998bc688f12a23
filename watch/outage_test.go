package watch

import (
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/configbutler/gitops-reverser/crds"
	"github.com/configbutler/gitops-reverser/testenv"
)

// TestRemoteOutageConvergesWithoutFurtherChanges takes the Git server down, changes the cluster,
// brings the server back, and expects the remote to catch up with no further cluster change: the
// worker retries on its own.
func TestRemoteOutageConvergesWithoutFurtherChanges(t *testing.T) {
	e := newEnv(t)
	e.watchRule("cms", "configmaps")
	e.startManager()
	e.configMap("before", map[string]string{"k": "v"})
	e.waitFiles(e.cmPath("before"))

	gitSrv.SetAvailable(false)
	defer gitSrv.SetAvailable(true)
	var want []string
	for i := range 5 {
		name := fmt.Sprintf("during-%d", i)
		e.configMap(name, map[string]string{"i": fmt.Sprint(i)})
		want = append(want, e.cmPath(name))
	}
	testenv.Eventually(e.t, time.Minute, "push failures are counted", func() (bool, string) {
		got, _ := e.reg.Gather()
		return got["gitops_reverser_push_failures_total"] > 0, fmt.Sprint(got["gitops_reverser_push_failures_total"])
	})
	testenv.Eventually(e.t, time.Minute, "the destination reports the failing push", func() (bool, string) {
		c := e.readyCondition(crds.GitDestinations, e.ns, "dest")
		return c != nil && c.Reason == "PushFailing", fmt.Sprintf("%+v", c)
	})
	gitSrv.SetAvailable(true)
	e.waitFiles(append(want, e.cmPath("before"))...)
	testenv.Eventually(e.t, time.Minute, "the destination is ready again", func() (bool, string) {
		c := e.readyCondition(crds.GitDestinations, e.ns, "dest")
		return c != nil && c.Status == metav1.ConditionTrue, fmt.Sprintf("%+v", c)
	})
}
