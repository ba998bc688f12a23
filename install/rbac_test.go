package install

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apiextensionsv1client "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset/typed/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/configbutler/gitops-reverser/crds"
	"github.com/configbutler/gitops-reverser/testenv"
)

// workloadNamespace is where a team's objects and its WatchRule live.
const workloadNamespace = "team-a"

// TestDaemonRunsWithExactlyTheShippedRBAC runs the daemon as the ServiceAccount of deploy/rbac.yaml,
// with the shipped config file, through a proxy that records every API request it makes. The daemon
// must install its CRDs, create its webhook certificate and registration, mirror a team's objects
// with their author, and report its destination Ready, without one request being refused. Every
// permission the RBAC grants beyond the reads that rules may select must be used, or its use
// explained in notExercised: the RBAC is exactly what the daemon needs.
func TestDaemonRunsWithExactlyTheShippedRBAC(t *testing.T) {
	ctx := context.Background()
	admin := adminKubeconfig(t)
	kube := kubernetes.NewForConfigOrDie(cp.AdminConfig())
	srv := prepareInstall(t, kube, admin)

	pod := probePod(systemNamespace)
	pod.Name = shippedPod
	delete(pod.Labels, leaderLabel)
	if _, err := kube.CoreV1().Pods(systemNamespace).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = kube.CoreV1().Pods(systemNamespace).Delete(ctx, shippedPod, metav1.DeleteOptions{GracePeriodSeconds: ref[int64](0)})
	})

	rec := startAPIRecorder(t)
	d := startShippedDaemon(t, rec)
	d.WaitForStatus(t, "http://"+d.healthAddr+"/readyz", http.StatusOK) // CRDs installed by the daemon itself
	testenv.Eventually(t, converge, "the shipped daemon leading, its Pod labelled", func() (bool, string) {
		p, err := kube.CoreV1().Pods(systemNamespace).Get(ctx, shippedPod, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		leader := d.Metric(t, "gitops_reverser_leader")
		return leader == 1 && p.Labels[leaderLabel] == "true", fmt.Sprintf("leader %v, labels %v", leader, p.Labels)
	}, d.FailFast())

	kubectl(t, admin, strings.NewReader(fmt.Sprintf(mirrorConfig, srv.RepoURL("state"))), "apply", "-f", "-")
	testenv.Eventually(t, converge, "watching configmaps, deployments and namespaces", func() (bool, string) {
		watches := d.Metric(t, "gitops_reverser_watches")
		return watches >= 3, fmt.Sprintf("%v watches", watches)
	}, d.FailFast())
	waitWebhookCalled(t, d, kube)

	alice := kubernetes.NewForConfigOrDie(cp.UserConfig("alice"))
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "app-settings", Namespace: workloadNamespace}, Data: map[string]string{"mode": "blue"}}
	if _, err := alice.CoreV1().ConfigMaps(workloadNamespace).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := alice.AppsV1().Deployments(workloadNamespace).Create(ctx, webDeployment(), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	files := []string{
		"clusters/prod/" + workloadNamespace + "/configmaps/app-settings.yaml",
		"clusters/prod/" + workloadNamespace + "/deployments.apps/web.yaml",
	}
	testenv.Eventually(t, converge, "alice's objects and the namespace in Git", func() (bool, string) {
		got, _ := srv.Files("state", "main")
		return !slices.ContainsFunc(files, func(f string) bool { return !slices.Contains(got, f) }) &&
			slices.Contains(got, "clusters/prod/_cluster/namespaces/"+workloadNamespace+".yaml"), fmt.Sprint(got)
	}, d.FailFast())
	for _, f := range files {
		if author := lastAuthor(t, srv, f); author != "alice" {
			t.Errorf("%s committed by %q, want alice (attribution under the shipped RBAC)", f, author)
		}
	}
	for _, o := range []struct{ resource, namespace, name string }{
		{"gitrepoconfigs", systemNamespace, "platform"},
		{"gitdestinations", systemNamespace, "prod"},
		{"watchrules", workloadNamespace, "team-a"},
		{"clusterwatchrules", "", "namespaces"},
	} {
		testenv.Eventually(t, converge, o.resource+" "+o.name+" Ready=True", func() (bool, string) { return ready(ctx, o.resource, o.namespace, o.name), "" }, d.FailFast())
	}
	checkDaemonArtifacts(t, kube, d)

	d.Stop(t)
	if strings.Contains(strings.ToLower(d.Output()), "forbidden") {
		t.Errorf("the daemon's log reports a forbidden request:\n%s", d.Output())
	}
	checkRecordedRequests(t, rec)
}

