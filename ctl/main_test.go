package ctl

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/urfave/cli/v2"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/configbutler/gitops-reverser/crds"
	"github.com/configbutler/gitops-reverser/testenv"
)

// cp is the package's shared control plane: one real etcd + kube-apiserver for all tests.
var cp *testenv.ControlPlane

// TestMain runs the tests against one control plane, then checks that no goroutine outlived them.
func TestMain(m *testing.M) {
	os.Exit(testenv.RunMainNoLeaks(m, &cp, testenv.LeakIgnores()...))
}

// clusterReady is set once the CRDs and the validating approver policy are in force.
var (
	clusterMu    sync.Mutex
	clusterReady bool
)

// setupCluster installs the CRDs and the validating approver policy, which refuses a decision
// that does not name its requester in spec.decidedBy, and waits until the apiserver enforces it:
// until it refuses a Proposal that names someone else.
func setupCluster(t *testing.T) {
	t.Helper()
	clusterMu.Lock()
	defer clusterMu.Unlock()
	if clusterReady {
		return
	}
	ctx := context.Background()
	if err := crds.Install(ctx, cp.AdminConfig(), slog.New(slog.DiscardHandler)); err != nil {
		t.Fatal(err)
	}
	dyn := dynamic.NewForConfigOrDie(cp.AdminConfig())
	// The admin creates the Proposals here, as the daemon would: the policy lets only it.
	self, err := kubernetes.NewForConfigOrDie(cp.AdminConfig()).AuthenticationV1().SelfSubjectReviews().Create(ctx,
		&authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	params := crds.ApproverParams{Namespace: "default", Daemon: self.Status.UserInfo.Username}
	if _, _, err := crds.InstallApproverPolicies(ctx, dyn, crds.ApproverPolicyValidating, params); err != nil {
		t.Fatal(err)
	}
	probe, err := crds.ToUnstructured(&crds.Proposal{ObjectMeta: metav1.ObjectMeta{Name: "approver-probe", Namespace: "default"},
		Spec: crds.ProposalSpec{DestinationRef: crds.LocalReference{Name: "none"}, Change: crds.ChangeDestroy,
			Target: crds.ProposalTarget{APIVersion: "v1", Kind: "ConfigMap", Resource: "configmaps", Namespace: "default", Name: "probe"},
			Path:   "probe.yaml", SourceCommit: strings.Repeat("a", 40), LiveResourceVersion: "1", LiveDigest: strings.Repeat("c", 64),
			DecidedBy: &crds.Reviewer{Username: "someone-else"}}})
	if err != nil {
		t.Fatal(err)
	}
	proposals := dyn.Resource(crds.Proposals).Namespace("default")
	testenv.Eventually(t, time.Minute, "the approver policy in force", func() (bool, string) {
		_, err := proposals.Create(ctx, probe, metav1.CreateOptions{})
		if err == nil {
			_ = proposals.Delete(ctx, probe.GetName(), metav1.DeleteOptions{})
			return false, "a Proposal naming someone else was accepted"
		}
		return apierrors.IsForbidden(err) || apierrors.IsInvalid(err), err.Error()
	})
	clusterReady = true
}

// world is one namespace with a GitRepoConfig, the GitDestination prod (write-back on, its status
// as the daemon writes it) and three Proposals of prod: two Pending, one Applied.
type world struct {
	t    *testing.T
	ns   string
	kube kubernetes.Interface
	dyn  dynamic.Interface
	dir  string
}

func newWorld(t *testing.T) *world {
	t.Helper()
	setupCluster(t)
	w := &world{t: t, kube: kubernetes.NewForConfigOrDie(cp.AdminConfig()), dyn: dynamic.NewForConfigOrDie(cp.AdminConfig()), dir: t.TempDir()}
	w.ns = w.namespace()
	w.create(crds.GitRepoConfigs, &crds.GitRepoConfig{ObjectMeta: metav1.ObjectMeta{Name: "platform", Namespace: w.ns},
		Spec: crds.GitRepoConfigSpec{RepoURL: "https://git.example.com/platform.git", AllowedBranches: []string{"main"}}}, nil)
	w.destination("prod", &crds.WriteBack{Enabled: true}, crds.GitDestinationStatus{
		Status: crds.Status{Conditions: []metav1.Condition{readyCondition("Ready", "writing https://git.example.com/platform.git@main under clusters/prod/")}},
		WriteBack: &crds.WriteBackStatus{LastSyncRun: "prod-run-1", LastSyncTime: &metav1.Time{Time: time.Now().Add(-3 * time.Minute)},
			PendingProposals: 2, LastRevision: strings.Repeat("b", 40),
			Conditions: []metav1.Condition{readyCondition("ApproverFromValidatingPolicy", "an approval names its approver in spec.decidedBy")}},
		Git: &crds.GitProgress{LastPushedCommit: strings.Repeat("d", 40), LastPushTime: &metav1.Time{Time: time.Now().Add(-5 * time.Minute)},
			LastPushAuthor: "Alice Example <alice@example.com>", Pending: 4},
	})
	w.proposal("web-replicas", "web", crds.PhasePending)
	w.proposal("api-replicas", "api", crds.PhasePending)
	w.proposal("old-change", "old", crds.PhaseApplied)
	return w
}

// worlds numbers the namespaces, so a test may make more than one world.
var worlds atomic.Int32

// namespace creates a namespace named after the test.
func (w *world) namespace() string {
	w.t.Helper()
	name := strings.ToLower(strings.NewReplacer("/", "-", "_", "-").Replace(w.t.Name()))
	name = fmt.Sprintf("%s-%d", strings.Trim(name[:min(len(name), 50)], "-"), worlds.Add(1))
	if _, err := w.kube.CoreV1().Namespaces().Create(context.Background(),
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		w.t.Fatal(err)
	}
	return name
}

func readyCondition(reason, message string) metav1.Condition {
	return metav1.Condition{Type: crds.ConditionReady, Status: metav1.ConditionTrue, Reason: reason, Message: message,
		LastTransitionTime: metav1.Now()}
}

// destination creates a GitDestination of the repository platform, with status.
func (w *world) destination(name string, wb *crds.WriteBack, status crds.GitDestinationStatus) {
	w.t.Helper()
	w.create(crds.GitDestinations, &crds.GitDestination{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: w.ns},
		Spec: crds.GitDestinationSpec{RepoRef: crds.NamespacedReference{Name: "platform"}, Branch: "main",
			BaseFolder: "clusters/" + name, WriteBack: wb}}, status)
}

