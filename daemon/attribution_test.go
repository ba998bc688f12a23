package daemon

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/configbutler/gitops-reverser/testenv"
)

// grant lets the users (and service accounts, as "system:serviceaccount:ns:name") edit ConfigMaps
// in ns, and waits until the authorizer agrees.
func grant(t testing.TB, kube kubernetes.Interface, ns string, users ...string) {
	t.Helper()
	grantEdit(t, kube, ns, "configmaps", users...)
}

// grantEdit lets the users edit the core resource in ns, and waits until the authorizer agrees.
func grantEdit(t testing.TB, kube kubernetes.Interface, ns, resource string, users ...string) {
	t.Helper()
	grantRole(t, kube, planes.Of(t), ns, resource+"-editor",
		rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{resource}, Verbs: []string{"*"}}, resource, users...)
}

// grantRole binds users to a Role of name in ns that grants rule (the binding is name+"s"), and
// waits until cp's authorizer lets each of them list the core resource probe there.
func grantRole(t testing.TB, kube kubernetes.Interface, cp *testenv.ControlPlane, ns, name string, rule rbacv1.PolicyRule, probe string, users ...string) {
	t.Helper()
	ctx := context.Background()
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Rules: []rbacv1.PolicyRule{rule}}
	if _, err := kube.RbacV1().Roles(ns).Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name + "s", Namespace: ns},
		RoleRef: rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: role.Name}}
	for _, u := range users {
		binding.Subjects = append(binding.Subjects, rbacv1.Subject{Kind: "User", Name: u, APIGroup: "rbac.authorization.k8s.io"})
	}
	if _, err := kube.RbacV1().RoleBindings(ns).Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, u := range users {
		client := kubernetes.NewForConfigOrDie(cp.ImpersonatingConfig(u))
		testenv.Eventually(t, time.Minute, u+" allowed to use "+probe, func() (bool, string) {
			err := client.CoreV1().RESTClient().Get().Namespace(ns).Resource(probe).Param("limit", "1").Do(ctx).Error()
			return err == nil, fmt.Sprint(err)
		})
	}
}

func userClient(cfg *rest.Config) kubernetes.Interface { return kubernetes.NewForConfigOrDie(cfg) }

// startAttributingDaemon runs the daemon with its webhook on a loopback port the apiserver calls,
// or tells the apiserver to call webhookURL instead when it is set.
func startAttributingDaemon(t testing.TB, webhookURL string) *testenv.Daemon {
	t.Helper()
	args := []string{"--git-batch-quiet-ms", "200"}
	if webhookURL != "" {
		args = append(args, "--webhook-url", webhookURL)
	}
	d := startDaemon(t, t.TempDir(), args...)
	testenv.Eventually(t, time.Minute, "daemon watching", metricAtLeast(t, d, "gitops_reverser_watches", 1), d.FailFast())
	return d
}

// waitRegistered writes ConfigMaps as the admin until the daemon's webhook has recorded one: the
// ValidatingWebhookConfiguration takes a moment to be used by the apiserver.
func waitRegistered(t testing.TB, d *testenv.Daemon, kube kubernetes.Interface, ns string) {
	t.Helper()
	probes := 0
	recorded := metricAtLeast(t, d, `gitops_reverser_admission_reviews_total{result="recorded"}`, 1)
	testenv.Eventually(t, time.Minute, "the apiserver calling the webhook", func() (bool, string) {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("probe-%d", probes), Namespace: ns}}
		if _, err := kube.CoreV1().ConfigMaps(ns).Create(context.Background(), cm, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err) // one left by an earlier daemon of the same test is fine: the next probe is new
		}
		probes++
		return recorded()
	}, d.FailFast())
}

// authorOf returns the author of the newest commit that touched path in the repository "state".
func authorOf(t testing.TB, srv *testenv.GitServer, path string) string {
	t.Helper()
	return authorIn(t, srv, "state", path)
}

// authorIn returns the author of the newest commit of repo's main branch that touched path.
func authorIn(t testing.TB, srv *testenv.GitServer, repo, path string) string {
	t.Helper()
	log, err := srv.Log(repo, "main")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range log {
		if strings.Contains(c.Body, path) || strings.Contains(c.Subject, path) {
			return c.AuthorName
		}
	}
	return ""
}