// prepareInstall does what an install does before the daemon starts: the Namespace and RBAC of
// deploy/, the Git credentials Secret; and what a team does: its namespace, where alice may edit
// ConfigMaps and Deployments. Leftovers of an earlier run that the daemon must create itself are
// removed. It returns the Git server with an empty repository "state".
func prepareInstall(t *testing.T, kube kubernetes.Interface, admin string) *testenv.GitServer {
	t.Helper()
	ctx := context.Background()
	removeDaemonArtifacts(t, kube)
	kubectl(t, admin, nil, "apply", "-f", deployPath("namespace.yaml"), "-f", deployPath("rbac.yaml"))
	waitAuthorized(t, authorizationv1.ResourceAttributes{Verb: "list", Group: crds.Group, Resource: "gitrepoconfigs"})

	srv := testenv.MustGitServer(t, "daemon", "pw", "state")
	credentials := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "git-credentials", Namespace: systemNamespace},
		StringData: map[string]string{"username": "daemon", "password": "pw"}}
	if _, err := kube.CoreV1().Secrets(systemNamespace).Create(ctx, credentials, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	ensureNamespace(t, kube, workloadNamespace)
	grantWorkloads(t, kube, workloadNamespace, "alice")
	t.Cleanup(func() { // so that the test can run again on the same control plane
		all := metav1.ListOptions{}
		_ = kube.CoreV1().ConfigMaps(workloadNamespace).DeleteCollection(ctx, metav1.DeleteOptions{}, all)
		_ = kube.AppsV1().Deployments(workloadNamespace).DeleteCollection(ctx, metav1.DeleteOptions{}, all)
	})
	return srv
}

// mirrorConfig is the README's example configuration: the repository and destination in the
// daemon's namespace (where their Secret must be), a team's WatchRule in the team's namespace,
// and a ClusterWatchRule for the cluster-scoped Namespaces.
const mirrorConfig = `
apiVersion: configbutler.ai/v1alpha1
kind: GitRepoConfig
metadata: {name: platform, namespace: gitops-reverser-system}
spec:
  repoUrl: %s
  allowedBranches: [main]
  secretRef: {name: git-credentials}
---
apiVersion: configbutler.ai/v1alpha1
kind: GitDestination
metadata: {name: prod, namespace: gitops-reverser-system}
spec:
  repoRef: {name: platform}
  branch: main
  baseFolder: clusters/prod
  accessPolicy: {namespaces: [team-a]}
---
apiVersion: configbutler.ai/v1alpha1
kind: WatchRule
metadata: {name: team-a, namespace: team-a}
spec:
  destinationRef: {name: prod, namespace: gitops-reverser-system}
  rules:
    - resources: [configmaps, deployments]
---
apiVersion: configbutler.ai/v1alpha1
kind: ClusterWatchRule
metadata: {name: namespaces}
spec:
  destinationRef: {name: prod, namespace: gitops-reverser-system}
  rules:
    - scope: Cluster
      resources: [namespaces]
`

