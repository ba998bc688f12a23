package daemon

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	"github.com/configbutler/gitops-reverser/crds"
	"github.com/configbutler/gitops-reverser/testenv"
)

// daemonNamespace is where the replicas' Pods and the Lease live in these tests.
const daemonNamespace = "gitops-reverser-system"

// replica is one daemon process of a replicated install, with the Pod it stands for.
type replica struct {
	*testenv.Daemon
	pod, health string
}

// startReplica runs a daemon with leader election on Lease lease, as Pod pod; timing holds extra
// flags (lease durations), the rest keeps the defaults.
func startReplica(t testing.TB, pod, lease string, extra ...string) *replica {
	t.Helper()
	health := testenv.FreeAddr(t)
	args := append([]string{"--leader-elect", "--leader-election-id", lease, "--pod-name", pod,
		"--health-probe-bind-address", health, "--git-batch-quiet-ms", "200"}, extra...)
	return &replica{Daemon: startDaemon(t, t.TempDir(), args...), pod: pod, health: health}
}

// waitLeading waits until r leads and watches.
func waitLeading(t testing.TB, r *replica, within time.Duration) {
	t.Helper()
	testenv.Eventually(t, within, r.pod+" leading", func() (bool, string) {
		leader, watches := r.Metric(t, "gitops_reverser_leader"), r.Metric(t, "gitops_reverser_watches")
		return leader == 1 && watches >= 1, fmt.Sprintf("leader %v, watches %v", leader, watches)
	}, r.FailFast())
}

// waitStandingBy waits until r is ready, says on /readyz that it stands by, and exports leader 0.
func waitStandingBy(t testing.TB, r *replica) {
	t.Helper()
	testenv.Eventually(t, time.Minute, r.pod+" standing by", func() (bool, string) {
		body := r.WaitForStatus(t, "http://"+r.health+"/readyz", http.StatusOK)
		leader := r.Metric(t, "gitops_reverser_leader")
		return strings.Contains(body, "standby: the leader is") && leader == 0, fmt.Sprintf("readyz %q, leader %v", body, leader)
	}, r.FailFast())
}

// replicaPods creates the Pods the replicas stand for (the apiserver keeps them without a
// kubelet), and the ServiceAccount admission needs for them.
func replicaPods(t testing.TB, kube kubernetes.Interface, names ...string) {
	t.Helper()
	ensureDaemonNamespace(t)
	ctx := context.Background()
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default", Namespace: daemonNamespace}}
	if _, err := kube.CoreV1().ServiceAccounts(daemonNamespace).Create(ctx, sa, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	for _, name := range names {
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: daemonNamespace, Labels: map[string]string{"app": "gitops-reverser"}},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "daemon", Image: "gitops-reverser:test"}}},
		}
		if _, err := kube.CoreV1().Pods(daemonNamespace).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = kube.CoreV1().Pods(daemonNamespace).Delete(context.Background(), name, metav1.DeleteOptions{})
		})
	}
}

// labelledLeader is a condition: exactly want carries the leader label among the replicas' Pods.
func labelledLeader(t testing.TB, kube kubernetes.Interface, want string) func() (bool, string) {
	return func() (bool, string) {
		pods, err := kube.CoreV1().Pods(daemonNamespace).List(context.Background(), metav1.ListOptions{LabelSelector: leaderLabel + "=true"})
		if err != nil {
			return false, err.Error()
		}
		var names []string
		for _, p := range pods.Items {
			names = append(names, p.Name)
		}
		return slices.Equal(names, []string{want}), fmt.Sprintf("labelled: %v", names)
	}
}

// remoteEqualsLive is a condition: the ConfigMaps of ns in the remote are exactly the live ones,
// with the live data.
func remoteEqualsLive(kube kubernetes.Interface, srv *testenv.GitServer, ns string) func() (bool, string) {
	return func() (bool, string) { return repoEqualsLive(kube, srv, "state", ns) }
}

