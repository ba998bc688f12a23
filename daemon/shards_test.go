package daemon

import (
	"context"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/configbutler/gitops-reverser/crds"
	"github.com/configbutler/gitops-reverser/shard"
	"github.com/configbutler/gitops-reverser/testenv"
)

// shardTimings are the Lease timings of the sharding tests: short, so a takeover after a SIGKILL
// takes seconds, within the bounds the flags allow.
var shardTimings = []string{"--leader-election-lease-duration", "6s", "--leader-election-renew-deadline", "4s",
	"--leader-election-retry-period", "1s"}

const shardLeases = "shards-test"

// shardedSetup makes n destinations, each with a repository of its own on one Git server, its own
// namespace and a WatchRule of its ConfigMaps, and two ConfigMaps in each namespace.
func shardedSetup(t *testing.T, n int) (*testenv.GitServer, *kubernetes.Clientset, []string) {
	t.Helper()
	cp := planes.Of(t)
	ctx := context.Background()
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("shard-%02d", i)
	}
	srv := testenv.MustGitServer(t, "daemon", "pw", names...)
	kube := kubernetes.NewForConfigOrDie(cp.AdminConfig())
	dyn := dynamic.NewForConfigOrDie(cp.AdminConfig())
	if err := crds.Install(ctx, cp.AdminConfig(), discardLogger()); err != nil {
		t.Fatal(err)
	}
	for _, ns := range names {
		if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "git", Namespace: ns}, StringData: map[string]string{"username": "daemon", "password": "pw"}}
		if _, err := kube.CoreV1().Secrets(ns).Create(ctx, secret, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		for _, o := range []struct {
			gvr schema.GroupVersionResource
			obj any
		}{
			{crds.GitRepoConfigs, &crds.GitRepoConfig{ObjectMeta: metav1.ObjectMeta{Name: "repo", Namespace: ns},
				Spec: crds.GitRepoConfigSpec{RepoURL: srv.RepoURL(ns), AllowedBranches: []string{"main"}, SecretRef: &crds.LocalReference{Name: "git"}}}},
			{crds.GitDestinations, &crds.GitDestination{ObjectMeta: metav1.ObjectMeta{Name: "dest", Namespace: ns},
				Spec: crds.GitDestinationSpec{RepoRef: crds.NamespacedReference{Name: "repo"}, Branch: "main", BaseFolder: "live"}}},
			{crds.WatchRules, &crds.WatchRule{ObjectMeta: metav1.ObjectMeta{Name: "cms", Namespace: ns},
				Spec: crds.WatchRuleSpec{DestinationRef: crds.NamespacedReference{Name: "dest"}, Rules: []crds.ResourceRule{{Resources: []string{"configmaps"}}}}}},
		} {
			u, err := crds.ToUnstructured(o.obj)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := dyn.Resource(o.gvr).Namespace(ns).Create(ctx, u, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		for j := range 2 {
			cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%d", j), Namespace: ns}, Data: map[string]string{"v": "1"}}
			if _, err := kube.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	t.Cleanup(func() {
		for _, ns := range names {
			_ = kube.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{})
		}
	})
	return srv, kube, names
}

// startShardReplica runs a replica that shares the destinations (--shards=auto) with the others
// of the leader election Lease lease.
func startShardReplica(t testing.TB, pod, lease string) *replica {
	t.Helper()
	return startReplica(t, pod, lease, append([]string{"--shards", "auto"}, shardTimings...)...)
}

var ownsLine = regexp.MustCompile(`(?m)^shards: (\S+) owns (\d+) of (\d+) \((\d+) replicas\)`)

// shardsOf reads what a replica's /readyz says of its shards: its identity and how many it owns
// of how many, and how many replicas it sees.
func shardsOf(t testing.TB, r *replica) (identity string, owned, of, replicas int) {
	t.Helper()
	body := r.WaitForStatus(t, "http://"+r.health+"/readyz", http.StatusOK)
	m := ownsLine.FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("%s: /readyz says nothing of shards: %q", r.pod, body)
	}
	owned, _ = strconv.Atoi(m[2])
	of, _ = strconv.Atoi(m[3])
	replicas, _ = strconv.Atoi(m[4])
	return m[1], owned, of, replicas
}

// sharedAs is a condition: the replicas own want shards of n (in any order; each sees len(rs)
// replicas).
func sharedAs(t testing.TB, n int, rs []*replica, want ...int) func() (bool, string) {
	want = slices.Sorted(slices.Values(want))
	return func() (bool, string) {
		var got []string
		var counts []int
		ok := true
		for _, r := range rs {
			_, owned, of, replicas := shardsOf(t, r)
			ok = ok && of == n && replicas == len(rs)
			counts = append(counts, owned)
			got = append(got, fmt.Sprintf("%s owns %d of %d (%d replicas)", r.pod, owned, of, replicas))
		}
		slices.Sort(counts)
		return ok && slices.Equal(counts, want), strings.Join(got, "; ")
	}
}

// allEqualLive is a condition: every destination's remote holds exactly its namespace's live ConfigMaps.
func allEqualLive(kube kubernetes.Interface, srv *testenv.GitServer, names []string) func() (bool, string) {
	return func() (bool, string) {
		for _, ns := range names {
			if ok, why := repoEqualsLive(kube, srv, ns, ns); !ok {
				return false, ns + ": " + why
			}
		}
		return true, ""
	}
}

// ownersOf reads status.git.owner of every destination.
func ownersOf(t *testing.T, names []string) map[string]string {
	t.Helper()
	dyn := dynamic.NewForConfigOrDie(planes.Of(t).AdminConfig())
	out := map[string]string{}
	for _, ns := range names {
		if d := destination(t, dyn, ns, "dest"); d.Status.Git != nil {
			out[ns] = d.Status.Git.Owner
		}
	}
	return out
}

// TestShardsSharedOutTakenOverAndHandedOver runs three replicas with --shards=auto over twelve
// destinations, each on a repository of its own: they share them 4/4/4, and each destination's
// status names its owner. Alice's change in a shard that the leader (whose webhook the apiserver
// calls) does not own is credited to her. SIGKILL one replica: the other two take its shards once
// their Leases expire, 6/6, and every remote equals the live state again. SIGTERM one of those:
// the last one takes all twelve at once. No repository was written by two replicas side by side:
// its commits come in no more runs by process than its shard's Lease changed hands, plus one.
func TestShardsSharedOutTakenOverAndHandedOver(t *testing.T) {
	cp := planes.Lend(t)
	const n = 12
	srv, kube, names := shardedSetup(t, n)
	for _, ns := range names {
		grant(t, kube, ns, "alice")
	}
	replicaPods(t, kube, "shard-a", "shard-b", "shard-c")
	a := startShardReplica(t, "shard-a", shardLeases)
	b := startShardReplica(t, "shard-b", shardLeases)
	c := startShardReplica(t, "shard-c", shardLeases)
	rs := []*replica{a, b, c}
	testenv.Eventually(t, 2*time.Minute, "4/4/4", sharedAs(t, n, rs, 4, 4, 4), a.FailFast(), b.FailFast(), c.FailFast())
	testenv.Eventually(t, 2*time.Minute, "every remote equal to the live state", allEqualLive(kube, srv, names), a.FailFast())
	identities := map[string]*replica{}
	for _, r := range rs {
		id, _, _, _ := shardsOf(t, r)
		identities[id] = r
	}
	testenv.Eventually(t, time.Minute, "each destination naming its owner", func() (bool, string) {
		count := map[string]int{}
		for _, owner := range ownersOf(t, names) {
			if identities[owner] == nil {
				return false, fmt.Sprintf("owner %q is no replica", owner)
			}
			count[owner]++
		}
		return len(count) == 3 && count[idOf(t, a)] == 4 && count[idOf(t, b)] == 4, fmt.Sprint(count)
	})
	// The metrics say the same: each of a's destinations is a shard it owns, of 12, among 3 replicas.
	for _, ns := range ownedBy(t, names, idOf(t, a)) {
		owned := fmt.Sprintf(`gitops_reverser_shard_owned{shard="%s@main"}`, srv.RepoURL(ns))
		if got := a.Metric(t, owned); got != 1 {
			t.Errorf("%s on shard-a = %v, want 1", owned, got)
		}
		if got := b.Metric(t, owned); got != 0 {
			t.Errorf("%s on shard-b = %v, want 0: it does not own it", owned, got)
		}
	}
	if shards, replicas := a.Metric(t, "gitops_reverser_shards"), a.Metric(t, "gitops_reverser_shard_replicas"); shards != n || replicas != 3 {
		t.Errorf("shard-a: gitops_reverser_shards %v, gitops_reverser_shard_replicas %v; want %d and 3", shards, replicas, n)
	}

	// Alice's change in a shard the leader does not own: the leader's webhook, the registered one,
	// hands the record to the owner before it answers the apiserver.
	leader := leaderOf(t, rs)
	var elsewhere string
	for ns, owner := range ownersOf(t, names) {
		if owner != idOf(t, leader) {
			elsewhere = ns
			break
		}
	}
	waitRegistered(t, leader.Daemon, kube, elsewhere)
	alice := userClient(cp.UserConfig("alice"))
	byAlice := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "by-alice", Namespace: elsewhere}, Data: map[string]string{"v": "1"}}
	if _, err := alice.CoreV1().ConfigMaps(elsewhere).Create(context.Background(), byAlice, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, time.Minute, "alice credited by the owner of "+elsewhere+", not the leader", func() (bool, string) {
		author := authorIn(t, srv, elsewhere, "by-alice")
		return author == "alice", "author " + author
	}, a.FailFast(), b.FailFast(), c.FailFast())

	// SIGKILL: the dead replica's shards go to the two left once their Leases expire.
	killed := c
	killedOwns := ownedBy(t, names, idOf(t, killed))
	ctx := context.Background()
	killed.Kill(t)
	start := time.Now()
	for _, ns := range killedOwns {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "after-kill", Namespace: ns}, Data: map[string]string{"v": "1"}}
		if _, err := kube.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	testenv.Eventually(t, 2*time.Minute, "6/6 after the SIGKILL", sharedAs(t, n, rs[:2], 6, 6), a.FailFast(), b.FailFast())
	afterKill := time.Since(start)
	testenv.Eventually(t, 2*time.Minute, "every remote equal to the live state after the takeover", allEqualLive(kube, srv, names), a.FailFast(), b.FailFast())

	// SIGTERM: the replica hands its shards over at once; the last one owns all twelve.
	for _, ns := range ownedBy(t, names, idOf(t, b)) {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "before-term", Namespace: ns}, Data: map[string]string{"v": "1"}}
		if _, err := kube.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	b.Signal(t, syscall.SIGTERM)
	start = time.Now()
	testenv.Eventually(t, time.Minute, "12 after the SIGTERM", sharedAs(t, n, rs[:1], 12), a.FailFast())
	afterTerm := time.Since(start)
	if err := b.Wait(t, time.Minute); err != nil {
		t.Errorf("shard-b after SIGTERM: %v", err)
	}
	testenv.Eventually(t, 2*time.Minute, "every remote equal to the live state after the handover", allEqualLive(kube, srv, names), a.FailFast())
	for _, ns := range names {
		runs, transitions := len(instancesOf(t, srv, ns)), leaseTransitions(t, srv.RepoURL(ns))
		if runs > transitions+1 {
			t.Errorf("%s: commits by %d runs of processes, but its shard changed hands only %d times: two replicas wrote it side by side",
				ns, runs, transitions)
		}
	}
	t.Logf("takeover of a SIGKILLed replica's shards: %s (lease duration 6s); handover on SIGTERM: %s",
		afterKill.Round(100*time.Millisecond), afterTerm.Round(100*time.Millisecond))
}