// adoptedDestination creates a GitDestination of layout Existing with status.
func (w *world) adoptedDestination(name string, status crds.GitDestinationStatus) {
	w.t.Helper()
	w.create(crds.GitDestinations, &crds.GitDestination{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: w.ns},
		Spec: crds.GitDestinationSpec{RepoRef: crds.NamespacedReference{Name: "platform"}, Branch: "main", BaseFolder: "apps",
			Layout: crds.LayoutExisting}}, status)
}

// pullRequestDestination creates a GitDestination of the repository platform that delivers by
// pull request from headBranch ("" is the default one), with status.
func (w *world) pullRequestDestination(name, headBranch string, status crds.GitDestinationStatus) {
	w.t.Helper()
	w.create(crds.GitDestinations, &crds.GitDestination{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: w.ns},
		Spec: crds.GitDestinationSpec{RepoRef: crds.NamespacedReference{Name: "platform"}, Branch: "main", BaseFolder: "clusters/" + name,
			Push: &crds.Push{Mode: crds.PushPullRequest, PullRequest: &crds.PullRequestPush{Provider: crds.ProviderGitea, HeadBranch: headBranch}}}},
		status)
}

// proposal creates a Proposal of prod that scales the Deployment target, in phase.
func (w *world) proposal(name, target string, phase crds.ProposalPhase) {
	w.t.Helper()
	w.create(crds.Proposals, &crds.Proposal{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: w.ns, Labels: map[string]string{crds.LabelDestination: "prod"}},
		Spec: crds.ProposalSpec{
			DestinationRef:      crds.LocalReference{Name: "prod"},
			Change:              crds.ChangeUpdate,
			Target:              crds.ProposalTarget{APIVersion: "apps/v1", Kind: "Deployment", Resource: "deployments", Namespace: "team-a", Name: target},
			Path:                "clusters/prod/team-a/deployments.apps/" + target + ".yaml",
			SourceCommit:        strings.Repeat("a", 40),
			Author:              crds.GitAuthor{Name: "Alice Example", Email: "alice@example.com"},
			Desired:             "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: " + target + "\n  namespace: team-a\nspec:\n  replicas: 3\n",
			Diff:                diffOf(target),
			LiveResourceVersion: "12345",
			LiveDigest:          strings.Repeat("c", 64),
		},
	}, crds.ProposalStatus{Phase: phase, Message: "waiting for a decision"})
}