// repoEqualsLive says whether the ConfigMaps of ns under live/ in the branch main of repo are
// exactly the live ones, with the live data, and if not, why.
func repoEqualsLive(kube kubernetes.Interface, srv *testenv.GitServer, repo, ns string) (bool, string) {
	live, err := kube.CoreV1().ConfigMaps(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		return false, err.Error()
	}
	prefix := "live/" + ns + "/configmaps/"
	files, err := srv.Files(repo, "main")
	if err != nil {
		return false, err.Error()
	}
	var inGit []string
	for _, f := range files {
		if strings.HasPrefix(f, prefix) {
			inGit = append(inGit, strings.TrimSuffix(strings.TrimPrefix(f, prefix), ".yaml"))
		}
	}
	var want []string
	for _, cm := range live.Items {
		want = append(want, cm.Name)
		raw, err := srv.ReadFile(repo, "main", prefix+cm.Name+".yaml")
		if err != nil {
			return false, fmt.Sprintf("%s not in Git", cm.Name)
		}
		var got corev1.ConfigMap
		if err := yaml.Unmarshal(raw, &got); err != nil {
			return false, err.Error()
		}
		if fmt.Sprint(got.Data) != fmt.Sprint(cm.Data) {
			return false, fmt.Sprintf("%s: Git has %v, live %v", cm.Name, got.Data, cm.Data)
		}
	}
	slices.Sort(inGit)
	slices.Sort(want)
	return slices.Equal(inGit, want), fmt.Sprintf("%d files in Git, %d live", len(inGit), len(want))
}

// instances lists the daemon processes that made the remote's commits, oldest first, one entry
// per run of consecutive commits by the same process (the X-ConfigButler-InstanceID trailer).
func instances(t testing.TB, srv *testenv.GitServer) []string {
	t.Helper()
	return instancesOf(t, srv, "state")
}

// tookTurns fails the test when a process committed again after another one had: replicas
// must take turns, never push side by side.
func tookTurns(t testing.TB, srv *testenv.GitServer) []string {
	t.Helper()
	runs := instances(t, srv)
	seen := map[string]bool{}
	for _, id := range runs {
		if seen[id] {
			t.Errorf("%s pushed again after another replica had led: commit runs %v", id, runs)
		}
		seen[id] = true
	}
	return runs
}

