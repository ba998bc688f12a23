package daemon

import (
	"context"
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/configbutler/gitops-reverser/crds"
	"github.com/configbutler/gitops-reverser/testenv"
)

// TestDestinationStatusShowsTheLastPush: a destination's status.git follows its Git worker, so
// `kubectl get -o yaml` and the CLI's status show the last pushed commit, its author and what
// waits, without access to the daemon.
func TestDestinationStatusShowsTheLastPush(t *testing.T) {
	planes.Lend(t)
	w := newWBWorld(t, "git-progress", crds.WriteBack{}, nil)
	w.configMap("pushed", map[string]string{"k": "v"})
	testenv.Eventually(t, time.Minute, "status.git names the remote's tip", func() (bool, string) {
		log, err := w.srv.Log("state", "main")
		if err != nil {
			return false, err.Error()
		}
		u, err := w.dyn.Resource(crds.GitDestinations).Namespace(w.ns).Get(context.Background(), "dest", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		d, err := crds.FromUnstructured[crds.GitDestination](u)
		if err != nil {
			return false, err.Error()
		}
		g := d.Status.Git
		if g == nil {
			return false, "no status.git"
		}
		ok := g.LastPushedCommit == log[0].SHA && g.LastPushTime != nil && g.LastPushAuthor != "" && g.Pending == 0 && g.LastError == ""
		return ok, fmt.Sprintf("status.git %+v, tip %s", *g, log[0].SHA)
	}, w.d.FailFast())
}
