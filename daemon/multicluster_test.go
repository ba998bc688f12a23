package daemon

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/configbutler/gitops-reverser/crds"
	"github.com/configbutler/gitops-reverser/testenv"
)

// fleet is a hub control plane (the test's plane, where the daemon runs) and remote control
// planes it mirrors into one repository, each under clusters/<name>.
type fleet struct {
	t       *testing.T
	hub     *testenv.ControlPlane
	hubDyn  dynamic.Interface
	hubKube kubernetes.Interface
	srv     *testenv.GitServer
	remotes map[string]*testenv.ControlPlane
	ns      string // of the hub's configuration
	// ownBranch gives each cluster's destination a branch of its own (its name), instead of main,
	// so replicas can share them out.
	ownBranch bool
}

// newFleet starts the remotes, each with namespaces shop (which its RemoteCluster allows) and
// private (which it does not), a ConfigMap in each, and bob allowed to list and watch ConfigMaps
// in shop only: the least-privilege identity of the kubeconfig the hub is given.
// Each test has a namespace of its own on the hub: the planes outlive tests.
func newFleet(t *testing.T, ns string, names ...string) *fleet {
	return newFleetOn(t, ns, false, names...)
}

// newFleetOn is newFleet, with a branch of each cluster's own when ownBranch is set.
func newFleetOn(t *testing.T, ns string, ownBranch bool, names ...string) *fleet {
	hub := planes.Lend(t)
	f := &fleet{t: t, hub: hub, hubDyn: dynamic.NewForConfigOrDie(hub.AdminConfig()), hubKube: kubernetes.NewForConfigOrDie(hub.AdminConfig()),
		remotes: map[string]*testenv.ControlPlane{}, ns: ns, ownBranch: ownBranch}
	ctx := context.Background()
	for _, name := range names {
		cp, err := testenv.Start(ctx)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cp.Stop)
		f.remotes[name] = cp
		kube := kubernetes.NewForConfigOrDie(cp.AdminConfig())
		for _, ns := range []string{"shop", "private"} {
			mustCreate(t, func() error {
				_, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
				return err
			})
			f.configMap(name, ns, "first", "1")
		}
		grantRole(t, kube, cp, "shop", "mirror-reader", rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"list", "watch"}},
			"configmaps", "bob")
		grantClusterRole(t, kube, "hub-webhook", rbacv1.PolicyRule{APIGroups: []string{"admissionregistration.k8s.io"},
			Resources: []string{"validatingwebhookconfigurations"}, ResourceNames: []string{"gitops-reverser-hub"}, Verbs: []string{"get", "create", "patch", "delete"}}, "bob")
	}
	f.srv, _ = mirrorSetup(t, f.ns) // a repository, its GitRepoConfig "repo", and a destination of the hub's own
	if ownBranch {
		// Only the clusters' destinations, so two replicas take one each.
		if err := f.hubDyn.Resource(crds.GitDestinations).Namespace(f.ns).Delete(ctx, "dest", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		patch := fmt.Sprintf(`{"spec":{"allowedBranches":["main","%s"]}}`, strings.Join(names, `","`))
		if _, err := f.hubDyn.Resource(crds.GitRepoConfigs).Namespace(f.ns).Patch(ctx, "repo", types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range names {
		f.kubeconfig(name, "bob")
		f.create(crds.RemoteClusters, &crds.RemoteCluster{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: f.ns},
			Spec: crds.RemoteClusterSpec{KubeConfig: crds.KubeConfigReference{SecretRef: crds.SecretKeyReference{Name: name + "-kubeconfig"}},
				Namespaces: []string{"shop"}}})
		f.create(crds.GitDestinations, &crds.GitDestination{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: f.ns},
			Spec: crds.GitDestinationSpec{RepoRef: crds.NamespacedReference{Name: "repo"}, Branch: f.branch(name), BaseFolder: "clusters/" + name,
				ClusterRef: &crds.NamespacedReference{Name: name}}})
		f.create(crds.ClusterWatchRules, &crds.ClusterWatchRule{ObjectMeta: metav1.ObjectMeta{Name: ns + "-" + name},
			Spec: crds.ClusterWatchRuleSpec{DestinationRef: crds.NamespacedReference{Name: name, Namespace: f.ns},
				Rules: []crds.ClusterResourceRule{{ResourceRule: crds.ResourceRule{Resources: []string{"configmaps"}}, Scope: crds.ScopeNamespaced}}}})
	}
	return f
}