// TestStandbyTakesOverAfterSIGKILLAndSIGTERMWithNothingLost runs two replicas against one remote:
// the first leads and mirrors while the second stands by (ready, leader 0); the leader is killed
// with SIGKILL in the middle of a stream of creates and updates; the second takes over within the
// lease duration and a few seconds, relabels the Pods, and the remote ends equal to the live
// state. Attribution follows the leader. A graceful stop (SIGTERM) of the new leader hands over to
// a third process much faster. Both takeover times are printed.
func TestStandbyTakesOverAfterSIGKILLAndSIGTERMWithNothingLost(t *testing.T) {
	cp := planes.Lend(t)
	ns := "failover"
	srv, kube := mirrorSetup(t, ns)
	grant(t, kube, ns, "alice")
	replicaPods(t, kube, "replica-a", "replica-b")
	const lease = "failover-leader"
	leaseDuration := 15 * time.Second // the default

	a := startReplica(t, "replica-a", lease)
	waitLeading(t, a, time.Minute)
	b := startReplica(t, "replica-b", lease)
	waitStandingBy(t, b)
	testenv.Eventually(t, time.Minute, "replica-a labelled", labelledLeader(t, kube, "replica-a"), a.FailFast())

	// A stream of creates and updates, paced so that it spans the failover.
	ctx := context.Background()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var streamErr error
	wg.Go(func() {
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("s-%03d", i), Namespace: ns}, Data: map[string]string{"v": "1"}}
			if _, err := kube.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
				streamErr = err
				return
			}
			if i > 0 {
				patch := fmt.Appendf(nil, `{"data":{"v":"%d"}}`, i+1)
				if _, err := kube.CoreV1().ConfigMaps(ns).Patch(ctx, fmt.Sprintf("s-%03d", i-1), types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
					streamErr = err
					return
				}
			}
		}
	})
	testenv.Eventually(t, time.Minute, "replica-a pushing the stream", metricAtLeast(t, a.Daemon, "gitops_reverser_objects_written_total", 10), a.FailFast())
	a.Kill(t)
	killed := time.Now()
	waitLeading(t, b, leaseDuration+30*time.Second)
	afterKill := time.Since(killed)
	testenv.Eventually(t, time.Minute, "replica-b writing the stream", metricAtLeast(t, b.Daemon, "gitops_reverser_objects_written_total", 10), b.FailFast())
	close(stop)
	wg.Wait()
	if streamErr != nil {
		t.Fatal(streamErr)
	}
	testenv.Eventually(t, time.Minute, "remote equal to the live state", remoteEqualsLive(kube, srv, ns), b.FailFast())
	testenv.Eventually(t, time.Minute, "replica-b labelled, the dead leader's label removed", labelledLeader(t, kube, "replica-b"), b.FailFast())

	// Attribution through the new leader: its webhook is the registered one now.
	waitRegistered(t, b.Daemon, kube, ns)
	alice := userClient(cp.UserConfig("alice"))
	byAlice := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "by-alice", Namespace: ns}, Data: map[string]string{"v": "1"}}
	if _, err := alice.CoreV1().ConfigMaps(ns).Create(ctx, byAlice, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, time.Minute, "alice credited through replica-b", func() (bool, string) {
		author := authorOf(t, srv, "by-alice")
		return author == "alice", "author " + author
	}, b.FailFast())

	// A graceful stop hands over without waiting for the lease to expire; the change made just
	// before it is not lost.
	a2 := startReplica(t, "replica-a", lease)
	waitStandingBy(t, a2)
	last := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "last-before-sigterm", Namespace: ns}, Data: map[string]string{"v": "1"}}
	if _, err := kube.CoreV1().ConfigMaps(ns).Create(ctx, last, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	b.Signal(t, syscall.SIGTERM)
	termed := time.Now()
	waitLeading(t, a2, leaseDuration+30*time.Second)
	afterTerm := time.Since(termed)
	if err := b.Wait(t, time.Minute); err != nil {
		t.Errorf("replica-b after SIGTERM: %v", err)
	}
	testenv.Eventually(t, time.Minute, "remote equal to the live state after the handover", remoteEqualsLive(kube, srv, ns), a2.FailFast())
	testenv.Eventually(t, time.Minute, "replica-a labelled again", labelledLeader(t, kube, "replica-a"), a2.FailFast())
	runs := tookTurns(t, srv)
	t.Logf("takeover after SIGKILL: %s, after SIGTERM: %s (lease duration %s); commit runs by process: %v",
		afterKill.Round(100*time.Millisecond), afterTerm.Round(100*time.Millisecond), leaseDuration, runs)
}

// TestDeposedLeaderPushesNothing pauses the leader (SIGSTOP) while it holds commits it could not
// push, past its lease; the standby takes over and writes the newer live state; when the old
// leader resumes (SIGCONT) its push is fenced: it pushes nothing, the newer state stays, and it
// stands by again.
func TestDeposedLeaderPushesNothing(t *testing.T) {
	planes.Lend(t)
	ns := "fence"
	srv, kube := mirrorSetup(t, ns)
	replicaPods(t, kube, "fence-a", "fence-b")
	const lease = "fence-leader"
	short := []string{"--leader-election-lease-duration", "4s", "--leader-election-renew-deadline", "3s", "--leader-election-retry-period", "1s"}
	a := startReplica(t, "fence-a", lease, short...)
	waitLeading(t, a, time.Minute)
	b := startReplica(t, "fence-b", lease, short...)
	waitStandingBy(t, b)

	ctx := context.Background()
	set := func(name, v string) {
		t.Helper()
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Data: map[string]string{"v": v}}
		if _, err := kube.CoreV1().ConfigMaps(ns).Update(ctx, cm, metav1.UpdateOptions{}); apierrors.IsNotFound(err) {
			_, err = kube.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
		} else if err != nil {
			t.Fatal(err)
		}
	}
	set("before", "1")
	testenv.Eventually(t, time.Minute, "replica a pushing", remoteHas(srv, "live/"+ns+"/configmaps/before.yaml"), a.FailFast())
	leaderA := instances(t, srv)

	// The remote goes away: the leader holds a commit of contested=1 it cannot push.
	srv.SetAvailable(false)
	set("contested", "1")
	testenv.Eventually(t, time.Minute, "replica a failing to push", metricAtLeast(t, a.Daemon, "gitops_reverser_push_failures_total", 1), a.FailFast())
	a.Signal(t, syscall.SIGSTOP)
	srv.SetAvailable(true)
	set("contested", "2")
	waitLeading(t, b, time.Minute)
	testenv.Eventually(t, time.Minute, "replica b writing the newer state", remoteEqualsLive(kube, srv, ns), b.FailFast())

	// Resumed, the old leader finds its lease gone and stands by; it made its last push attempt
	// before it said so.
	a.Signal(t, syscall.SIGCONT)
	waitStandingBy(t, a)
	if ok, why := remoteEqualsLive(kube, srv, ns)(); !ok {
		t.Errorf("the deposed leader changed the remote: %s", why)
	}
	runs := tookTurns(t, srv)
	if len(leaderA) != 1 || len(runs) != 2 || runs[0] != leaderA[0] {
		t.Errorf("commit runs by process = %v, want replica a's (%v) then replica b's only", runs, leaderA)
	}
	if fenced := a.Metric(t, "gitops_reverser_pushes_fenced_total"); fenced < 1 {
		t.Errorf("replica a pushes_fenced_total = %v: it never tried to push, the test proves nothing", fenced)
	}
	testenv.Eventually(t, time.Minute, "replica b labelled", labelledLeader(t, kube, "fence-b"), b.FailFast())
}