// notExercised are the permissions of deploy/rbac.yaml the scenario above does not use, each
// with the code path that does. Reads that a user's rules may select are not listed.
var notExercised = map[string]string{
	"update secrets": "webhook.SelfManaged renews the certificate Secret 30 days before it expires",
	"patch events":   "client-go's event recorder patches an Event when it repeats (count, lastTimestamp)",
	// The shipped daemon keeps both approver policies (--approver-policy=mutating).
	"delete validatingadmissionpolicies.admissionregistration.k8s.io":       approverPoliciesRemoved,
	"delete validatingadmissionpolicybindings.admissionregistration.k8s.io": approverPoliciesRemoved,
	"delete mutatingadmissionpolicies.admissionregistration.k8s.io":         approverPoliciesRemoved,
	"delete mutatingadmissionpolicybindings.admissionregistration.k8s.io":   approverPoliciesRemoved,
	// Informers stream their initial list through a watch (WatchList) where the apiserver
	// supports it, and list otherwise.
	"list gitrepoconfigs.configbutler.ai":    "the configuration informers, on apiservers without WatchList",
	"list gitdestinations.configbutler.ai":   "the configuration informers, on apiservers without WatchList",
	"list watchrules.configbutler.ai":        "the configuration informers, on apiservers without WatchList",
	"list clusterwatchrules.configbutler.ai": "the configuration informers, on apiservers without WatchList",
	"list secrets":                           "the credentials Secret watch, on apiservers without WatchList",
	"list notifychannels.configbutler.ai":    "the notifier's informers, on apiservers without WatchList",
	"list notifyrules.configbutler.ai":       "the notifier's informers, on apiservers without WatchList",
	// This scenario has no NotifyChannel or NotifyRule: package notify's tests write their status.
	"patch notifychannels/status.configbutler.ai": "notify.Notifier.writeChannelStatus, for each NotifyChannel",
	"patch notifyrules/status.configbutler.ai":    "notify.Notifier.reconcileRule, for each NotifyRule",
	// This scenario mirrors no RemoteCluster: TestHubMirrorsRemoteClusters (package daemon) does.
	"list remoteclusters.configbutler.ai":         "the RemoteClusters informer, started once a GitDestination names a cluster",
	"watch remoteclusters.configbutler.ai":        "the RemoteClusters informer, started once a GitDestination names a cluster",
	"patch remoteclusters/status.configbutler.ai": "watch.Manager.reportClusters, for each RemoteCluster a destination of this replica uses",
	// This scenario enables write-back on no destination: TestShippedWriteBackActsOnlyAsTheRulesServiceAccount
	// runs it under the shipped RBAC.
	"get proposals.configbutler.ai":                    writeBackExercised,
	"list proposals.configbutler.ai":                   writeBackExercised,
	"watch proposals.configbutler.ai":                  writeBackExercised,
	"create proposals.configbutler.ai":                 writeBackExercised,
	"update proposals.configbutler.ai":                 writeBackExercised,
	"patch proposals.configbutler.ai":                  writeBackExercised,
	"delete proposals.configbutler.ai":                 writeBackExercised,
	"get proposals/status.configbutler.ai":             writeBackExercised,
	"update proposals/status.configbutler.ai":          writeBackExercised,
	"patch proposals/status.configbutler.ai":           writeBackExercised,
	"get syncruns.configbutler.ai":                     writeBackExercised,
	"list syncruns.configbutler.ai":                    writeBackExercised,
	"watch syncruns.configbutler.ai":                   writeBackExercised,
	"create syncruns.configbutler.ai":                  writeBackExercised,
	"update syncruns.configbutler.ai":                  writeBackExercised,
	"patch syncruns.configbutler.ai":                   writeBackExercised,
	"delete syncruns.configbutler.ai":                  writeBackExercised,
	"create subjectaccessreviews.authorization.k8s.io": writeBackExercised,
	// The receiver server is not in the daemon yet; only the API is.
	"get receivers.configbutler.ai":           receiversExercised,
	"list receivers.configbutler.ai":          receiversExercised,
	"watch receivers.configbutler.ai":         receiversExercised,
	"get receivers/status.configbutler.ai":    receiversExercised,
	"update receivers/status.configbutler.ai": receiversExercised,
	"patch receivers/status.configbutler.ai":  receiversExercised,
	"create receivers.configbutler.ai":        receiversExercised,
	"update receivers.configbutler.ai":        receiversExercised,
	"patch receivers.configbutler.ai":         receiversExercised,
	"delete receivers.configbutler.ai":        receiversExercised,
}

const approverPoliciesRemoved = "--approver-policy=validating or none removes the daemon's own policies (crds.InstallApproverPolicies)"

const writeBackExercised = "write-back — exercised by TestShippedWriteBackActsOnlyAsTheRulesServiceAccount and the writeback tests"

const receiversExercised = "receivers (issue 10) — exercised once the receiver server lands"

