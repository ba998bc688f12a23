package watch

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/configbutler/gitops-reverser/crds"
	"github.com/configbutler/gitops-reverser/testenv"
)

// statusDeadline is how soon a destination's status must follow its worker: a matter of
// seconds, whatever --discovery-refresh says (these tests use 5 minutes, as in production).
const statusDeadline = 10 * time.Second

// TestPushFailureIsReportedWithinSeconds: with a five-minute discovery refresh, a remote going
// down turns the destination's Ready condition False (PushFailing) within seconds, and True
// again once the remote is back and the change landed.
func TestPushFailureIsReportedWithinSeconds(t *testing.T) {
	e := newEnv(t)
	e.watchRule("cms", "configmaps")
	e.startManagerWith(5 * time.Minute)
	e.configMap("before", map[string]string{"k": "v"})
	e.waitFiles(e.cmPath("before"))
	testenv.Eventually(t, time.Minute, "the destination ready", func() (bool, string) {
		c := e.readyCondition(crds.GitDestinations, e.ns, "dest")
		return c != nil && c.Status == metav1.ConditionTrue, fmt.Sprintf("%+v", c)
	})

	gitSrv.SetAvailable(false)
	defer gitSrv.SetAvailable(true)
	e.configMap("during", map[string]string{"k": "v"})
	testenv.Eventually(t, statusDeadline, "Ready False with PushFailing", func() (bool, string) {
		c := e.readyCondition(crds.GitDestinations, e.ns, "dest")
		return c != nil && c.Status == metav1.ConditionFalse && c.Reason == "PushFailing", fmt.Sprintf("%+v", c)
	})
	gitSrv.SetAvailable(true)
	testenv.Eventually(t, statusDeadline+time.Minute, "the change to land", func() (bool, string) {
		return slices.Contains(e.files(), e.cmPath("during")), fmt.Sprint(e.files())
	})
	testenv.Eventually(t, statusDeadline, "Ready True again", func() (bool, string) {
		c := e.readyCondition(crds.GitDestinations, e.ns, "dest")
		return c != nil && c.Status == metav1.ConditionTrue, fmt.Sprintf("%+v", c)
	})
}