// TestDeposedLeaderAppliesNothing: carol approves a proposal while its leader is paused (SIGSTOP)
// past its lease and the standby leads; the standby's write-back is halted, so it applies nothing
// itself. Resumed, the old leader sees the approval before it learns it was deposed: its apply is
// fenced and counted, the ConfigMap keeps its data, and the proposal keeps its decision for the
// leader. The old leader stands by again.
func TestDeposedLeaderAppliesNothing(t *testing.T) {
	planes.Lend(t)
	w := prepareWBWorld(t, "fence-wb", crds.WriteBack{Enabled: true})
	replicaPods(t, w.kube, "fence-wb-a", "fence-wb-b")
	w.reviewers("carol")
	grant(t, w.kube, w.ns, "carol")
	const lease = "fence-wb-leader"
	// A renew deadline of 4s: what the resumed leader has to see the approval before it steps down.
	short := []string{"--leader-election-lease-duration", "5s", "--leader-election-renew-deadline", "4s", "--leader-election-retry-period", "1s"}
	a := startReplica(t, "fence-wb-a", lease, short...)
	waitLeading(t, a, time.Minute)
	w.d = a.Daemon
	w.waitBaseline(true)
	b := startReplica(t, "fence-wb-b", lease, append(short, "--halt-write-back")...)
	waitStandingBy(t, b)
	path, p := w.pendingEdit("contested")

	a.Signal(t, syscall.SIGSTOP)
	waitLeading(t, b, time.Minute)
	w.d = b.Daemon
	waitRegistered(t, b.Daemon, w.kube, w.ns) // so b's webhook sees who approves
	w.decide("carol", p, crds.DecisionApprove)
	w.waitProposal(path, "the approval held by b's kill switch", appliedReason(p, "Halted"))

	a.Signal(t, syscall.SIGCONT)
	testenv.Eventually(t, time.Minute, "replica a's apply fenced",
		metricAtLeast(t, a.Daemon, "gitops_reverser_writeback_applies_fenced_total", 1), a.FailFast())
	waitStandingBy(t, a)
	if got := w.liveColor("contested"); got != "blue" {
		t.Errorf("the deposed leader applied the proposal: color %q", got)
	}
	if v := a.Metric(t, `gitops_reverser_proposals_applied_total{mode="approved"}`); v != 0 {
		t.Errorf("replica a proposals_applied_total{mode=approved} = %v", v)
	}
	p = w.waitProposal(path, "the proposal", func(q *crds.Proposal) bool { return q.Name == p.Name })
	if c := conditionOf(p, crds.ConditionApplied); p.Status.Phase != crds.PhasePending || p.Spec.Decision != crds.DecisionApprove ||
		p.Status.AppliedAt != nil || c == nil || c.Reason != "Halted" {
		t.Errorf("after the fenced apply: phase %s, decision %q, appliedAt %v, condition %+v; want it as b left it", p.Status.Phase,
			p.Spec.Decision, p.Status.AppliedAt, c)
	}
}