// checkRecordedRequests fails on any request the apiserver refused, and on any granted permission
// the daemon did not use that notExercised does not explain.
func checkRecordedRequests(t *testing.T, rec *apiRecorder) {
	t.Helper()
	for _, r := range rec.refused() {
		t.Errorf("the apiserver refused %s: %d", r, r.status)
	}
	requests := rec.recorded()
	used := map[string]bool{}
	for _, r := range requests {
		used[r.String()] = true
	}
	summary := make([]string, 0, len(used))
	for u := range used {
		summary = append(summary, u)
	}
	sort.Strings(summary)
	t.Logf("API requests of the daemon (%d in all):\n  %s", len(requests), strings.Join(summary, "\n  "))

	objs := readObjects(t, "rbac.yaml")
	var clusterRole rbacv1.ClusterRole
	var role, leaderRole rbacv1.Role
	object(t, objs, "ClusterRole", "gitops-reverser", &clusterRole)
	object(t, objs, "Role", "gitops-reverser", &role)
	object(t, objs, "Role", "gitops-reverser-leader-election", &leaderRole)
	grants := func(rules []rbacv1.PolicyRule, namespace string) {
		for _, rule := range rules {
			if mirrorRead(rule) {
				continue
			}
			for _, g := range rule.APIGroups {
				for _, res := range rule.Resources {
					for _, verb := range rule.Verbs {
						p := permission{verb: verb, group: g, resource: res}
						if !slices.ContainsFunc(requests, func(r recordedRequest) bool {
							return p.covers(r) && (len(rule.ResourceNames) == 0 || slices.Contains(rule.ResourceNames, r.name)) &&
								(namespace == "" || r.namespace == namespace)
						}) && notExercised[p.String()] == "" {
							t.Errorf("deploy/rbac.yaml grants %q, which the daemon never used: remove it, or say in notExercised which code needs it", p)
						}
					}
				}
			}
		}
	}
	grants(clusterRole.Rules, "")
	grants(role.Rules, role.Namespace)
	grants(leaderRole.Rules, leaderRole.Namespace)
}

// mirrorRead is a read-only rule for resources a user's WatchRule may select; which of them the
// daemon reads depends on the rules, not on the daemon.
func mirrorRead(rule rbacv1.PolicyRule) bool {
	readOnly := !slices.ContainsFunc(rule.Verbs, func(v string) bool { return v != "get" && v != "list" && v != "watch" })
	own := slices.Contains(rule.APIGroups, crds.Group) || slices.Contains(rule.APIGroups, "apiextensions.k8s.io")
	return readOnly && !own
}

// checkDaemonArtifacts: what the daemon created under the shipped RBAC is there.
func checkDaemonArtifacts(t testing.TB, kube kubernetes.Interface, d *shippedDaemon) {
	t.Helper()
	ctx := context.Background()
	vwc, err := kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, "gitops-reverser", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the daemon's ValidatingWebhookConfiguration: %v", err)
	}
	if u := vwc.Webhooks[0].ClientConfig.URL; u == nil || !strings.HasPrefix(*u, d.webhookURL) {
		t.Errorf("webhook registered at %v, want %s", u, d.webhookURL)
	}
	secret, err := kube.CoreV1().Secrets(systemNamespace).Get(ctx, "gitops-reverser-webhook-tls", metav1.GetOptions{})
	if err != nil || len(secret.Data["tls.crt"]) == 0 || len(secret.Data["ca.crt"]) == 0 {
		t.Errorf("the webhook certificate Secret: %v", err)
	}
	ext := crdClient()
	for _, gvr := range crdResources {
		crd, err := ext.Get(ctx, gvr+"."+crds.Group, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("CRD %s: %v", gvr, err)
		}
		if managers := crd.GetManagedFields(); len(managers) == 0 || managers[0].Manager != crds.FieldManager {
			t.Errorf("CRD %s not created by the daemon (field manager %q): %+v", gvr, crds.FieldManager, managers)
		}
	}
}