func diffOf(target string) string {
	return "--- live " + target + "\n+++ desired " + target + "\n@@ -5 +5 @@\n-  replicas: 2\n+  replicas: 3\n"
}

// create creates obj (a crds type) as the admin and writes status through the status subresource.
func (w *world) create(gvr schema.GroupVersionResource, obj any, status any) {
	w.t.Helper()
	ctx := context.Background()
	u, err := crds.ToUnstructured(obj)
	if err != nil {
		w.t.Fatal(err)
	}
	client := w.dyn.Resource(gvr).Namespace(u.GetNamespace())
	created, err := client.Create(ctx, u, metav1.CreateOptions{})
	if err != nil {
		w.t.Fatalf("create %s %s: %v", gvr.Resource, u.GetName(), err)
	}
	if status == nil {
		return
	}
	st, err := crds.ToUnstructured(status)
	if err != nil {
		w.t.Fatal(err)
	}
	created.Object["status"] = st.Object
	if _, err := client.UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
		w.t.Fatalf("status of %s %s: %v", gvr.Resource, u.GetName(), err)
	}
}

// grant lets user get, list, watch and patch Proposals and GitDestinations in the world's
// namespace, and waits until the authorizer agrees.
func (w *world) grant(user string) {
	w.t.Helper()
	w.grantVerbs(user, "get", "list", "watch", "patch")
}

// grantVerbs lets user use verbs on Proposals and GitDestinations in the world's namespace, and
// waits until the authorizer agrees.
func (w *world) grantVerbs(user string, verbs ...string) {
	w.t.Helper()
	ctx := context.Background()
	name := user + "-reviews"
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: w.ns},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{crds.Group}, Resources: []string{"proposals", "gitdestinations", "remoteclusters", "notifychannels"}, Verbs: verbs}}}
	if _, err := w.kube.RbacV1().Roles(w.ns).Create(ctx, role, metav1.CreateOptions{}); err != nil {
		w.t.Fatal(err)
	}
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: w.ns},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}}}
	if _, err := w.kube.RbacV1().RoleBindings(w.ns).Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		w.t.Fatal(err)
	}
	client := dynamic.NewForConfigOrDie(cp.UserConfig(user))
	testenv.Eventually(w.t, time.Minute, user+" may "+verbs[0]+" gitdestinations", func() (bool, string) {
		_, err := client.Resource(crds.GitDestinations).Namespace(w.ns).Get(ctx, "prod", metav1.GetOptions{})
		if verbs[0] == "patch" {
			_, err = client.Resource(crds.GitDestinations).Namespace(w.ns).Patch(ctx, "prod", types.MergePatchType, []byte(`{}`), metav1.PatchOptions{})
		}
		return err == nil, fmt.Sprint(err)
	})
}

// kubeconfig writes a kubeconfig of user whose context's namespace is namespace.
func (w *world) kubeconfig(user, namespace string) string {
	w.t.Helper()
	path := filepath.Join(w.dir, user+"-"+namespace+".kubeconfig")
	if err := cp.WriteUserKubeconfig(path, user, namespace); err != nil {
		w.t.Fatal(err)
	}
	return path
}

// read reads an object back as the admin.
func read[T any](w *world, gvr schema.GroupVersionResource, name string) *T {
	w.t.Helper()
	u, err := w.dyn.Resource(gvr).Namespace(w.ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		w.t.Fatal(err)
	}
	obj, err := crds.FromUnstructured[T](u)
	if err != nil {
		w.t.Fatal(err)
	}
	return obj
}

// result is what one run of the command line printed and returned.
type result struct {
	stdout, stderr string
	err            error
}

// exitCode is the code main exits with for the result.
func (r result) exitCode() int {
	var coder cli.ExitCoder
	switch {
	case r.err == nil:
		return 0
	case errors.As(r.err, &coder):
		return coder.ExitCode()
	default:
		return -1 // main would exit 1, but every error of Run must carry its code
	}
}

// cli runs the command line as the kubectl plugin, in-process, with stdout and stderr captured.
func runCLI(t *testing.T, args ...string) result {
	t.Helper()
	var stdout, stderr bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err := Run(ctx, "1.2.3-test", append([]string{"/usr/local/bin/" + PluginName}, args...), &stdout, &stderr)
	t.Logf("%s\n-> err=%v\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), err, stdout.String(), stderr.String())
	return result{stdout: stdout.String(), stderr: stderr.String(), err: err}
}