// grantClusterRole gives users one cluster-wide rule.
func grantClusterRole(t *testing.T, kube kubernetes.Interface, name string, rule rbacv1.PolicyRule, users ...string) {
	t.Helper()
	ctx := context.Background()
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: []rbacv1.PolicyRule{rule}}
	if _, err := kube.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name}, RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name}}
	for _, u := range users {
		binding.Subjects = append(binding.Subjects, rbacv1.Subject{Kind: "User", Name: u, APIGroup: rbacv1.GroupName})
	}
	if _, err := kube.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// tenant gives users a Role in the hub's namespace ns (created here) to manage GitDestinations
// and WatchRules there: all the rights of a tenant.
func (f *fleet) tenant(ns string, users ...string) {
	f.t.Helper()
	ctx := context.Background()
	mustCreate(f.t, func() error {
		_, err := f.hubKube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
		return err
	})
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "tenant", Namespace: ns}, Rules: []rbacv1.PolicyRule{{APIGroups: []string{crds.Group},
		Resources: []string{"gitdestinations", "watchrules"}, Verbs: []string{"get", "list", "create", "update", "patch", "delete"}}}}
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "tenant", Namespace: ns},
		RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "tenant"}}
	for _, u := range users {
		binding.Subjects = append(binding.Subjects, rbacv1.Subject{Kind: "User", Name: u, APIGroup: rbacv1.GroupName})
	}
	mustCreate(f.t, func() error {
		_, err := f.hubKube.RbacV1().Roles(ns).Create(ctx, role, metav1.CreateOptions{})
		return err
	})
	mustCreate(f.t, func() error {
		_, err := f.hubKube.RbacV1().RoleBindings(ns).Create(ctx, binding, metav1.CreateOptions{})
		return err
	})
	for _, u := range users {
		client := dynamic.NewForConfigOrDie(f.hub.UserConfig(u))
		testenv.Eventually(f.t, time.Minute, u+" may list GitDestinations in "+ns, func() (bool, string) {
			_, err := client.Resource(crds.GitDestinations).Namespace(ns).List(ctx, metav1.ListOptions{})
			return err == nil, fmt.Sprint(err)
		})
	}
}

// branch is where the destination of cluster name pushes.
func (f *fleet) branch(name string) string {
	if f.ownBranch {
		return name
	}
	return "main"
}

func mustCreate(t *testing.T, create func() error) {
	t.Helper()
	if err := create(); err != nil {
		t.Fatal(err)
	}
}

func (f *fleet) create(gvr schema.GroupVersionResource, obj any) {
	f.t.Helper()
	u, err := crds.ToUnstructured(obj)
	if err != nil {
		f.t.Fatal(err)
	}
	if _, err := f.hubDyn.Resource(gvr).Namespace(u.GetNamespace()).Create(context.Background(), u, metav1.CreateOptions{}); err != nil {
		f.t.Fatal(err)
	}
	if gvr == crds.ClusterWatchRules {
		f.t.Cleanup(func() { _ = f.hubDyn.Resource(gvr).Delete(context.Background(), u.GetName(), metav1.DeleteOptions{}) })
	}
}