// removeDaemonArtifacts deletes what an earlier run left (CRDs, webhook registration, certificate
// Secret), so this run proves the shipped RBAC lets the daemon create them.
func removeDaemonArtifacts(t testing.TB, kube kubernetes.Interface) {
	t.Helper()
	ctx := context.Background()
	ignoreMissing := func(err error) {
		if err != nil && !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
	}
	ignoreMissing(kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Delete(ctx, "gitops-reverser", metav1.DeleteOptions{}))
	ignoreMissing(kube.CoreV1().Secrets(systemNamespace).Delete(ctx, "gitops-reverser-webhook-tls", metav1.DeleteOptions{}))
	ext := crdClient()
	// The apiserver deletes a CRD's objects before the CRD, and an object with a finalizer stays
	// until someone removes it: this control plane runs no garbage collector to do so. So the
	// objects go first, finalizers cleared, and the CRDs after.
	dyn := dynamic.NewForConfigOrDie(cp.AdminConfig())
	for _, name := range crdResources {
		removeObjects(t, dyn.Resource(crds.GroupVersion.WithResource(name)))
	}
	for _, name := range crdResources {
		ignoreMissing(ext.Delete(ctx, name+"."+crds.Group, metav1.DeleteOptions{}))
	}
	for _, name := range crdResources {
		// With every package's tests on two cores, a minute has once not been enough.
		testenv.Eventually(t, 3*time.Minute, "CRD "+name+" gone after its delete", func() (bool, string) {
			crd, err := ext.Get(ctx, name+"."+crds.Group, metav1.GetOptions{})
			if err != nil {
				return apierrors.IsNotFound(err), err.Error()
			}
			left, _ := dyn.Resource(crds.GroupVersion.WithResource(name)).List(ctx, metav1.ListOptions{})
			n := 0
			if left != nil {
				n = len(left.Items)
			}
			return false, fmt.Sprintf("still there (deleting since %v, %d objects left, conditions %+v)",
				crd.DeletionTimestamp, n, crd.Status.Conditions)
		})
	}
	t.Cleanup(func() {
		_ = kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Delete(ctx, "gitops-reverser", metav1.DeleteOptions{})
	})
}

// removeObjects deletes every object of a resource of ours, in every namespace, clearing the
// finalizers of any that would otherwise stay. A resource whose CRD is gone has nothing to remove.
func removeObjects(t testing.TB, client dynamic.NamespaceableResourceInterface) {
	t.Helper()
	ctx := context.Background()
	list, err := client.List(ctx, metav1.ListOptions{})
	if err != nil {
		return // no such resource (yet): nothing to remove
	}
	for _, o := range list.Items {
		if len(o.GetFinalizers()) > 0 {
			patch := []byte(`{"metadata":{"finalizers":null}}`)
			if _, err := client.Namespace(o.GetNamespace()).Patch(ctx, o.GetName(), types.MergePatchType, patch, metav1.PatchOptions{}); err != nil && !apierrors.IsNotFound(err) {
				t.Fatalf("clear the finalizers of %s/%s: %v", o.GetNamespace(), o.GetName(), err)
			}
		}
		if err := client.Namespace(o.GetNamespace()).Delete(ctx, o.GetName(), metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Fatalf("delete %s/%s: %v", o.GetNamespace(), o.GetName(), err)
		}
	}
}

// crdResources are the resources of the daemon's CRDs.
var crdResources = []string{"gitrepoconfigs", "gitdestinations", "watchrules", "clusterwatchrules", "proposals", "syncruns", "receivers"}

func crdClient() apiextensionsv1client.CustomResourceDefinitionInterface {
	return apiextensionsclient.NewForConfigOrDie(cp.AdminConfig()).ApiextensionsV1().CustomResourceDefinitions()
}

// ready says whether the configbutler.ai object has condition Ready=True.
func ready(ctx context.Context, resource, namespace, name string) bool {
	gvr := crds.GroupVersion.WithResource(resource)
	obj, err := dynamic.NewForConfigOrDie(cp.AdminConfig()).Resource(gvr).Namespace(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return false
	}
	conditions, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
	for _, c := range conditions {
		if m, ok := c.(map[string]any); ok && m["type"] == crds.ConditionReady && m["status"] == "True" {
			return true
		}
	}
	return false
}

// lastAuthor is the author of the newest commit that changed path.
func lastAuthor(t testing.TB, srv *testenv.GitServer, path string) string {
	t.Helper()
	history, err := srv.History("state", "main")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range history {
		if _, ok := c.Files[path]; ok {
			return c.AuthorName
		}
	}
	return ""
}

func webDeployment() *appsv1.Deployment {
	labels := map[string]string{"app": "web"}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: workloadNamespace},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "nginx:1.27"}}},
			},
		},
	}
}