// TestFixedCredentialsAreFollowedWithinSeconds: a GitRepoConfig whose Secret holds a wrong
// password is reported; fixing the Secret is picked up within seconds (the Secret is watched),
// not at the next refresh, and the changes made meanwhile land.
func TestFixedCredentialsAreFollowedWithinSeconds(t *testing.T) {
	e := newEnv(t)
	secrets := e.kube.CoreV1().Secrets(e.ns)
	wrong := `{"stringData":{"password":"wrong"}}`
	if _, err := secrets.Patch(e.ctx, "git", types.MergePatchType, []byte(wrong), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	e.watchRule("cms", "configmaps")
	e.startManagerWith(5 * time.Minute)
	e.configMap("waiting", map[string]string{"k": "v"})
	testenv.Eventually(t, time.Minute, "the repository reported unreachable", func() (bool, string) {
		c := e.readyCondition(crds.GitRepoConfigs, e.ns, "repo")
		return c != nil && c.Reason == "Unreachable" && strings.Contains(c.Message, "authentication required"), fmt.Sprintf("%+v", c)
	})

	fixed := fmt.Sprintf(`{"stringData":{"password":%q}}`, gitSrv.Password)
	if _, err := secrets.Patch(e.ctx, "git", types.MergePatchType, []byte(fixed), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, statusDeadline, "the fixed Secret followed", func() (bool, string) {
		return slices.Contains(e.files(), e.cmPath("waiting")), fmt.Sprint(e.files())
	})
	testenv.Eventually(t, statusDeadline, "the repository and destination ready", func() (bool, string) {
		r := e.readyCondition(crds.GitRepoConfigs, e.ns, "repo")
		d := e.readyCondition(crds.GitDestinations, e.ns, "dest")
		return r != nil && r.Status == metav1.ConditionTrue && d != nil && d.Status == metav1.ConditionTrue,
			fmt.Sprintf("repo %+v, destination %+v", r, d)
	})
}

// TestDeadRemoteDoesNotHoldUpAnotherDestination: two destinations on two remotes share one
// watched resource. One remote hangs (accepts connections, never answers) while thousands of
// changes stream in, far more than any queue would hold. The other destination
// keeps receiving every change, the watch is never stalled into a re-list, and the hung remote
// catches up once it answers again.
func TestDeadRemoteDoesNotHoldUpAnotherDestination(t *testing.T) {
	e := newEnv(t)
	dead := testenv.MustGitServer(t, gitSrv.Username, gitSrv.Password, "dead")
	e.apply(crds.GitRepoConfigs, &crds.GitRepoConfig{ObjectMeta: metav1.ObjectMeta{Name: "dead-repo", Namespace: e.ns},
		Spec: crds.GitRepoConfigSpec{RepoURL: dead.RepoURL("dead"), AllowedBranches: []string{"main"},
			SecretRef: &crds.LocalReference{Name: "git"}}})
	e.apply(crds.GitDestinations, &crds.GitDestination{ObjectMeta: metav1.ObjectMeta{Name: "dead-dest", Namespace: e.ns},
		Spec: crds.GitDestinationSpec{RepoRef: crds.NamespacedReference{Name: "dead-repo"}, Branch: "main", BaseFolder: baseFolder}})
	e.watchRule("cms", "configmaps")
	e.apply(crds.WatchRules, &crds.WatchRule{ObjectMeta: metav1.ObjectMeta{Name: "cms-dead", Namespace: e.ns},
		Spec: crds.WatchRuleSpec{DestinationRef: crds.NamespacedReference{Name: "dead-dest"},
			Rules: []crds.ResourceRule{{Resources: []string{"configmaps"}}}}})
	e.startManager()

	const objects = 20
	for i := range objects {
		e.configMap(fmt.Sprintf("cm-%02d", i), map[string]string{"v": "0"})
	}
	want := func() []string {
		var out []string
		for i := range objects {
			out = append(out, e.cmPath(fmt.Sprintf("cm-%02d", i)))
		}
		return out
	}()
	e.waitFiles(want...)
	deadFiles := func() []string { files, _ := dead.Files("dead", "main"); return files }
	testenv.Eventually(t, time.Minute, "the second remote seeded", func() (bool, string) {
		return len(deadFiles()) == len(want), fmt.Sprint(deadFiles())
	})

	dead.SetHanging(true)
	defer dead.SetHanging(false)
	cms := e.kube.CoreV1().ConfigMaps(e.ns)
	update := func(i, round int) {
		patch := fmt.Sprintf(`{"data":{"v":"%d"}}`, round)
		if _, err := cms.Patch(e.ctx, fmt.Sprintf("cm-%02d", i%objects), types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	var latencies []time.Duration
	changes := 0
	// Enough changes to overflow a 1,024-change queue four times over, within a minute at most.
	for start := time.Now(); changes < 4096 && time.Since(start) < time.Minute; {
		for i := range 100 {
			update(i, changes/objects+1)
			changes++
		}
		// Every object's latest value must reach the live remote while the other one hangs.
		wrote := time.Now()
		last := changes - 1
		path := e.cmPath(fmt.Sprintf("cm-%02d", last%objects))
		testenv.Eventually(t, time.Minute, "the live remote to keep up", func() (bool, string) {
			got := e.remoteContent(path)
			return strings.Contains(got, fmt.Sprintf(`v: "%d"`, last/objects+1)), got
		})
		latencies = append(latencies, time.Since(wrote))
	}
	slices.Sort(latencies)
	t.Logf("%d changes while the other remote hung; live remote caught up after each 100 in %v median, %v max",
		changes, latencies[len(latencies)/2], latencies[len(latencies)-1])
	if changes <= 1024 {
		t.Fatalf("only %d changes during the hang: the test must exceed a 1,024-change queue to prove anything", changes)
	}
	got, err := e.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	if n := got["gitops_reverser_relists_total"]; n != 0 {
		t.Errorf("the watch was re-listed %v times: a stalled sink held it up", n)
	}

	dead.SetHanging(false)
	testenv.Eventually(t, 2*time.Minute, "the hung remote to catch up", func() (bool, string) {
		for i := range objects {
			name := fmt.Sprintf("cm-%02d", i)
			live, err := cms.Get(e.ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			content, _ := dead.ReadFile("dead", "main", baseFolder+"/"+e.cmPath(name))
			if !strings.Contains(string(content), fmt.Sprintf(`v: "%s"`, live.Data["v"])) {
				return false, fmt.Sprintf("%s: %s, live %s", name, content, live.Data["v"])
			}
		}
		return true, ""
	})
}