// kubeconfig writes (or rotates) the Secret <name>-kubeconfig of the hub with a kubeconfig of the
// remote name that authenticates as user ("" for a token the remote never issued).
func (f *fleet) kubeconfig(name, user string) {
	f.t.Helper()
	cp := f.remotes[name]
	path := filepath.Join(f.t.TempDir(), "kubeconfig")
	known := user
	if known == "" {
		known = "mallory"
	}
	if err := cp.WriteUserKubeconfig(path, known, ""); err != nil {
		f.t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		f.t.Fatal(err)
	}
	if user == "" {
		data = []byte(strings.Replace(string(data), cp.UserConfig("mallory").BearerToken, "revoked-token", 1))
	}
	secrets := f.hubKube.CoreV1().Secrets(f.ns)
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name + "-kubeconfig", Namespace: f.ns}, Data: map[string][]byte{crds.DefaultKubeConfigKey: data}}
	if _, err := secrets.Update(context.Background(), s, metav1.UpdateOptions{}); err != nil {
		if _, err := secrets.Create(context.Background(), s, metav1.CreateOptions{}); err != nil {
			f.t.Fatal(err)
		}
	}
}

// configMap creates or updates a ConfigMap of a remote.
func (f *fleet) configMap(cluster, ns, name, value string) {
	f.t.Helper()
	cms := kubernetes.NewForConfigOrDie(f.remotes[cluster].AdminConfig()).CoreV1().ConfigMaps(ns)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Data: map[string]string{"value": value}}
	if _, err := cms.Update(context.Background(), cm, metav1.UpdateOptions{}); err != nil {
		if _, err := cms.Create(context.Background(), cm, metav1.CreateOptions{}); err != nil {
			f.t.Fatal(err)
		}
	}
}

// file waits until the repository holds path with value (as a ConfigMap's data.value; a number,
// which the YAML quotes).
func (f *fleet) file(d *testenv.Daemon, path, value string) {
	f.t.Helper()
	testenv.Eventually(f.t, time.Minute, path+" = "+value, func() (bool, string) {
		b, err := f.srv.ReadFile("state", f.branch(strings.Split(path, "/")[1]), path)
		return err == nil && strings.Contains(string(b), "value: \""+value+"\""), string(b)
	}, d.FailFast())
}