// TestShippedIdentityCannotReadForeignSecretsNorWrite asks the apiserver what the shipped
// ServiceAccount may do, then tries some of it for real: it reads what it mirrors and its own
// Secrets, and can neither read other namespaces' Secrets, nor change a workload, nor give itself
// more rights.
func TestShippedIdentityCannotReadForeignSecretsNorWrite(t *testing.T) {
	admin := adminKubeconfig(t)
	kube := kubernetes.NewForConfigOrDie(cp.AdminConfig())
	kubectl(t, admin, nil, "apply", "-f", deployPath("namespace.yaml"), "-f", deployPath("rbac.yaml"))
	ensureNamespace(t, kube, workloadNamespace)
	waitAuthorized(t, authorizationv1.ResourceAttributes{Verb: "get", Resource: "secrets", Namespace: systemNamespace})

	type attr = authorizationv1.ResourceAttributes
	cases := []struct {
		name    string
		attr    attr
		allowed bool
	}{
		// Secrets: its own namespace only (credentials are watched by name).
		{"gets Secrets in its own namespace", attr{Verb: "get", Resource: "secrets", Namespace: systemNamespace}, true},
		{"watches Secrets in its own namespace", attr{Verb: "watch", Resource: "secrets", Namespace: systemNamespace}, true},
		{"cannot get Secrets in another namespace", attr{Verb: "get", Resource: "secrets", Namespace: workloadNamespace}, false},
		{"cannot get Secrets in kube-system", attr{Verb: "get", Resource: "secrets", Namespace: "kube-system"}, false},
		{"cannot list Secrets in another namespace", attr{Verb: "list", Resource: "secrets", Namespace: workloadNamespace}, false},
		{"cannot list Secrets cluster-wide", attr{Verb: "list", Resource: "secrets"}, false},
		{"cannot watch Secrets cluster-wide", attr{Verb: "watch", Resource: "secrets"}, false},
		{"cannot update Secrets in another namespace", attr{Verb: "update", Resource: "secrets", Namespace: workloadNamespace}, false},
		// Reads what rules select, everywhere.
		{"lists ConfigMaps cluster-wide", attr{Verb: "list", Resource: "configmaps"}, true},
		{"watches Deployments cluster-wide", attr{Verb: "watch", Group: "apps", Resource: "deployments"}, true},
		{"reads ClusterRoles", attr{Verb: "list", Group: "rbac.authorization.k8s.io", Resource: "clusterroles"}, true},
		{"patches the status of its GitDestinations", attr{Verb: "patch", Group: crds.Group, Resource: "gitdestinations", Subresource: "status", Namespace: workloadNamespace}, true},
		{"creates Events", attr{Verb: "create", Resource: "events", Namespace: workloadNamespace}, true},
		// Write-back bookkeeping, and reviewing the reviewer.
		{"opens Proposals", attr{Verb: "create", Group: crds.Group, Resource: "proposals", Namespace: systemNamespace}, true},
		{"reports on Proposals", attr{Verb: "update", Group: crds.Group, Resource: "proposals", Subresource: "status", Namespace: systemNamespace}, true},
		{"records SyncRuns", attr{Verb: "create", Group: crds.Group, Resource: "syncruns", Namespace: systemNamespace}, true},
		// Receivers: reads them and reports on them.
		{"watches Receivers", attr{Verb: "watch", Group: crds.Group, Resource: "receivers", Namespace: workloadNamespace}, true},
		{"creates generated Receivers", attr{Verb: "create", Group: crds.Group, Resource: "receivers", Namespace: workloadNamespace}, true},
		{"deletes generated Receivers", attr{Verb: "delete", Group: crds.Group, Resource: "receivers", Namespace: workloadNamespace}, true},
		{"reports on Receivers", attr{Verb: "patch", Group: crds.Group, Resource: "receivers", Subresource: "status", Namespace: workloadNamespace}, true},
		{"asks whether a reviewer may make a change", attr{Verb: "create", Group: "authorization.k8s.io", Resource: "subjectaccessreviews"}, true},
		{"cannot create TokenReviews", attr{Verb: "create", Group: "authentication.k8s.io", Resource: "tokenreviews"}, false},
		// Never writes what it mirrors (write-back-rbac.yaml, not applied here, would allow it).
		{"cannot create ConfigMaps", attr{Verb: "create", Resource: "configmaps", Namespace: workloadNamespace}, false},
		{"cannot update ConfigMaps", attr{Verb: "update", Resource: "configmaps", Namespace: workloadNamespace}, false},
		{"cannot patch ConfigMaps", attr{Verb: "patch", Resource: "configmaps", Namespace: workloadNamespace}, false},
		{"cannot delete ConfigMaps", attr{Verb: "delete", Resource: "configmaps", Namespace: workloadNamespace}, false},
		{"cannot create Deployments", attr{Verb: "create", Group: "apps", Resource: "deployments", Namespace: workloadNamespace}, false},
		{"cannot update Deployments", attr{Verb: "update", Group: "apps", Resource: "deployments", Namespace: workloadNamespace}, false},
		{"cannot patch Deployments", attr{Verb: "patch", Group: "apps", Resource: "deployments", Namespace: workloadNamespace}, false},
		{"cannot delete Deployments", attr{Verb: "delete", Group: "apps", Resource: "deployments", Namespace: workloadNamespace}, false},
		{"cannot scale Deployments", attr{Verb: "update", Group: "apps", Resource: "deployments", Subresource: "scale", Namespace: workloadNamespace}, false},
		{"cannot create Services", attr{Verb: "create", Resource: "services", Namespace: workloadNamespace}, false},
		{"cannot update Services", attr{Verb: "update", Resource: "services", Namespace: workloadNamespace}, false},
		{"cannot patch Services", attr{Verb: "patch", Resource: "services", Namespace: workloadNamespace}, false},
		{"cannot delete Services", attr{Verb: "delete", Resource: "services", Namespace: workloadNamespace}, false},
		{"cannot create Pods", attr{Verb: "create", Resource: "pods", Namespace: workloadNamespace}, false},
		{"cannot exec into Pods", attr{Verb: "create", Resource: "pods", Subresource: "exec", Namespace: workloadNamespace}, false},
		{"cannot change its own configuration", attr{Verb: "update", Group: crds.Group, Resource: "gitrepoconfigs", Namespace: systemNamespace}, false},
		{"cannot create CRDs", attr{Verb: "create", Group: "apiextensions.k8s.io", Resource: "customresourcedefinitions"}, false},
		{"cannot apply other CRDs", attr{Verb: "patch", Group: "apiextensions.k8s.io", Resource: "customresourcedefinitions", Name: "widgets.example.com"}, false},
		{"applies its own CRDs", attr{Verb: "patch", Group: "apiextensions.k8s.io", Resource: "customresourcedefinitions", Name: "gitrepoconfigs.configbutler.ai"}, true},
		{"applies its write-back CRDs", attr{Verb: "create", Group: "apiextensions.k8s.io", Resource: "customresourcedefinitions", Name: "proposals.configbutler.ai"}, true},
		{"cannot delete CRDs", attr{Verb: "delete", Group: "apiextensions.k8s.io", Resource: "customresourcedefinitions", Name: "gitrepoconfigs.configbutler.ai"}, false},
		{"cannot patch other webhook configurations", attr{Verb: "patch", Group: "admissionregistration.k8s.io", Resource: "validatingwebhookconfigurations", Name: "someone-else"}, false},
		{"cannot create other webhook configurations", attr{Verb: "create", Group: "admissionregistration.k8s.io", Resource: "validatingwebhookconfigurations"}, false},
		{"cannot create mutating webhooks", attr{Verb: "create", Group: "admissionregistration.k8s.io", Resource: "mutatingwebhookconfigurations"}, false},
		// Cannot escalate.
		{"cannot update ClusterRoles", attr{Verb: "update", Group: "rbac.authorization.k8s.io", Resource: "clusterroles", Name: "gitops-reverser"}, false},
		{"cannot patch ClusterRoles", attr{Verb: "patch", Group: "rbac.authorization.k8s.io", Resource: "clusterroles", Name: "gitops-reverser"}, false},
		{"cannot escalate ClusterRoles", attr{Verb: "escalate", Group: "rbac.authorization.k8s.io", Resource: "clusterroles"}, false},
		{"cannot bind ClusterRoles", attr{Verb: "bind", Group: "rbac.authorization.k8s.io", Resource: "clusterroles", Name: "cluster-admin"}, false},
		{"cannot update its Role", attr{Verb: "update", Group: "rbac.authorization.k8s.io", Resource: "roles", Namespace: systemNamespace, Name: "gitops-reverser"}, false},
		{"cannot create RoleBindings in its own namespace", attr{Verb: "create", Group: "rbac.authorization.k8s.io", Resource: "rolebindings", Namespace: systemNamespace}, false},
		{"cannot create RoleBindings elsewhere", attr{Verb: "create", Group: "rbac.authorization.k8s.io", Resource: "rolebindings", Namespace: workloadNamespace}, false},
		{"cannot create ClusterRoleBindings", attr{Verb: "create", Group: "rbac.authorization.k8s.io", Resource: "clusterrolebindings"}, false},
		{"cannot impersonate users", attr{Verb: "impersonate", Resource: "users"}, false},
		{"cannot impersonate ServiceAccounts", attr{Verb: "impersonate", Resource: "serviceaccounts", Namespace: workloadNamespace}, false},
		{"cannot mint ServiceAccount tokens", attr{Verb: "create", Resource: "serviceaccounts", Subresource: "token", Namespace: systemNamespace}, false},
		{"cannot approve certificates", attr{Verb: "approve", Group: "certificates.k8s.io", Resource: "signers"}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := accessAllowed(t, tc.attr); got != tc.allowed {
				t.Errorf("allowed = %t, want %t for %+v", got, tc.allowed, tc.attr)
			}
		})
	}
	t.Run("real requests", func(t *testing.T) { tryAsServiceAccount(t, kube) })
}

