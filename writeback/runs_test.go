package writeback

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/configbutler/gitops-reverser/crds"
	"github.com/configbutler/gitops-reverser/gitops"
	"github.com/configbutler/gitops-reverser/layout"
	"github.com/configbutler/gitops-reverser/testenv"
)

// oursTrailer marks the commits a test pushes as the daemon's own (the mirror's).
const oursTrailer = "X-Test-Mirror: yes"

func isOurs(message string) bool { return strings.Contains(message, oursTrailer) }

var (
	alice  = testenv.Signature{Name: "Alice", Email: "alice@example.com"}
	mirror = testenv.Signature{Name: "gitops-reverser", Email: "bot@example.com"}
)

// runsEnv is a write-back destination whose repository people and the mirror push to, with a
// controller that runs only when the test asks (its interval is an hour) and the test's clock.
// The destination selects nothing, so every object file people push is refused.
type runsEnv struct {
	*wbEnv
	c     *Controller
	clock *testenv.Clock
}

// newRunsEnv starts the controller once the mirror made the first commit, and waits for the first
// run, which takes that commit as its baseline.
func newRunsEnv(t *testing.T) *runsEnv {
	t.Helper()
	return newRunsEnvSelecting(t, nil)
}

// newRunsEnvSelecting is newRunsEnv for a destination whose rules select sels.
func newRunsEnvSelecting(t *testing.T, sels []Selection) *runsEnv {
	t.Helper()
	r := &runsEnv{wbEnv: newWBEnv(t, &crds.WriteBack{Enabled: true}), clock: testenv.NewClock(time.Now())}
	base := r.push(true, map[string]string{"clusters/test/README.md": "mirrored\n"})
	pool := r.startPool()
	pool.SetRepositories([]gitops.Repository{{Name: r.ns + "/repo", URL: r.git.RepoURL("repo"),
		Credentials: gitops.Credentials{Auth: &githttp.BasicAuth{Username: r.git.Username, Password: r.git.Password}, Key: "test"}}})
	pool.SetWorkers([]gitops.Branch{{Repo: r.ns + "/repo", Branch: "main"}})
	cfg := Config{Kube: cp.AdminConfig(), Git: pool, Ours: isOurs, Interval: time.Hour, Log: slog.New(slog.DiscardHandler),
		Selections: func(string) []Selection { return sels }}
	r.c = r.start(cfg, func(c *Controller) { c.clock = r.clock.Now })
	r.waitRevision(base)
	return r
}

// push commits files to main: as the mirror when ours, else as alice.
func (r *runsEnv) push(ours bool, write map[string]string) string {
	r.t.Helper()
	who, message := alice, "edit by alice"
	if ours {
		who, message = mirror, "mirror\n\n"+oursTrailer
	}
	sha, err := r.git.PushCommit("repo", "main", who, message, write, nil)
	if err != nil {
		r.t.Fatal(err)
	}
	return sha
}

// destStatus is the write-back status of the destination, as the apiserver has it.
func (r *runsEnv) destStatus() crds.WriteBackStatus {
	r.t.Helper()
	u, err := r.dyn.Resource(crds.GitDestinations).Namespace(r.ns).Get(context.Background(), "dest", metav1.GetOptions{})
	if err != nil {
		r.t.Fatal(err)
	}
	d, err := crds.FromUnstructured[crds.GitDestination](u)
	if err != nil {
		r.t.Fatal(err)
	}
	if d.Status.WriteBack == nil {
		return crds.WriteBackStatus{}
	}
	return *d.Status.WriteBack
}

// waitRevision waits until a run took the destination to sha. A recorded run is written before
// the destination's status, so the SyncRuns are complete by then.
func (r *runsEnv) waitRevision(sha string) {
	r.t.Helper()
	testenv.Eventually(r.t, converge, "destination at "+short(sha), func() (bool, string) {
		got := r.destStatus().LastRevision
		return got == sha, "lastRevision " + got
	})
}

// runOn runs the destination for trigger and waits until the run took it to sha.
func (r *runsEnv) runOn(trigger, sha string) {
	r.t.Helper()
	r.c.SyncNow(r.ns, "dest", trigger)
	r.waitRevision(sha)
}

// runs lists the destination's SyncRuns, oldest first.
func (r *runsEnv) runs() []*crds.SyncRun {
	r.t.Helper()
	list, err := r.dyn.Resource(crds.SyncRuns).Namespace(r.ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		r.t.Fatal(err)
	}
	var out []*crds.SyncRun
	for i := range list.Items {
		run, err := crds.FromUnstructured[crds.SyncRun](&list.Items[i])
		if err != nil {
			r.t.Fatal(err)
		}
		out = append(out, run)
	}
	slices.SortFunc(out, crds.CompareSyncRuns)
	return out
}