func TestCommitsAreAuthoredByWhoeverChangedTheObject(t *testing.T) {
	cp := planes.Lend(t)
	ns := "attribution"
	srv, kube := mirrorSetup(t, ns)
	sa := "system:serviceaccount:" + ns + ":deployer"
	grant(t, kube, ns, "alice", "bob", "carol", sa)
	d := startAttributingDaemon(t, "")
	waitRegistered(t, d, kube, ns)
	ctx := context.Background()
	file := "live/" + ns + "/configmaps/shared.yaml"
	commitsBy := func(want ...string) {
		t.Helper()
		testenv.Eventually(t, time.Minute, fmt.Sprintf("commits by %v", want), func() (bool, string) {
			log, _ := srv.Log("state", "main")
			var got []string
			for _, c := range log {
				if strings.Contains(c.Subject+c.Body, "shared") || strings.Contains(c.Subject+c.Body, "by-sa") {
					got = append(got, c.AuthorName)
				}
			}
			return fmt.Sprint(got) == fmt.Sprint(want), fmt.Sprintf("commits by %v", got)
		}, d.FailFast())
	}
	alice, bob, carol := userClient(cp.UserConfig("alice")), userClient(cp.UserConfig("bob")), userClient(cp.UserConfig("carol"))
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "shared", Namespace: ns}, Data: map[string]string{"v": "1"}}
	if _, err := alice.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	commitsBy("alice")
	if _, err := bob.CoreV1().ConfigMaps(ns).Patch(ctx, "shared", types.MergePatchType, []byte(`{"data":{"v":"2"}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	commitsBy("bob", "alice")
	if err := carol.CoreV1().ConfigMaps(ns).Delete(ctx, "shared", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	commitsBy("carol", "bob", "alice")
	if files, _ := srv.Files("state", "main"); strings.Contains(strings.Join(files, " "), file) {
		t.Errorf("%s still in Git after carol's delete", file)
	}

	deployer := userClient(cp.ImpersonatingConfig(sa, "system:serviceaccounts"))
	bySA := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "by-sa", Namespace: ns}, Data: map[string]string{"v": "1"}}
	if _, err := deployer.CoreV1().ConfigMaps(ns).Create(ctx, bySA, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	commitsBy(sa, "carol", "bob", "alice")
}

func TestDryRunDoesNotStealTheAuthorship(t *testing.T) {
	cp := planes.Lend(t)
	ns := "dry-run"
	srv, kube := mirrorSetup(t, ns)
	grant(t, kube, ns, "alice", "mallory")
	d := startAttributingDaemon(t, "")
	waitRegistered(t, d, kube, ns)
	ctx := context.Background()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "target", Namespace: ns}, Data: map[string]string{"v": "1"}}
	if _, err := kube.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	path := "live/" + ns + "/configmaps/target.yaml"
	testenv.Eventually(t, time.Minute, "created", func() (bool, string) { return authorOf(t, srv, "target") != "", "" }, d.FailFast())
	patch := []byte(`{"data":{"v":"2"}}`)
	mallory, alice := userClient(cp.UserConfig("mallory")), userClient(cp.UserConfig("alice"))
	if _, err := mallory.CoreV1().ConfigMaps(ns).Patch(ctx, "target", types.MergePatchType, patch,
		metav1.PatchOptions{DryRun: []string{metav1.DryRunAll}}); err != nil {
		t.Fatal(err)
	}
	if _, err := alice.CoreV1().ConfigMaps(ns).Patch(ctx, "target", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, time.Minute, "alice's update in Git", func() (bool, string) {
		b, _ := srv.ReadFile("state", "main", path)
		return strings.Contains(string(b), `v: "2"`), string(b)
	}, d.FailFast())
	if got := authorOf(t, srv, "target"); got != "alice" {
		t.Fatalf("update authored by %q, want alice (mallory's dry run must not count)", got)
	}
}

func TestUnreachableWebhookFallsBackToTheBot(t *testing.T) {
	cp := planes.Lend(t)
	ns := "no-webhook"
	srv, kube := mirrorSetup(t, ns)
	grant(t, kube, ns, "alice")
	ctx := context.Background()
	// Once the object that exists at start is in Git, the first list is over: later writes reach
	// the daemon as watch events, which look their author up.
	marker := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "marker", Namespace: ns}}
	if _, err := kube.CoreV1().ConfigMaps(ns).Create(ctx, marker, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The apiserver is told to call a port where nothing listens: failurePolicy Ignore lets every
	// write through, and the watch finds no record of who made it.
	d := startAttributingDaemon(t, "https://"+testenv.FreeAddr(t))
	testenv.Eventually(t, time.Minute, "the first list in Git", remoteHas(srv, "live/"+ns+"/configmaps/marker.yaml"), d.FailFast())
	alice := userClient(cp.UserConfig("alice"))
	for i := range 3 {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("orphaned-%d", i), Namespace: ns}}
		if _, err := alice.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			t.Fatalf("write with the webhook unreachable: %v", err)
		}
	}
	testenv.Eventually(t, time.Minute, "all three in Git", func() (bool, string) {
		files, _ := srv.Files("state", "main")
		return strings.Count(strings.Join(files, " "), "orphaned-") == 3, fmt.Sprint(files)
	}, d.FailFast())
	for i := range 3 {
		if got := authorOf(t, srv, fmt.Sprintf("orphaned-%d", i)); got != "gitops-reverser" {
			t.Errorf("orphaned-%d authored by %q, want the bot", i, got)
		}
	}
	if misses := d.Metric(t, "gitops_reverser_enrich_misses_total"); misses < 3 {
		t.Errorf("enrich_misses_total = %v, want at least 3", misses)
	}
}

var users = []string{"alice", "bob", "carol", "dave"}

// attributionWorld is a mirrored namespace with 50 ConfigMaps obj-00…obj-49 that the users may
// edit, and a daemon whose webhook the apiserver already calls.
func attributionWorld(t testing.TB, ns string, users []string) (*testenv.GitServer, *kubernetes.Clientset) {
	t.Helper()
	srv, kube := mirrorSetup(t, ns)
	grant(t, kube, ns, users...)
	d := startAttributingDaemon(t, "")
	waitRegistered(t, d, kube, ns)
	for i := range 50 {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("obj-%02d", i), Namespace: ns}}
		if _, err := kube.CoreV1().ConfigMaps(ns).Create(context.Background(), cm, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	return srv, kube
}

// TestInterleavedUsersAreAttributed has 4 users update 50 ConfigMaps 500 times each, interleaved.
// Every file a commit changes must carry the content written by the commit's author.
func TestInterleavedUsersAreAttributed(t *testing.T) {
	cp := planes.Lend(t)
	ns := "interleaved"
	srv, kube := attributionWorld(t, ns, users)
	ctx := context.Background()
	var wg sync.WaitGroup
	for _, u := range users {
		client := userClient(cp.UserConfig(u))
		wg.Go(func() {
			for n := range 500 {
				patch := fmt.Sprintf(`{"data":{"writer":%q,"seq":"%d"}}`, u, n)
				name := fmt.Sprintf("obj-%02d", (n*7+len(u))%50)
				if _, err := client.CoreV1().ConfigMaps(ns).Patch(ctx, name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
					t.Errorf("%s patch: %v", u, err)
					return
				}
			}
		})
	}
	wg.Wait()
	right, total := attributedFiles(t, srv, kube, ns)
	ratio := float64(right) / float64(total)
	t.Logf("attribution: %d of %d changed files carry their author's write (%.2f%%)", right, total, 100*ratio)
	fmt.Printf("attribution: 4 users × 500 interleaved updates: %.2f%% of %d file changes correctly attributed\n", 100*ratio, total)
	if ratio < 0.99 {
		t.Fatalf("attribution ratio %.4f < 0.99", ratio)
	}
}

// attributedFiles waits until Git holds the live content of every ConfigMap in ns, then checks
// each file change of each commit: the writer recorded in the content must be the commit author.
func attributedFiles(t testing.TB, srv *testenv.GitServer, kube kubernetes.Interface, ns string) (right, total int) {
	t.Helper()
	list, err := kube.CoreV1().ConfigMaps(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, time.Minute, "Git matches the cluster", func() (bool, string) {
		for _, cm := range list.Items {
			if cm.Data["writer"] == "" {
				continue
			}
			b, _ := srv.ReadFile("state", "main", "live/"+ns+"/configmaps/"+cm.Name+".yaml")
			if !strings.Contains(string(b), "seq: \""+cm.Data["seq"]+"\"") || !strings.Contains(string(b), "writer: "+cm.Data["writer"]) {
				return false, cm.Name + " differs"
			}
		}
		return true, ""
	})
	history, err := srv.History("state", "main")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range history {
		for path, content := range c.Files {
			_, writer, ok := strings.Cut(string(content), "writer: ")
			if !ok || !strings.HasPrefix(path, "live/"+ns+"/configmaps/obj-") {
				continue // creations by the admin, probes, deletions
			}
			writer, _, _ = strings.Cut(writer, "\n")
			total++
			if writer == c.AuthorName {
				right++
			}
		}
	}
	if total == 0 {
		t.Fatal("no attributed file changes found")
	}
	return right, total
}