// tryAsServiceAccount makes real requests as the shipped ServiceAccount: the refusals come from
// the apiserver, not from a review.
func tryAsServiceAccount(t *testing.T, kube kubernetes.Interface) {
	ctx := context.Background()
	for _, ns := range []string{systemNamespace, workloadNamespace} {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "identity-probe", Namespace: ns}, StringData: map[string]string{"k": "v"}}
		if _, err := kube.CoreV1().Secrets(ns).Create(ctx, s, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	sa := kubernetes.NewForConfigOrDie(cp.ImpersonatingConfig(serviceAccount, serviceAccountGroups...))
	cases := []apiCall{
		{"gets a Secret in its own namespace", func() error {
			_, err := sa.CoreV1().Secrets(systemNamespace).Get(ctx, "identity-probe", metav1.GetOptions{})
			return err
		}, true},
		{"cannot get a Secret in another namespace", func() error {
			_, err := sa.CoreV1().Secrets(workloadNamespace).Get(ctx, "identity-probe", metav1.GetOptions{})
			return err
		}, false},
		{"cannot list Secrets cluster-wide", func() error {
			_, err := sa.CoreV1().Secrets("").List(ctx, metav1.ListOptions{})
			return err
		}, false},
		{"cannot create a ConfigMap", func() error {
			cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "by-daemon", Namespace: workloadNamespace}}
			_, err := sa.CoreV1().ConfigMaps(workloadNamespace).Create(ctx, cm, metav1.CreateOptions{})
			return err
		}, false},
		{"cannot grant itself cluster-admin", func() error {
			rb := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "escalate", Namespace: systemNamespace},
				RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"},
				Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: "gitops-reverser", Namespace: systemNamespace}}}
			_, err := sa.RbacV1().RoleBindings(systemNamespace).Create(ctx, rb, metav1.CreateOptions{})
			return err
		}, false},
		{"cannot widen its ClusterRole", func() error {
			_, err := sa.RbacV1().ClusterRoles().Patch(ctx, "gitops-reverser", "application/merge-patch+json",
				[]byte(`{"rules":[{"apiGroups":["*"],"resources":["*"],"verbs":["*"]}]}`), metav1.PatchOptions{})
			return err
		}, false},
	}
	checkCalls(t, cases)
}

// apiCall is a request made as the daemon's identity, and whether the apiserver must allow it.
type apiCall struct {
	name    string
	call    func() error
	allowed bool
}

// checkCalls makes each call: an allowed one must work, any other must be Forbidden.
func checkCalls(t *testing.T, calls []apiCall) {
	t.Helper()
	for _, c := range calls {
		err := c.call()
		switch {
		case c.allowed && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case !c.allowed && !apierrors.IsForbidden(err):
			t.Errorf("%s: err = %v, want Forbidden", c.name, err)
		}
	}
}
