package watch

import (
	"fmt"
	"testing"
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
	e.eventually("push failures are counted", func() (bool, string) {
		got, _ := e.reg.Gather()
		return got["gitops_reverser_push_failures_total"] > 0, fmt.Sprint(got["gitops_reverser_push_failures_total"])
	})
	gitSrv.SetAvailable(true)
	e.waitFiles(append(want, e.cmPath("before"))...)
}
