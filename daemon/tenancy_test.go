package daemon

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/configbutler/gitops-reverser/crds"
	"github.com/configbutler/gitops-reverser/testenv"
)

// tenant is a namespace whose only user, bob, holds a Role there alone: ConfigMaps and the
// configbutler.ai kinds, and any extra rules the test gives.
type tenant struct {
	t    *testing.T
	ns   string
	kube kubernetes.Interface
	dyn  dynamic.Interface // as bob
}

func newTenant(t *testing.T, ns string, extra ...rbacv1.PolicyRule) *tenant {
	t.Helper()
	cp := planes.Of(t)
	ctx := context.Background()
	admin := kubernetes.NewForConfigOrDie(cp.AdminConfig())
	if _, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	bindRole(t, admin, ns, "tenant", append([]rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"*"}},
		{APIGroups: []string{crds.Group}, Resources: []string{"*"}, Verbs: []string{"*"}}}, extra...), "bob")
	tn := &tenant{t: t, ns: ns, kube: kubernetes.NewForConfigOrDie(cp.ImpersonatingConfig("bob", testenv.Users["bob"]...)),
		dyn: dynamic.NewForConfigOrDie(cp.ImpersonatingConfig("bob", testenv.Users["bob"]...))}
	testenv.Eventually(t, time.Minute, "bob's Role in force", func() (bool, string) {
		_, err := tn.dyn.Resource(crds.WatchRules).Namespace(ns).List(ctx, metav1.ListOptions{Limit: 1})
		return err == nil, fmt.Sprint(err)
	})
	return tn
}

// create makes one of our objects as bob.
func (tn *tenant) create(gvr schema.GroupVersionResource, obj any) {
	tn.t.Helper()
	u, err := crds.ToUnstructured(obj)
	if err != nil {
		tn.t.Fatal(err)
	}
	if _, err := tn.dyn.Resource(gvr).Namespace(tn.ns).Create(context.Background(), u, metav1.CreateOptions{}); err != nil {
		tn.t.Fatalf("bob creates %s: %v", gvr.Resource, err)
	}
}

func (tn *tenant) configMap(name string) {
	tn.t.Helper()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: tn.ns}, Data: map[string]string{"k": "v"}}
	if _, err := tn.kube.CoreV1().ConfigMaps(tn.ns).Create(context.Background(), cm, metav1.CreateOptions{}); err != nil {
		tn.t.Fatal(err)
	}
}