// ready waits until the RemoteCluster's Ready condition has reason (and status True only for Connected).
func (f *fleet) ready(d *testenv.Daemon, name, reason string) *crds.RemoteCluster {
	f.t.Helper()
	var rc *crds.RemoteCluster
	testenv.Eventually(f.t, 2*time.Minute, "RemoteCluster "+name+" "+reason, func() (bool, string) {
		u, err := f.hubDyn.Resource(crds.RemoteClusters).Namespace(f.ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		rc, _ = crds.FromUnstructured[crds.RemoteCluster](u)
		c := meta.FindStatusCondition(rc.Status.Conditions, crds.ConditionReady)
		if c == nil {
			return false, "no condition"
		}
		return c.Reason == reason && (c.Status == metav1.ConditionTrue) == (reason == "Connected"), c.Reason + ": " + c.Message
	}, d.FailFast())
	return rc
}

// allow sets the namespaces RemoteCluster name allows.
func (f *fleet) allow(name string, namespaces ...string) {
	f.t.Helper()
	patch, _ := json.Marshal(map[string]any{"spec": map[string]any{"namespaces": namespaces}})
	if _, err := f.hubDyn.Resource(crds.RemoteClusters).Namespace(f.ns).Patch(context.Background(), name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		f.t.Fatal(err)
	}
}

// event waits for a Warning Event of RemoteCluster name with reason.
func (f *fleet) event(d *testenv.Daemon, name, reason string) {
	f.t.Helper()
	testenv.Eventually(f.t, time.Minute, "Event "+reason+" of RemoteCluster "+name, func() (bool, string) {
		list, err := f.hubKube.CoreV1().Events(f.ns).List(context.Background(), metav1.ListOptions{FieldSelector: "involvedObject.name=" + name})
		if err != nil {
			return false, err.Error()
		}
		for _, e := range list.Items {
			if e.InvolvedObject.Kind == crds.KindRemoteCluster && e.Reason == reason && e.Type == corev1.EventTypeWarning {
				return true, ""
			}
		}
		return false, fmt.Sprintf("%d events", len(list.Items))
	}, d.FailFast())
}

// folder is the files of the repository under prefix, with their content.
func (f *fleet) folder(prefix string) map[string]string {
	f.t.Helper()
	files, err := f.srv.Files("state", "main")
	if err != nil {
		f.t.Fatal(err)
	}
	out := map[string]string{}
	for _, p := range files {
		if strings.HasPrefix(p, prefix) {
			b, _ := f.srv.ReadFile("state", "main", p)
			out[p] = string(b)
		}
	}
	return out
}

// commitsTouching counts the commits of main that change a file under prefix.
func (f *fleet) commitsTouching(prefix string) int {
	f.t.Helper()
	history, err := f.srv.History("state", "main")
	if err != nil {
		f.t.Fatal(err)
	}
	n := 0
	for _, c := range history {
		for p := range c.Files {
			if strings.HasPrefix(p, prefix) {
				n++
				break
			}
		}
	}
	return n
}

// TestHubMirrorsRemoteClusters runs one daemon on a hub that mirrors two remote clusters into one
// repository, each under its own folder, with a least-privilege kubeconfig: only the namespaces
// their RemoteClusters allow are mirrored. A remote whose apiserver stops degrades alone (its
// folder untouched, the other remote mirrored on) and is caught up with only the differences
// committed; a revoked credential is reported, and a rotated one picked up without a restart.
func TestHubMirrorsRemoteClusters(t *testing.T) {
	f := newFleet(t, "fleet-mirror", "east", "west")
	d := startDaemon(t, t.TempDir(), "--git-batch-quiet-ms", "200")
	f.file(d, "clusters/east/shop/configmaps/first.yaml", "1")
	f.file(d, "clusters/west/shop/configmaps/first.yaml", "1")
	if private := f.folder("clusters/east/private"); len(private) > 0 {
		t.Errorf("a namespace the RemoteCluster does not allow was mirrored: %v", private)
	}
	f.ready(d, "east", "Connected")
	// The status counts the watch once it is reported after the watch started: poll for it.
	testenv.Eventually(t, time.Minute, "the status of RemoteCluster east", func() (bool, string) {
		rc := f.ready(d, "east", "Connected")
		return rc.Status.Watches == 1 && rc.Status.Resources > 0 && rc.Status.Server == f.remotes["east"].URL, fmt.Sprintf("%+v", rc.Status)
	}, d.FailFast())
	testenv.Eventually(t, time.Minute, "metrics by cluster", func() (bool, string) {
		v := d.Metric(t, `gitops_reverser_remote_cluster_ready{cluster="`+f.ns+`/west"}`)
		return v == 1, fmt.Sprint(v)
	}, d.FailFast())

	// Dave, whose only rights are a Role in the hub's namespace shop, points a destination of his at
	// RemoteCluster east (it admits no other namespace) and a WatchRule at it: east's namespace shop
	// would land in his folder. Refused, and nothing of east reaches it.
	f.tenant("shop", "dave")
	if _, err := f.hubDyn.Resource(crds.GitRepoConfigs).Namespace(f.ns).Patch(context.Background(), "repo", types.MergePatchType,
		[]byte(`{"spec":{"accessPolicy":{"namespaces":["shop"]}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	dave := dynamic.NewForConfigOrDie(f.hub.UserConfig("dave"))
	for gvr, obj := range map[schema.GroupVersionResource]any{
		crds.GitDestinations: &crds.GitDestination{ObjectMeta: metav1.ObjectMeta{Name: "stolen", Namespace: "shop"},
			Spec: crds.GitDestinationSpec{RepoRef: crds.NamespacedReference{Name: "repo", Namespace: f.ns}, Branch: "main", BaseFolder: "stolen",
				ClusterRef: &crds.NamespacedReference{Name: "east", Namespace: f.ns}}},
		crds.WatchRules: &crds.WatchRule{ObjectMeta: metav1.ObjectMeta{Name: "stolen", Namespace: "shop"},
			Spec: crds.WatchRuleSpec{DestinationRef: crds.NamespacedReference{Name: "stolen"}, Rules: []crds.ResourceRule{{Resources: []string{"configmaps"}}}}},
	} {
		u, err := crds.ToUnstructured(obj)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := dave.Resource(gvr).Namespace("shop").Create(context.Background(), u, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	var refused bool
	testenv.Eventually(t, time.Minute, "dave's destination refused (or east mirrored for him)", func() (bool, string) {
		u, err := f.hubDyn.Resource(crds.GitDestinations).Namespace("shop").Get(context.Background(), "stolen", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		dest, _ := crds.FromUnstructured[crds.GitDestination](u)
		c := meta.FindStatusCondition(dest.Status.Conditions, crds.ConditionReady)
		refused = c != nil && c.Reason == crds.ReasonReferenceNotAllowed && strings.Contains(c.Message, "spec.clusterRef")
		return refused || len(f.folder("stolen/")) > 0, fmt.Sprint(c)
	}, d.FailFast())
	if stolen := f.folder("stolen/"); !refused || len(stolen) > 0 {
		t.Errorf("a RemoteCluster that does not admit namespace shop was mirrored for dave (refused %v): %v", refused, stolen)
	}

	// East's owner lets namespace private be mirrored too, but its kubeconfig's identity may not
	// read there: the cluster says which rights the rules need (the rule waits for them, as a
	// rule whose ServiceAccount may not read waits; its files stay).
	f.allow("east", "shop", "private")
	rc := f.ready(d, "east", "Forbidden")
	if c := meta.FindStatusCondition(rc.Status.Conditions, crds.ConditionReady); !strings.Contains(c.Message, "list configmaps in namespace private") {
		t.Errorf("the Forbidden condition does not say what to grant: %s", c.Message)
	}
	f.allow("east", "shop")
	f.ready(d, "east", "Connected")

	// East's apiserver stops: it is reported, its files stay, west goes on.
	before := f.folder("clusters/east/")
	err := f.remotes["east"].RestartAPIServer(context.Background(), func() error {
		f.ready(d, "east", "Unreachable")
		f.event(d, "east", "Unreachable")
		f.configMap("west", "shop", "during", "2")
		f.file(d, "clusters/west/shop/configmaps/during.yaml", "2")
		if during := f.folder("clusters/east/"); !maps.Equal(before, during) {
			return fmt.Errorf("east's folder changed while its apiserver was down: %v → %v", before, during)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	commits := f.commitsTouching("clusters/east/")
	f.ready(d, "east", "Connected")
	f.configMap("east", "shop", "after", "3")
	f.file(d, "clusters/east/shop/configmaps/after.yaml", "3")
	if n := f.commitsTouching("clusters/east/") - commits; n != 1 {
		t.Errorf("%d commits touched east's folder after it came back, want only the one of its new ConfigMap", n)
	}
	f.configMap("east", "shop", "after", "33") // a change a watch delivers (the one above may have come by a list)
	f.file(d, "clusters/east/shop/configmaps/after.yaml", "33")
	testenv.Eventually(t, time.Minute, "east's last change in its status", func() (bool, string) {
		rc := f.status("east")
		return rc.Status.LastEventTime != nil, "no lastEventTime"
	}, d.FailFast())

	// A revoked credential is reported, and nothing is lost; a rotated one is used at once.
	f.kubeconfig("west", "")
	f.ready(d, "west", "Unauthorized")
	f.configMap("west", "shop", "while-revoked", "4")
	f.kubeconfig("west", "bob")
	f.ready(d, "west", "Connected")
	f.file(d, "clusters/west/shop/configmaps/while-revoked.yaml", "4")
}

// TestHubReplicasShareTheClusters runs two hub replicas that share the destinations out
// (--shards=auto): each cluster's destination pushes to a branch of its own, so each replica
// serves one cluster and holds the watches of that one only. Both sit behind one webhook URL,
// which sends east's reviews to the replica that does not serve east: it hands them over, and
// alice's change on east is credited to her. SIGKILL the replica serving east: the other takes
// east over once its Lease expires, and the changes made meanwhile are in Git.
func TestHubReplicasShareTheClusters(t *testing.T) {
	f := newFleetOn(t, "fleet-shards", true, "east", "west")
	eastKube := kubernetes.NewForConfigOrDie(f.remotes["east"].AdminConfig())
	grantRole(t, eastKube, f.remotes["east"], "shop", "editor", rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"configmaps"},
		Verbs: []string{"get", "list", "create", "update", "patch"}}, "configmaps", "alice")
	replicaPods(t, f.hubKube, "hub-a", "hub-b")
	addrs := map[string]string{"hub-a": testenv.FreeAddr(t), "hub-b": testenv.FreeAddr(t)}
	front := newLink(t, addrs["hub-a"]) // the one URL the remote apiservers are given, as a Service's
	start := func(pod string) *replica {
		return startReplica(t, pod, "hub-shards", append(append([]string{"--shards", "auto"}, shardTimings...),
			"--webhook-bind-address", addrs[pod], "--peer-address", addrs[pod], "--webhook-url", "https://"+front.addr)...)
	}
	a, b := start("hub-a"), start("hub-b")
	serving := func(r *replica, cluster string) bool {
		return r.Metric(t, fmt.Sprintf(`gitops_reverser_remote_cluster_watches{cluster="%s/%s"}`, f.ns, cluster)) > 0
	}
	var east, west *replica
	testenv.Eventually(t, 2*time.Minute, "each cluster served by exactly one replica", func() (bool, string) {
		east, west = nil, nil
		for _, r := range []*replica{a, b} {
			for _, c := range []string{"east", "west"} {
				if !serving(r, c) {
					continue
				}
				if c == "east" {
					if east != nil {
						return false, "east served twice"
					}
					east = r
				} else {
					if west != nil {
						return false, "west served twice"
					}
					west = r
				}
			}
		}
		return east != nil && west != nil && east != west, fmt.Sprintf("east by %v, west by %v", east != nil, west != nil)
	}, a.FailFast(), b.FailFast())
	f.file(east.Daemon, "clusters/east/shop/configmaps/first.yaml", "1")
	f.file(west.Daemon, "clusters/west/shop/configmaps/first.yaml", "1")

	// East's reviews reach the replica that serves west only; it hands each record to the other.
	front.retarget(addrs[west.pod])
	f.registered(east.Daemon, "east")
	testenv.Eventually(t, time.Minute, "east's reviews handed to its replica", func() (bool, string) {
		f.configMap("east", "shop", "probe", time.Now().Format("150405.000"))
		return f.status("east").Status.Attribution == crds.AttributionWorking, f.status("east").Status.Attribution
	}, a.FailFast(), b.FailFast())
	alice := kubernetes.NewForConfigOrDie(f.remotes["east"].UserConfig("alice"))
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "by-alice", Namespace: "shop"}, Data: map[string]string{"value": "9"}}
	if _, err := alice.CoreV1().ConfigMaps("shop").Create(context.Background(), cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	f.file(east.Daemon, "clusters/east/shop/configmaps/by-alice.yaml", "9")
	if got := f.author("clusters/east/shop/configmaps/by-alice.yaml"); got != "alice" {
		t.Errorf("alice's change, reviewed by the replica that does not serve east, was credited to %q", got)
	}

	east.Kill(t)
	killed := time.Now()
	f.configMap("east", "shop", "after-kill", "7")
	f.configMap("west", "shop", "after-kill", "8")
	testenv.Eventually(t, 2*time.Minute, "west's replica serving east too", func() (bool, string) {
		return serving(west, "east"), "not yet"
	}, west.FailFast())
	t.Logf("east handed over %.1f s after the SIGKILL (Lease %s)", time.Since(killed).Seconds(), shardTimings[1])
	f.file(west.Daemon, "clusters/east/shop/configmaps/after-kill.yaml", "7")
	f.file(west.Daemon, "clusters/west/shop/configmaps/after-kill.yaml", "8")
}
