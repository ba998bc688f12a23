package notify

import (
	"os"
	"testing"

	"github.com/configbutler/gitops-reverser/testenv"
)

// cp is the package's control plane: one real etcd and kube-apiserver that the notifier reads
// its NotifyChannels, NotifyRules, Secrets and Proposals from.
var cp *testenv.ControlPlane

// TestMain runs the tests against one control plane, then checks that every notifier, channel
// goroutine and test server a test started was joined.
func TestMain(m *testing.M) {
	os.Exit(testenv.RunMainNoLeaks(m, &cp, testenv.LeakIgnores()...))
}