// waitReady waits until the object's Ready condition has reason, and returns its message.
func waitReadyReason(t testing.TB, d *testenv.Daemon, gvr schema.GroupVersionResource, ns, name, reason string) string {
	t.Helper()
	dyn := dynamic.NewForConfigOrDie(planes.Of(t).AdminConfig())
	var msg string
	testenv.Eventually(t, 2*time.Minute, fmt.Sprintf("%s %s/%s Ready: %s", gvr.Resource, ns, name, reason), func() (bool, string) {
		u, err := dyn.Resource(gvr).Namespace(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
		for _, c := range conds {
			c := c.(map[string]any)
			if c["type"] == crds.ConditionReady {
				msg, _ = c["message"].(string)
				return c["reason"] == reason, fmt.Sprintf("%v: %v", c["reason"], c["message"])
			}
		}
		return false, "no Ready condition"
	}, d.FailFast())
	return msg
}

// adminPatch merge-patches an object as the cluster's admin (team-a's owner here).
func adminPatch(t *testing.T, gvr schema.GroupVersionResource, ns, name, body string) {
	t.Helper()
	dyn := dynamic.NewForConfigOrDie(planes.Of(t).AdminConfig())
	if _, err := dyn.Resource(gvr).Namespace(ns).Patch(context.Background(), name, types.MergePatchType, []byte(body), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
}

// TestReferencesAcrossNamespacesNeedConsent: bob, who holds a Role in tn-b only, points a
// GitDestination at team tn-a's GitRepoConfig (its repository and credentials) and a WatchRule at
// tn-a's GitDestination. On main both wrote into tn-a's repository. Here both are refused, visibly,
// until tn-a admits tn-b (by name for the repository, by a namespace label for the destination);
// revoking stops the writes; --cross-namespace-refs=deny refuses even with consent. tn-a's own
// mirror goes on throughout.
func TestReferencesAcrossNamespacesNeedConsent(t *testing.T) {
	planes.Lend(t)
	srv, admin := mirrorSetup(t, "tn-a")
	bob := newTenant(t, "tn-b")
	d := startDaemon(t, t.TempDir(), "--git-batch-quiet-ms", "200")
	bob.configMap("payload")
	bob.create(crds.GitDestinations, &crds.GitDestination{ObjectMeta: metav1.ObjectMeta{Name: "borrow"},
		Spec: crds.GitDestinationSpec{RepoRef: crds.NamespacedReference{Name: "repo", Namespace: "tn-a"}, Branch: "main", BaseFolder: "borrowed"}})
	bob.create(crds.WatchRules, &crds.WatchRule{ObjectMeta: metav1.ObjectMeta{Name: "mine"},
		Spec: crds.WatchRuleSpec{DestinationRef: crds.NamespacedReference{Name: "borrow"}, Rules: []crds.ResourceRule{{Resources: []string{"configmaps"}}}}})
	bob.create(crds.WatchRules, &crds.WatchRule{ObjectMeta: metav1.ObjectMeta{Name: "sneak"},
		Spec: crds.WatchRuleSpec{DestinationRef: crds.NamespacedReference{Name: "dest", Namespace: "tn-a"}, Rules: []crds.ResourceRule{{Resources: []string{"configmaps"}}}}})
	borrowed, sneaked := "borrowed/tn-b/configmaps/payload.yaml", "live/tn-b/configmaps/payload.yaml"

	msg := waitReadyReason(t, d, crds.GitDestinations, "tn-b", "borrow", "ReferenceNotAllowed")
	if !strings.Contains(msg, "spec.accessPolicy.namespaces") || !strings.Contains(msg, "tn-a/repo") {
		t.Errorf("the refusal does not say what to add where: %s", msg)
	}
	waitReadyReason(t, d, crds.WatchRules, "tn-b", "sneak", "ReferenceNotAllowed")
	// tn-a's own mirror runs on: a ConfigMap of its own arrives; bob's do not.
	if _, err := admin.CoreV1().ConfigMaps("tn-a").Create(context.Background(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "own"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, time.Minute, "tn-a's own ConfigMap mirrored", remoteHas(srv, "live/tn-a/configmaps/own.yaml"), d.FailFast())
	for _, f := range []string{borrowed, sneaked} {
		if ok, _ := remoteHas(srv, f)(); ok {
			t.Errorf("a refused reference wrote %s", f)
		}
	}
	if got := d.Metric(t, `gitops_reverser_references_refused{kind="GitDestination"}`); got != 1 {
		t.Errorf("references_refused{kind=GitDestination} = %v, want 1", got)
	}
	waitEventOn(t, d, "tn-b", crds.KindWatchRule, "sneak", "ReferenceNotAllowed")

	// Consent: the repository by name, the destination by a label of tn-b.
	adminPatch(t, crds.GitRepoConfigs, "tn-a", "repo", `{"spec":{"accessPolicy":{"namespaces":["tn-b"]}}}`)
	adminPatch(t, crds.GitDestinations, "tn-a", "dest", `{"spec":{"accessPolicy":{"namespaceSelector":{"matchLabels":{"team":"b"}}}}}`)
	if _, err := admin.CoreV1().Namespaces().Patch(context.Background(), "tn-b", types.MergePatchType, []byte(`{"metadata":{"labels":{"team":"b"}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, time.Minute, "bob's ConfigMap in his admitted destination", remoteHas(srv, borrowed), d.FailFast())
	testenv.Eventually(t, time.Minute, "bob's ConfigMap in tn-a's destination, admitted", remoteHas(srv, sneaked), d.FailFast())

	// Revoked: the WatchRule is refused again, and what bob creates next stays out of tn-a's folder.
	adminPatch(t, crds.GitDestinations, "tn-a", "dest", `{"spec":{"accessPolicy":null}}`)
	waitReadyReason(t, d, crds.WatchRules, "tn-b", "sneak", "ReferenceNotAllowed")
	bob.configMap("after-revoke")
	testenv.Eventually(t, time.Minute, "the admitted destination still writes", remoteHas(srv, "borrowed/tn-b/configmaps/after-revoke.yaml"), d.FailFast())
	if ok, _ := remoteHas(srv, "live/tn-b/configmaps/after-revoke.yaml")(); ok {
		t.Error("a revoked reference still wrote into tn-a's folder")
	}
	if ok, _ := remoteHas(srv, sneaked)(); !ok {
		t.Error("revoking removed what was already pushed")
	}

	// deny: no reference leaves its namespace, whatever the accessPolicy says.
	d.Stop(t)
	d = startDaemon(t, t.TempDir(), "--git-batch-quiet-ms", "200", "--cross-namespace-refs", "deny")
	msg = waitReadyReason(t, d, crds.GitDestinations, "tn-b", "borrow", "ReferenceNotAllowed")
	if !strings.Contains(msg, "--cross-namespace-refs=deny") {
		t.Errorf("the refusal does not name the flag: %s", msg)
	}
	bob.configMap("after-deny")
	if _, err := admin.CoreV1().ConfigMaps("tn-a").Create(context.Background(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "own-after-deny"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, time.Minute, "tn-a's own ConfigMap mirrored under deny", remoteHas(srv, "live/tn-a/configmaps/own-after-deny.yaml"), d.FailFast())
	if ok, _ := remoteHas(srv, "borrowed/tn-b/configmaps/after-deny.yaml")(); ok {
		t.Error("deny let a consented reference write")
	}
}

// waitEventOn waits for a Warning Event with reason on the object kind/name in ns.
func waitEventOn(t testing.TB, d *testenv.Daemon, ns, kind, name, reason string) {
	t.Helper()
	kube := kubernetes.NewForConfigOrDie(planes.Of(t).AdminConfig())
	testenv.Eventually(t, time.Minute, "Event "+reason+" on "+kind+" "+name, func() (bool, string) {
		events, err := kube.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		for _, e := range events.Items {
			if e.InvolvedObject.Kind == kind && e.InvolvedObject.Name == name && e.Reason == reason && e.Type == corev1.EventTypeWarning {
				return true, ""
			}
		}
		return false, fmt.Sprintf("%d events", len(events.Items))
	}, d.FailFast())
}

// TestRulesReadOnlyWhatTheirServiceAccountMay: bob may create Secrets in tn-s but not read them.
// With a repository, credentials, an age key and a destination of his own he points a WatchRule at
// secrets: on main, tn-s's Secret db-pass arrived in his repository and his key decrypted it. Now a
// rule that selects Secrets reads them only as a ServiceAccount that may: bob's rule, naming none,
// is refused, visibly, nothing written; naming tn-s's default ServiceAccount, which has not agreed
// to act for it, it is refused again; once it agreed, it is refused for its rights: it may not
// list Secrets. A rule naming a ServiceAccount that may read them mirrors them;
// taking that one's Role away refuses the rule again (within the recheck), and what was written
// stays. A daemon with --default-service-account uses that one for a rule naming none.
func TestRulesReadOnlyWhatTheirServiceAccountMay(t *testing.T) {
	cp := planes.Lend(t)
	const ns = "tn-s"
	ctx := context.Background()
	srv := testenv.MustGitServer(t, "bob", "bobpw", "state")
	admin := kubernetes.NewForConfigOrDie(cp.AdminConfig())
	if err := crds.Install(ctx, cp.AdminConfig(), discardLogger()); err != nil {
		t.Fatal(err)
	}
	bob := newTenant(t, ns, rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"create"}})
	if _, err := admin.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "db-pass"},
		StringData: map[string]string{"password": "s3cr3t-of-tn-s"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	d := startDaemon(t, t.TempDir(), "--git-batch-quiet-ms", "200")

	key := newAgeIdentity(t)
	if _, err := bob.kube.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "git"},
		StringData: map[string]string{"username": "bob", "password": "bobpw"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	bob.create(crds.GitRepoConfigs, &crds.GitRepoConfig{ObjectMeta: metav1.ObjectMeta{Name: "loot"},
		Spec: crds.GitRepoConfigSpec{RepoURL: srv.RepoURL("state"), AllowedBranches: []string{"main"}, SecretRef: &crds.LocalReference{Name: "git"}}})
	bob.create(crds.GitDestinations, &crds.GitDestination{ObjectMeta: metav1.ObjectMeta{Name: "loot"},
		Spec: crds.GitDestinationSpec{RepoRef: crds.NamespacedReference{Name: "loot"}, Branch: "main", BaseFolder: "loot",
			Encryption: &crds.Encryption{Provider: crds.EncryptionSOPS, Age: &crds.AgeRecipients{Recipients: []string{key.Recipient().String()}}}}})
	bob.create(crds.WatchRules, &crds.WatchRule{ObjectMeta: metav1.ObjectMeta{Name: "secrets"},
		Spec: crds.WatchRuleSpec{DestinationRef: crds.NamespacedReference{Name: "loot"}, Rules: []crds.ResourceRule{{Resources: []string{"secrets", "configmaps"}}}}})
	bob.configMap("marker")
	file := "loot/" + ns + "/secrets/db-pass.yaml"

	msg := waitReadyReason(t, d, crds.WatchRules, ns, "secrets", "ServiceAccountNotAllowed")
	if !strings.Contains(msg, "spec.serviceAccountName") || !strings.Contains(msg, "Secrets") {
		t.Errorf("the refusal does not say what to name: %s", msg)
	}
	waitEventOn(t, d, ns, crds.KindWatchRule, "secrets", "ServiceAccountNotAllowed")
	// The control plane runs no controller that makes each namespace's default ServiceAccount.
	if _, err := admin.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := bob.dyn.Resource(crds.WatchRules).Namespace(ns).Patch(ctx, "secrets", types.MergePatchType,
		[]byte(`{"spec":{"serviceAccountName":"default"}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	// The default ServiceAccount has not agreed to act for bob's rule: refused for that first.
	msg = waitReadyReason(t, d, crds.WatchRules, ns, "secrets", "ServiceAccountConsentMissing")
	if !strings.Contains(msg, crds.AnnotationWatchRules+"=secrets") {
		t.Errorf("the refusal does not say which annotation to add: %s", msg)
	}
	if _, err := admin.CoreV1().ServiceAccounts(ns).Patch(ctx, "default", types.MergePatchType,
		[]byte(`{"metadata":{"annotations":{"`+crds.AnnotationWatchRules+`":"secrets"}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, time.Minute, "refused for the default ServiceAccount's rights", func() (bool, string) {
		msg := waitReadyReason(t, d, crds.WatchRules, ns, "secrets", "ServiceAccountNotAllowed")
		return strings.Contains(msg, "(system:serviceaccount:tn-s:default) may not") && strings.Contains(msg, "list secrets"), msg
	}, d.FailFast())
	if ok, _ := remoteHas(srv, file)(); ok {
		t.Fatalf("tn-s's Secret reached bob's repository")
	}
	// Rules other tests left in other namespaces are refused too: the default binds every rule.
	if got := d.Metric(t, `gitops_reverser_rules_refused{reason="ServiceAccountNotAllowed"}`); got < 1 {
		t.Errorf("rules_refused{reason=ServiceAccountNotAllowed} = %v, want at least bob's rule", got)
	}

	// A ServiceAccount that may read both, named by the rule: now it mirrors.
	bindRole(t, admin, ns, "reader", []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"secrets", "configmaps"}, Verbs: []string{"list", "watch"}}},
		"system:serviceaccount:"+ns+":reader")
	if _, err := admin.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "reader",
		Annotations: map[string]string{crds.AnnotationWatchRules: "*"}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	adminPatch(t, crds.WatchRules, ns, "secrets", `{"spec":{"serviceAccountName":"reader"}}`)
	testenv.Eventually(t, time.Minute, "the Secret, read with the reader's rights", remoteHas(srv, file), d.FailFast())
	got, err := decryptedData(t, srv, file, key)
	if err != nil || string(got["password"]) != "s3cr3t-of-tn-s" {
		t.Fatalf("sops -d gives %v (%v)", got, err)
	}

	// Taking the reader's rights away counts at the next recheck: refused again, the file stays.
	if err := admin.RbacV1().RoleBindings(ns).Delete(ctx, "reader", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitReadyReason(t, d, crds.WatchRules, ns, "secrets", "ServiceAccountNotAllowed")
	if ok, _ := remoteHas(srv, file)(); !ok {
		t.Errorf("a refusal deleted %s from Git", file)
	}

	// --default-service-account binds a rule naming none.
	d.Stop(t)
	bindRole(t, admin, ns, "reader-again", []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"secrets", "configmaps"}, Verbs: []string{"list", "watch"}}},
		"system:serviceaccount:"+ns+":reader")
	adminPatch(t, crds.WatchRules, ns, "secrets", `{"spec":{"serviceAccountName":null}}`)
	d = startDaemon(t, t.TempDir(), "--git-batch-quiet-ms", "200", "--default-service-account", "reader")
	waitReadyReason(t, d, crds.WatchRules, ns, "secrets", "Watching")
}

// TestWriteBackReadsNoBorrowedRepository: bob, who holds a Role in wb-borrow only, points a
// write-back GitDestination at wb-lend's GitRepoConfig, on the very folder wb-lend's own
// destination writes, before the daemon starts. wb-lend admits no other namespace. A person's
// edit there becomes wb-lend's proposal; bob's namespace gets no proposal and no SyncRun, and his
// destination no write-back status, though he asks for a run now: write-back reads nothing of a
// repository that does not admit the destination, even before the mirror has written its status.
func TestWriteBackReadsNoBorrowedRepository(t *testing.T) {
	cp := planes.Lend(t)
	const borrower = "wb-borrow"
	var bob *tenant
	w := newWBWorld(t, "wb-lend", crds.WriteBack{Enabled: true}, func(w *wbWorld) {
		bob = newTenant(t, borrower)
		bob.create(crds.GitDestinations, &crds.GitDestination{ObjectMeta: metav1.ObjectMeta{Name: "borrow"},
			Spec: crds.GitDestinationSpec{RepoRef: crds.NamespacedReference{Name: "repo", Namespace: w.ns}, Branch: "main", BaseFolder: "live",
				WriteBack: &crds.WriteBack{Enabled: true}}})
	})
	w.waitBaseline(true)
	waitReadyReason(t, w.d, crds.GitDestinations, borrower, "borrow", crds.ReasonReferenceNotAllowed)
	if _, err := bob.dyn.Resource(crds.GitDestinations).Namespace(borrower).Patch(context.Background(), "borrow", types.MergePatchType,
		[]byte(`{"metadata":{"annotations":{"`+crds.AnnotationSyncNow+`":"now"}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	path := w.cmPath("plan")
	commit := w.edit(map[string]string{path: "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: plan\n  namespace: " + w.ns + "\ndata:\n  k: v\n"})
	w.syncUntilProposed(commit, map[string]crds.ProposalChange{path: crds.ChangeCreate})

	admin := dynamic.NewForConfigOrDie(cp.AdminConfig())
	for _, gvr := range []schema.GroupVersionResource{crds.Proposals, crds.SyncRuns} {
		list, err := admin.Resource(gvr).Namespace(borrower).List(context.Background(), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(list.Items) != 0 {
			t.Errorf("write-back read wb-lend's repository for bob: %d %s in %s", len(list.Items), gvr.Resource, borrower)
		}
	}
	if st := destination(t, admin, borrower, "borrow").Status.WriteBack; st != nil {
		t.Errorf("bob's destination has a write-back status: %+v", st)
	}
}