// TestRefusedFilesMakeAPartialRunThatMovesOn: a person's commit with a Secret and a ConfigMap the
// destination does not select ends Partial, listing both refusals, with a Warning Event for each
// that names its path and reason. The next run starts after that commit and refuses nothing.
func TestRefusedFilesMakeAPartialRunThatMovesOn(t *testing.T) {
	r := newRunsEnv(t)
	secret := layout.Path("clusters/test", "", "secrets", r.ns, "creds")
	cm := layout.Path("clusters/test", "", "configmaps", r.ns, "settings")
	hostile := r.push(false, map[string]string{
		secret: "apiVersion: v1\nkind: Secret\nmetadata:\n  name: creds\n  namespace: " + r.ns + "\nstringData:\n  password: hunter2\n",
		cm:     "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\n  namespace: " + r.ns + "\ndata:\n  k: v\n",
	})
	r.runOn(crds.TriggerSyncNow, hostile)
	runs := r.runs()
	run := runs[len(runs)-1]
	want := map[string]string{secret: ReasonSecret, cm: ReasonNotSelected}
	got := map[string]string{}
	for _, f := range run.Status.Refused {
		got[f.Path] = f.Reason
	}
	if run.Status.Phase != crds.SyncRunPartial || run.Status.RefusedTotal != 2 || fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("run %s: phase %s, refused %d %v; want Partial, 2 %v", run.Name, run.Status.Phase, run.Status.RefusedTotal, got, want)
	}
	testenv.Eventually(t, converge, "a Refused Event for each file", func() (bool, string) {
		events, err := r.kube.CoreV1().Events(r.ns).List(context.Background(), metav1.ListOptions{FieldSelector: "involvedObject.name=" + run.Name})
		if err != nil {
			return false, err.Error()
		}
		var seen []string
		missing := 0
		for path, reason := range want {
			found := slices.ContainsFunc(events.Items, func(e corev1.Event) bool {
				return e.Type == corev1.EventTypeWarning && e.Reason == "Refused" &&
					strings.Contains(e.Message, path) && strings.Contains(e.Message, reason)
			})
			if !found {
				missing++
			}
		}
		for _, e := range events.Items {
			seen = append(seen, e.Reason+": "+e.Message)
		}
		return missing == 0, fmt.Sprintf("%d missing; events %q", missing, seen)
	})

	r.runOn(crds.TriggerSyncNow, hostile)
	testenv.Eventually(t, converge, "the next run recorded", func() (bool, string) {
		last := r.destStatus().LastSyncRun
		return last != run.Name, "lastSyncRun " + last
	})
	runs = r.runs()
	next := runs[len(runs)-1]
	if next.Status.Phase != crds.SyncRunSuccess || next.Status.RefusedTotal != 0 || next.Status.BaseRevision != hostile {
		t.Errorf("next run %s: phase %s, refused %d, base %s; want Success, 0, %s",
			next.Name, next.Status.Phase, next.Status.RefusedTotal, short(next.Status.BaseRevision), short(hostile))
	}
}

// TestIdleRunsAreRecordedAtMostHourly: runs that find only the mirror's own commits are recorded
// once per idleRunSpacing per destination, though each moves the destination on; a run a person
// asked for with sync-now always is.
func TestIdleRunsAreRecordedAtMostHourly(t *testing.T) {
	r := newRunsEnv(t)
	path := layout.Path("clusters/test", "", "configmaps", r.ns, "mirrored")
	mirrored := func(i int) string {
		return r.push(true, map[string]string{path: fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: mirrored\n  namespace: %s\ndata:\n  i: %q\n", r.ns, fmt.Sprint(i))})
	}
	recorded := len(r.runs()) // the first run, which set the baseline
	steps := []struct {
		what    string
		advance time.Duration
		trigger string
		new     int // SyncRuns it adds
	}{
		{"the first idle run", 0, crds.TriggerInterval, 1},
		{"an idle run within the hour", 0, crds.TriggerInterval, 0},
		{"an idle run an hour later", idleRunSpacing, crds.TriggerInterval, 1},
		{"an idle run a person asked for", 0, crds.TriggerSyncNow, 1},
		{"an idle run a receiver asked for within the hour", 0, crds.TriggerReceiver, 0},
	}
	for i, s := range steps {
		r.clock.Advance(s.advance)
		r.runOn(s.trigger, mirrored(i))
		runs := r.runs()
		if len(runs) != recorded+s.new {
			t.Fatalf("%s: %d SyncRuns, want %d", s.what, len(runs), recorded+s.new)
		}
		recorded = len(runs)
		if last := runs[len(runs)-1]; s.new > 0 && (last.Spec.Trigger != s.trigger || last.Status.Phase != crds.SyncRunSuccess) {
			t.Errorf("%s: trigger %s, phase %s", s.what, last.Spec.Trigger, last.Status.Phase)
		}
	}
}

// TestLabelSelectorsBoundWhatIsProposed: a destination whose rules select ConfigMaps labelled
// mirror=yes proposes a pushed file that carries the label and refuses, NotSelected, one that
// does not: a file the mirror would never hold cannot become a change of the cluster.
func TestLabelSelectorsBoundWhatIsProposed(t *testing.T) {
	r := newRunsEnvSelecting(t, []Selection{{GVR: schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, Kind: "ConfigMap",
		Namespaced: true, Labels: func(_ string, labels map[string]string) bool { return labels["mirror"] == "yes" }}})
	in := layout.Path("clusters/test", "", "configmaps", r.ns, "in")
	out := layout.Path("clusters/test", "", "configmaps", r.ns, "out")
	sha := r.push(false, map[string]string{
		in:  "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: in\n  namespace: " + r.ns + "\n  labels:\n    mirror: \"yes\"\ndata:\n  k: v\n",
		out: "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: out\n  namespace: " + r.ns + "\ndata:\n  k: v\n",
	})
	r.runOn(crds.TriggerSyncNow, sha)
	runs := r.runs()
	run := runs[len(runs)-1]
	if len(run.Status.Refused) != 1 || run.Status.Refused[0].Path != out || run.Status.Refused[0].Reason != ReasonNotSelected ||
		!strings.Contains(run.Status.Refused[0].Message, "labels") {
		t.Errorf("refused %+v; want only %s, NotSelected for its labels", run.Status.Refused, out)
	}
	if run.Status.ProposalsOpened != 1 {
		t.Errorf("opened %d proposals, want 1 (for %s)", run.Status.ProposalsOpened, in)
	}
}