// leaderOf is the replica that says on /readyz that it leads.
func leaderOf(t *testing.T, rs []*replica) *replica {
	t.Helper()
	var leader *replica
	testenv.Eventually(t, time.Minute, "a leader", func() (bool, string) {
		for _, r := range rs {
			if strings.Contains(r.WaitForStatus(t, "http://"+r.health+"/readyz", http.StatusOK), "\nleader (lease") {
				leader = r
				return true, ""
			}
		}
		return false, "no replica leads"
	})
	return leader
}

// idOf is a replica's identity in the Leases.
func idOf(t *testing.T, r *replica) string {
	t.Helper()
	id, _, _, _ := shardsOf(t, r)
	return id
}

// ownedBy lists the destinations (by namespace) whose status names owner.
func ownedBy(t *testing.T, names []string, owner string) []string {
	t.Helper()
	var out []string
	for ns, o := range ownersOf(t, names) {
		if o == owner {
			out = append(out, ns)
		}
	}
	slices.Sort(out)
	return out
}

// instancesOf lists the processes that made a repository's commits, one entry per run of
// consecutive commits by the same process.
func instancesOf(t testing.TB, srv *testenv.GitServer, repo string) []string {
	t.Helper()
	log, err := srv.Log(repo, "main")
	if err != nil {
		t.Fatal(err)
	}
	var runs []string
	for i := len(log) - 1; i >= 0; i-- {
		id := log[i].Trailers[trailerInstanceID]
		if id != "" && (len(runs) == 0 || runs[len(runs)-1] != id) {
			runs = append(runs, id)
		}
	}
	return runs
}

// leaseTransitions is how often the Lease of the shard of a repository's main branch changed hands.
func leaseTransitions(t *testing.T, url string) int {
	t.Helper()
	kube := kubernetes.NewForConfigOrDie(planes.Of(t).AdminConfig())
	leases, err := kube.CoordinationV1().Leases(daemonNamespace).List(context.Background(), metav1.ListOptions{LabelSelector: shard.LabelSet + "=" + shardLeases})
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range leases.Items {
		if l.Annotations["configbutler.ai/repository"] == url && l.Spec.LeaseTransitions != nil {
			return int(*l.Spec.LeaseTransitions)
		}
	}
	t.Fatalf("no Lease for the shard of %s", url)
	return 0
}
