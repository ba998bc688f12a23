package daemon

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/configbutler/gitops-reverser/crds"
	"github.com/configbutler/gitops-reverser/layout"
	"github.com/configbutler/gitops-reverser/sanitize"
	"github.com/configbutler/gitops-reverser/testenv"
)

// wbWorld is a mirrored namespace whose GitDestination (baseFolder "live") enables write-back,
// with a running daemon whose webhook the apiserver calls, and a first run that set the baseline
// (when write-back is enabled from the start).
type wbWorld struct {
	t    testing.TB
	root testing.TB // the test that owns the world (and its daemons)
	ns   string
	srv  *testenv.GitServer
	kube *kubernetes.Clientset
	dyn  dynamic.Interface
	d    *testenv.Daemon
	sync *int // the last sync-now value, shared by the world's subtests
}

var alice = testenv.Signature{Name: "Alice Example", Email: "alice@example.com"}

// prep, if set, runs before the daemon starts (its edits are before the baseline).
func newWBWorld(t testing.TB, ns string, writeBack crds.WriteBack, prep func(*wbWorld), flags ...string) *wbWorld {
	t.Helper()
	w := prepareWBWorld(t, ns, writeBack)
	if prep != nil {
		prep(w)
	}
	w.d = startDaemon(t, t.TempDir(), append([]string{"--git-batch-quiet-ms", "200"}, flags...)...)
	w.waitBaseline(writeBack.Enabled)
	return w
}

// prepareWBWorld is a world without its daemon: the namespace with a ConfigMap "seed", its
// repository, rules selecting ConfigMaps and Deployments, and the destination enabling writeBack.
func prepareWBWorld(t testing.TB, ns string, writeBack crds.WriteBack) *wbWorld {
	t.Helper()
	srv, kube := mirrorSetup(t, ns)
	w := &wbWorld{t: t, root: t, ns: ns, srv: srv, kube: kube, dyn: dynamic.NewForConfigOrDie(planes.Of(t).AdminConfig()), sync: new(int)}
	t.Cleanup(func() { // after the daemon stopped: no later test's page or start sees these proposals
		_ = w.dyn.Resource(crds.Proposals).Namespace(ns).DeleteCollection(context.Background(), metav1.DeleteOptions{}, metav1.ListOptions{})
	})
	writerAccount(t, kube, ns, "writer", "cms", []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: writeVerbs},
		{APIGroups: []string{"apps"}, Resources: []string{"deployments"}, Verbs: writeVerbs},
	})
	w.patch(crds.WatchRules, "cms", map[string]any{"spec": map[string]any{"serviceAccountName": "writer", "rules": []any{
		map[string]any{"resources": []any{"configmaps"}},
		map[string]any{"apiGroups": []any{"apps"}, "resources": []any{"deployments"}},
	}}})
	w.patch(crds.GitDestinations, "dest", map[string]any{"spec": map[string]any{"writeBack": writeBack}})
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "seed", Namespace: ns}, Data: map[string]string{"k": "v"}}
	if _, err := kube.CoreV1().ConfigMaps(ns).Create(context.Background(), cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return w
}

// waitBaseline waits until the world's daemon mirrored the seed and, when writeBack is enabled,
// write-back took a baseline.
func (w *wbWorld) waitBaseline(writeBack bool) {
	w.t.Helper()
	testenv.Eventually(w.t, time.Minute, "seed mirrored", remoteHas(w.srv, w.cmPath("seed")), w.d.FailFast())
	if !writeBack {
		return
	}
	testenv.Eventually(w.t, time.Minute, "write-back baseline", func() (bool, string) {
		st := w.destStatus()
		if st.LastRevision != "" {
			return true, ""
		}
		w.syncNow()
		return false, fmt.Sprintf("status.writeBack = %+v", st)
	}, w.d.FailFast())
}

func (w *wbWorld) patch(gvr schema.GroupVersionResource, name string, body map[string]any) {
	w.t.Helper()
	data, err := json.Marshal(body)
	if err != nil {
		w.t.Fatal(err)
	}
	if _, err := w.dyn.Resource(gvr).Namespace(w.ns).Patch(context.Background(), name, types.MergePatchType, data, metav1.PatchOptions{}); err != nil {
		w.t.Fatal(err)
	}
}

func (w *wbWorld) cmPath(name string) string {
	return layout.Path("live", "", "configmaps", w.ns, name)
}

func (w *wbWorld) destStatus() crds.WriteBackStatus {
	if d := destination(w.t, w.dyn, w.ns, "dest"); d.Status.WriteBack != nil {
		return *d.Status.WriteBack
	}
	return crds.WriteBackStatus{}
}

// destination reads a GitDestination as it is now.
func destination(t testing.TB, dyn dynamic.Interface, ns, name string) *crds.GitDestination {
	t.Helper()
	u, err := dyn.Resource(crds.GitDestinations).Namespace(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	d, err := crds.FromUnstructured[crds.GitDestination](u)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// syncNow sets a new value of the sync-now annotation and waits until the daemon acted on it.
func (w *wbWorld) syncNow() {
	w.t.Helper()
	*w.sync++
	value := fmt.Sprint(*w.sync)
	w.patch(crds.GitDestinations, "dest", map[string]any{"metadata": map[string]any{"annotations": map[string]any{crds.AnnotationSyncNow: value}}})
	testenv.Eventually(w.t, time.Minute, "sync-now "+value+" handled", func() (bool, string) {
		st := w.destStatus()
		return st.LastHandledSyncNow == value, fmt.Sprintf("lastHandledSyncNow %q", st.LastHandledSyncNow)
	}, w.d.FailFast())
}

// replace is strings.Replace once, failing the test when old is not there.
func (w *wbWorld) replace(s, old, new string) string {
	w.t.Helper()
	if !strings.Contains(s, old) {
		w.t.Fatalf("%q not in:\n%s", old, s)
	}
	return strings.Replace(s, old, new, 1)
}

// edit pushes a commit by alice that rewrites files (path → content) and removes others.
func (w *wbWorld) edit(write map[string]string, remove ...string) string {
	w.t.Helper()
	sha, err := w.srv.PushCommit("state", "main", alice, "edit by alice", write, remove)
	if err != nil {
		w.t.Fatal(err)
	}
	return sha
}

// remote reads a file of the remote; "" when absent.
func (w *wbWorld) remote(path string) string {
	data, err := w.srv.ReadFile("state", "main", path)
	if err != nil {
		return ""
	}
	return string(data)
}

func (w *wbWorld) proposals() []*crds.Proposal { return listAs[crds.Proposal](w, crds.Proposals) }

// listAs lists one of our kinds in the world's namespace, as its Go type.
func listAs[T any](w *wbWorld, gvr schema.GroupVersionResource) []*T {
	w.t.Helper()
	list, err := w.dyn.Resource(gvr).Namespace(w.ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		w.t.Fatal(err)
	}
	out := make([]*T, 0, len(list.Items))
	for i := range list.Items {
		obj, err := crds.FromUnstructured[T](&list.Items[i])
		if err != nil {
			w.t.Fatal(err)
		}
		out = append(out, obj)
	}
	return out
}

// waitProposal waits for a proposal of path that satisfies cond, and returns it.
func (w *wbWorld) waitProposal(path, what string, cond func(*crds.Proposal) bool) *crds.Proposal {
	w.t.Helper()
	var found *crds.Proposal
	testenv.Eventually(w.t, time.Minute, what, func() (bool, string) {
		var seen []string
		for _, p := range w.proposals() {
			if p.Spec.Path != path {
				continue
			}
			seen = append(seen, fmt.Sprintf("%s %s %s: %s", p.Name, p.Spec.Change, p.Status.Phase, p.Status.Message))
			if cond(p) {
				found = p
				return true, ""
			}
		}
		return false, fmt.Sprintf("proposals of %s: %v", path, seen)
	}, w.d.FailFast())
	return found
}

// decide sets spec.decision as user (through impersonation, so the webhook sees that user).
func (w *wbWorld) decide(user string, p *crds.Proposal, decision crds.Decision) {
	w.t.Helper()
	client := dynamic.NewForConfigOrDie(planes.Of(w.t).ImpersonatingConfig(user, testenv.Users[user]...))
	body := fmt.Sprintf(`{"spec":{"decision":%q}}`, decision)
	if _, err := client.Resource(crds.Proposals).Namespace(w.ns).Patch(context.Background(), p.Name, types.MergePatchType, []byte(body), metav1.PatchOptions{}); err != nil {
		w.t.Fatalf("%s sets decision %s: %v", user, decision, err)
	}
}

// runs lists the destination's SyncRuns, oldest first.
func (w *wbWorld) runs() []*crds.SyncRun {
	out := listAs[crds.SyncRun](w, crds.SyncRuns)
	slices.SortFunc(out, crds.CompareSyncRuns)
	return out
}

func (w *wbWorld) lastRun() *crds.SyncRun {
	runs := w.runs()
	if len(runs) == 0 {
		w.t.Fatal("no SyncRun")
	}
	return runs[len(runs)-1]
}

// liveYAML is the canonical YAML of a live ConfigMap, as the mirror writes it.
func (w *wbWorld) liveYAML(name string) string {
	w.t.Helper()
	u, err := w.dyn.Resource(corev1.SchemeGroupVersion.WithResource("configmaps")).Namespace(w.ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		w.t.Fatal(err)
	}
	out, err := sanitize.YAML(sanitize.Object(u.Object))
	if err != nil {
		w.t.Fatal(err)
	}
	return string(out)
}

func (w *wbWorld) configMap(name string, data map[string]string) {
	w.t.Helper()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: w.ns}, Data: data}
	if _, err := w.kube.CoreV1().ConfigMaps(w.ns).Create(context.Background(), cm, metav1.CreateOptions{}); err != nil {
		w.t.Fatal(err)
	}
	testenv.Eventually(w.t, time.Minute, name+" mirrored", remoteHas(w.srv, w.cmPath(name)), w.d.FailFast())
}

// commitOf returns the newest commit that changed path.
func (w *wbWorld) commitOf(path string) testenv.Commit {
	w.t.Helper()
	history, err := w.srv.History("state", "main")
	if err != nil {
		w.t.Fatal(err)
	}
	log, err := w.srv.Log("state", "main")
	if err != nil {
		w.t.Fatal(err)
	}
	for _, h := range history {
		if _, ok := h.Files[path]; !ok {
			continue
		}
		for _, c := range log {
			if c.SHA == h.SHA {
				return c
			}
		}
	}
	return testenv.Commit{}
}

// metricSum adds up every sample of a metric, whatever its labels.
func metricSum(t testing.TB, d *testenv.Daemon, name string) float64 {
	t.Helper()
	var sum float64
	body := d.WaitForStatus(t, "http://"+d.MetricsAddr()+"/metrics", http.StatusOK)
	for _, line := range strings.Split(body, "\n") {
		if !strings.HasPrefix(line, name+"{") && !strings.HasPrefix(line, name+" ") {
			continue
		}
		fields := strings.Fields(line)
		v, err := strconv.ParseFloat(fields[len(fields)-1], 64)
		if err != nil {
			t.Fatalf("metric line %q: %v", line, err)
		}
		sum += v
	}
	return sum
}

// reviewers lets users decide the world's proposals (but not change their status).
func (w *wbWorld) reviewers(users ...string) {
	w.proposalRole("proposal-reviewer", []string{"get", "list", "watch", "update", "patch"}, users...)
}

// proposalRole binds users to a Role named name that allows verbs on the world's proposals.
func (w *wbWorld) proposalRole(name string, verbs []string, users ...string) {
	w.t.Helper()
	bindRole(w.t, w.kube, w.ns, name, []rbacv1.PolicyRule{{APIGroups: []string{crds.Group}, Resources: []string{"proposals"}, Verbs: verbs}}, users...)
}

// writeVerbs are what a ServiceAccount needs to mirror a resource and have write-back apply it:
// list and watch to read, get, create and patch for server-side apply, delete for a destroy.
var writeVerbs = []string{"get", "list", "watch", "create", "patch", "update", "delete"}

// writerAccount creates the ServiceAccount name in ns, agreeing to act for the WatchRules rules
// (its annotation configbutler.ai/watchrules), with a Role of rules bound to it: what a team
// gives the ServiceAccount its write-back acts as.
func writerAccount(t testing.TB, kube kubernetes.Interface, ns, name, rules string, grants []rbacv1.PolicyRule) {
	t.Helper()
	ctx := context.Background()
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Annotations: map[string]string{crds.AnnotationWatchRules: rules}}}
	if _, err := kube.CoreV1().ServiceAccounts(ns).Create(ctx, sa, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Rules: grants}
	if _, err := kube.RbacV1().Roles(ns).Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: name, Namespace: ns}}}
	if _, err := kube.RbacV1().RoleBindings(ns).Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// bindRole creates a Role named name in ns with rules, bound to users (and nobody else).
func bindRole(t testing.TB, kube kubernetes.Interface, ns, name string, rules []rbacv1.PolicyRule, users ...string) {
	t.Helper()
	ctx := context.Background()
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Rules: rules}
	if _, err := kube.RbacV1().Roles(ns).Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name}}
	for _, u := range users {
		binding.Subjects = append(binding.Subjects, rbacv1.Subject{Kind: rbacv1.UserKind, Name: u, APIGroup: rbacv1.GroupName})
	}
	if _, err := kube.RbacV1().RoleBindings(ns).Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// on is the world as seen from a subtest.
func (w *wbWorld) on(t *testing.T) *wbWorld {
	c := *w
	c.t = t
	return &c
}

// TestWriteBackAutoApply runs one daemon whose destination auto-applies, with a cap of 25
// proposals per run, through the behaviours of auto-apply.
func TestWriteBackAutoApply(t *testing.T) {
	planes.Lend(t)
	w := newWBWorld(t, "wb-auto", crds.WriteBack{Enabled: true, AutoApply: true}, nil, "--max-proposals-per-tick", "25")
	t.Run("an edited Deployment is applied and credited to its author", func(t *testing.T) { autoAppliedUpdate(w.on(t)) })
	t.Run("a deleted file opens a destroy that never auto-applies", func(t *testing.T) { destroyWaits(w.on(t)) })
	t.Run("every guard rail refuses its input", func(t *testing.T) { guardRails(w.on(t)) })
	t.Run("a 30-file rewrite is partial, then the rest comes next run", func(t *testing.T) { capPerRun(w.on(t)) })
	t.Run("an apply the apiserver refuses waits with the reason, the rest of the run goes on", func(t *testing.T) { refusedApply(w.on(t)) })
}

// refusedApply: an admission policy forbids purple ConfigMaps. One commit edits two ConfigMaps,
// one to purple: that proposal goes back to pending with the apiserver's reason, the other is
// applied in the same run.
func refusedApply(w *wbWorld) {
	t := w.t
	ctx := context.Background()
	forbid := metav1.StatusReasonForbidden
	policy := &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "no-purple-" + w.ns},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionregistrationv1.RuleWithOperations{
					Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
					Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"}},
				},
			}}},
			Validations: []admissionregistrationv1.Validation{{
				Expression: `!has(object.data) || !('color' in object.data) || object.data['color'] != 'purple'`,
				Message:    "purple is not allowed", Reason: &forbid,
			}},
		},
	}
	binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "no-purple-" + w.ns},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        policy.Name,
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
			MatchResources: &admissionregistrationv1.MatchResources{NamespaceSelector: &metav1.LabelSelector{
				MatchLabels: map[string]string{"kubernetes.io/metadata.name": w.ns}}},
		},
	}
	vap := w.kube.AdmissionregistrationV1()
	if _, err := vap.ValidatingAdmissionPolicies().Create(ctx, policy, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = vap.ValidatingAdmissionPolicies().Delete(context.Background(), policy.Name, metav1.DeleteOptions{})
	})
	if _, err := vap.ValidatingAdmissionPolicyBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = vap.ValidatingAdmissionPolicyBindings().Delete(context.Background(), binding.Name, metav1.DeleteOptions{})
	})
	w.configMap("denied", map[string]string{"color": "blue"})
	w.configMap("allowed", map[string]string{"color": "blue"})
	testenv.Eventually(t, time.Minute, "the policy in force", func() (bool, string) {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "probe-purple", Namespace: w.ns}, Data: map[string]string{"color": "purple"}}
		_, err := w.kube.CoreV1().ConfigMaps(w.ns).Create(ctx, cm, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return err != nil, fmt.Sprint(err)
	})
	w.edit(map[string]string{
		w.cmPath("denied"):  w.replace(w.liveYAML("denied"), "color: blue", "color: purple"),
		w.cmPath("allowed"): w.replace(w.liveYAML("allowed"), "color: blue", "color: green"),
	})
	w.syncNow()
	p := w.waitProposal(w.cmPath("denied"), "refused apply pending", func(q *crds.Proposal) bool {
		c := conditionOf(q, crds.ConditionApplied)
		return q.Status.Phase == crds.PhasePending && c != nil && c.Reason == "Forbidden"
	})
	if !strings.Contains(p.Status.Message, "purple is not allowed") {
		t.Errorf("status message %q does not give the apiserver's reason", p.Status.Message)
	}
	w.waitProposal(w.cmPath("allowed"), "the other proposal applied", func(q *crds.Proposal) bool { return q.Status.Phase == crds.PhaseApplied })
	if got := w.liveColor("denied"); got != "blue" {
		t.Errorf("denied ConfigMap is %q", got)
	}
}

// autoAppliedUpdate: alice scales a Deployment in Git; the update proposal is applied, and the
// mirror's commit that records it (the file in canonical form again) is authored by alice and
// names the proposal.
func autoAppliedUpdate(w *wbWorld) {
	t := w.t
	ctx := context.Background()
	one := int32(1)
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: w.ns},
		Spec: appsv1.DeploymentSpec{Replicas: &one, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "nginx:1.27"}}}}},
	}
	if _, err := w.kube.AppsV1().Deployments(w.ns).Create(ctx, dep, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	path := layout.Path("live", "apps", "deployments", w.ns, "web")
	testenv.Eventually(t, time.Minute, "deployment mirrored", remoteHas(w.srv, path), w.d.FailFast())
	file := w.remote(path)
	if !strings.Contains(file, "replicas: 1\n") {
		t.Fatalf("mirrored deployment has no replicas: 1:\n%s", file)
	}
	edited := "# scaled for the launch\n" + w.replace(file, "replicas: 1\n", "replicas: 3\n")
	sha := w.edit(map[string]string{path: edited})
	w.syncNow()

	p := w.waitProposal(path, "update proposal applied", func(p *crds.Proposal) bool { return p.Status.Phase == crds.PhaseApplied })
	if p.Spec.Change != crds.ChangeUpdate || p.Spec.SourceCommit != sha || p.Spec.Author.Name != alice.Name ||
		p.Spec.Target.Kind != "Deployment" || p.Spec.Target.Name != "web" || !p.Status.AutoApplied || p.Spec.LiveResourceVersion == "" {
		t.Errorf("proposal = %+v, status %+v", p.Spec, p.Status)
	}
	if !strings.Contains(p.Spec.Diff, "-  replicas: 1") || !strings.Contains(p.Spec.Diff, "+  replicas: 3") {
		t.Errorf("diff does not show the change:\n%s", p.Spec.Diff)
	}
	live, err := w.kube.AppsV1().Deployments(w.ns).Get(ctx, "web", metav1.GetOptions{})
	if err != nil || live.Spec.Replicas == nil || *live.Spec.Replicas != 3 {
		t.Fatalf("live replicas not 3: %v %v", live.Spec.Replicas, err)
	}
	// The mirror writes the applied object back in canonical form (the comment goes), as alice.
	testenv.Eventually(t, time.Minute, "mirror records the apply", func() (bool, string) {
		got := w.remote(path)
		return !strings.Contains(got, "#") && strings.Contains(got, "replicas: 3\n"), got
	}, w.d.FailFast())
	c := w.commitOf(path)
	if c.AuthorName != alice.Name || c.Trailers["X-ConfigButler-Proposal"] != w.ns+"/"+p.Name {
		t.Errorf("commit recording the apply: author %q trailers %v, want %q and the proposal", c.AuthorName, c.Trailers, alice.Name)
	}
	runs := w.runs()
	last := runs[len(runs)-1]
	if last.Status.Phase != crds.SyncRunSuccess || last.Status.ProposalsOpened != 1 || last.Status.Applied != 1 || last.Status.Revision == "" {
		t.Errorf("SyncRun status = %+v", last.Status)
	}
	if v := w.d.Metric(t, `gitops_reverser_proposals_applied_total{mode="auto"}`); v < 1 {
		t.Errorf("proposals_applied_total{mode=auto} = %v", v)
	}
}

// destroyWaits: alice deletes a ConfigMap's file. The destroy proposal stays pending although the
// destination auto-applies, the ConfigMap stays, and the mirror does not write the file back
// while the proposal waits.
func destroyWaits(w *wbWorld) {
	t := w.t
	w.configMap("doomed", map[string]string{"k": "v"})
	path := w.cmPath("doomed")
	w.edit(nil, path)
	w.syncNow()
	p := w.waitProposal(path, "destroy proposal", func(p *crds.Proposal) bool { return p.Status.Phase == crds.PhasePending })
	if p.Spec.Change != crds.ChangeDestroy || p.Spec.Desired != "" || !strings.Contains(p.Spec.Diff, "-  name: doomed") {
		t.Errorf("proposal = %+v", p.Spec)
	}
	if _, err := w.kube.CoreV1().ConfigMaps(w.ns).Get(context.Background(), "doomed", metav1.GetOptions{}); err != nil {
		t.Fatalf("the ConfigMap was deleted without review: %v", err)
	}
	// A later change is mirrored; the held file stays deleted.
	w.configMap("after-destroy", map[string]string{"k": "v"})
	if got := w.remote(path); got != "" {
		t.Errorf("the mirror wrote the held file back:\n%s", got)
	}
}

// guardRails: one commit with a file for every input write-back refuses. Each is reported in
// the SyncRun (and counted), none becomes a proposal. A WatchRule of another namespace that
// points at the destination without its consent does not widen what write-back may change.
func guardRails(w *wbWorld) {
	t := w.t
	outsider := w.ns + "-outsider"
	if _, err := w.kube.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: outsider}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	reach, err := crds.ToUnstructured(&crds.WatchRule{ObjectMeta: metav1.ObjectMeta{Name: "reach", Namespace: outsider},
		Spec: crds.WatchRuleSpec{DestinationRef: crds.NamespacedReference{Name: "dest", Namespace: w.ns}, Rules: []crds.ResourceRule{{Resources: []string{"configmaps"}}}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.dyn.Resource(crds.WatchRules).Namespace(outsider).Create(context.Background(), reach, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitReadyReason(t, w.d, crds.WatchRules, outsider, "reach", crds.ReasonReferenceNotAllowed)
	before := metricSum(t, w.d, "gitops_reverser_proposals_refused_total")
	cm := func(ns, name string) string {
		return fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: %s\n  namespace: %s\ndata:\n  k: v\n", name, ns)
	}
	bomb := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: bomb\n  namespace: " + w.ns + "\ndata:\n  a: &a [\"x\",\"x\",\"x\",\"x\"]\n  b: &b [*a,*a,*a,*a]\n  c: [*b,*b,*b,*b]\n"
	files := map[string]struct{ content, reason string }{
		layout.Path("live", "", "secrets", w.ns, "creds"):       {"apiVersion: v1\nkind: Secret\nmetadata:\n  name: creds\n  namespace: " + w.ns + "\nstringData:\n  password: hunter2\n", "Secret"},
		layout.Path("live", "", "services", w.ns, "svc"):        {"apiVersion: v1\nkind: Service\nmetadata:\n  name: svc\n  namespace: " + w.ns + "\nspec:\n  ports:\n  - port: 80\n", "NotSelected"},
		layout.Path("live", "", "configmaps", "elsewhere", "x"): {cm("elsewhere", "x"), "NotSelected"},
		layout.Path("live", "", "configmaps", outsider, "x"):    {cm(outsider, "x"), "NotSelected"},
		w.cmPath("huge"):     {cm(w.ns, "huge") + "  big: " + strings.Repeat("x", 1<<20) + "\n", "TooLarge"},
		w.cmPath("two"):      {cm(w.ns, "two") + "---\n" + cm(w.ns, "three"), "MultipleDocuments"},
		w.cmPath("broken"):   {"apiVersion: v1\nkind: [ConfigMap\n", "Unparseable"},
		w.cmPath("bomb"):     {bomb, "AliasOrAnchor"},
		w.cmPath("mismatch"): {cm(w.ns, "other-name"), "PathMismatch"},
		w.cmPath("moved"):    {cm("another-ns", "moved"), "PathMismatch"},
		layout.Path("live", "", "namespaces", "", "stray"): {"apiVersion: v1\nkind: Namespace\nmetadata:\n  name: stray\n", "NotSelected"},
	}
	write := map[string]string{}
	for path, f := range files {
		write[path] = f.content
	}
	w.edit(write)
	w.syncNow()
	run := w.lastRun()
	got := map[string]string{}
	for _, r := range run.Status.Refused {
		got[r.Path] = r.Reason
	}
	for path, f := range files {
		if got[path] != f.reason {
			t.Errorf("%s: refused as %q, want %q", path, got[path], f.reason)
		}
	}
	if run.Status.Phase != crds.SyncRunPartial || run.Status.RefusedTotal != len(files) || run.Status.ProposalsOpened != 0 {
		t.Errorf("run %s, refused %d (want Partial, %d), opened %d (want 0)", run.Status.Phase, run.Status.RefusedTotal, len(files), run.Status.ProposalsOpened)
	}
	for _, p := range w.proposals() {
		if _, bad := files[p.Spec.Path]; bad {
			t.Errorf("proposal %s opened for refused file %s", p.Name, p.Spec.Path)
		}
	}
	if after := metricSum(t, w.d, "gitops_reverser_proposals_refused_total"); after-before != float64(len(files)) {
		t.Errorf("proposals_refused_total rose by %v, want %d", after-before, len(files))
	}
	testenv.Eventually(t, time.Minute, "Refused Events on the SyncRun", func() (bool, string) {
		events, err := w.kube.CoreV1().Events(w.ns).List(context.Background(), metav1.ListOptions{FieldSelector: "involvedObject.name=" + run.Name})
		if err != nil {
			return false, err.Error()
		}
		refused := 0
		for _, e := range events.Items {
			if e.Reason == "Refused" {
				refused++
			}
		}
		return refused > 0, fmt.Sprintf("%d Refused events", refused)
	}, w.d.FailFast())
}

// capPerRun: alice edits 30 ConfigMaps in one commit; the first run opens (and applies) 25 and
// is partial, the next run the other 5.
func capPerRun(w *wbWorld) {
	t := w.t
	write := map[string]string{}
	for i := range 30 {
		name := fmt.Sprintf("bulk-%02d", i)
		w.configMap(name, map[string]string{"level": "zero"})
		write[w.cmPath(name)] = w.replace(w.liveYAML(name), "level: zero", "level: one")
	}
	w.edit(write)
	w.syncNow()
	first := w.lastRun()
	if first.Status.Phase != crds.SyncRunPartial || first.Status.ProposalsOpened != 25 {
		t.Fatalf("first run: phase %s, opened %d; want Partial, 25", first.Status.Phase, first.Status.ProposalsOpened)
	}
	w.syncNow()
	second := w.lastRun()
	if second.Status.Phase != crds.SyncRunSuccess || second.Status.ProposalsOpened != 5 {
		t.Fatalf("second run: phase %s, opened %d; want Success, 5", second.Status.Phase, second.Status.ProposalsOpened)
	}
	testenv.Eventually(t, time.Minute, "all 30 applied", func() (bool, string) {
		n := 0
		for i := range 30 {
			cm, err := w.kube.CoreV1().ConfigMaps(w.ns).Get(context.Background(), fmt.Sprintf("bulk-%02d", i), metav1.GetOptions{})
			if err == nil && cm.Data["level"] == "one" {
				n++
			}
		}
		return n == 30, fmt.Sprintf("%d of 30", n)
	}, w.d.FailFast())
}

// TestWriteBackReview runs one daemon whose destination waits for people, through approvals,
// staleness, rejection and suspension. alice may decide proposals but not change ConfigMaps;
// carol may do both.
func TestWriteBackReview(t *testing.T) {
	planes.Lend(t)
	w := newWBWorld(t, "wb-review", crds.WriteBack{Enabled: true}, nil)
	w.reviewers("alice", "carol")
	grant(t, w.kube, w.ns, "carol")
	t.Run("an approval by someone who may not make the change is refused, one by someone who may is applied",
		func(t *testing.T) { approvals(w.on(t)) })
	t.Run("a live change makes a pending proposal Stale and the mirror writes the live state", func(t *testing.T) { stale(w.on(t)) })
	t.Run("a rejection puts the live state back into Git", func(t *testing.T) { rejection(w.on(t)) })
	t.Run("ignore leaves the file as written", func(t *testing.T) { ignored(w.on(t)) })
	t.Run("suspend stops applies", func(t *testing.T) { suspended(w.on(t)) })
	t.Run("a restart keeps the files of waiting proposals as written", func(t *testing.T) { restartKeepsHolds(w.on(t)) }) // last: it replaces the daemon
}

func ignored(w *wbWorld) {
	t := w.t
	path, p := w.pendingEdit("ignored")
	edited := w.remote(path)
	w.decide("carol", p, crds.DecisionIgnore)
	w.waitProposal(path, "proposal Ignored", func(q *crds.Proposal) bool { return q.Name == p.Name && q.Status.Phase == crds.PhaseIgnored })
	w.configMap("after-ignore", map[string]string{"k": "v"}) // the mirror commits something after
	if got := w.remote(path); got != edited {
		t.Errorf("the ignored edit was overwritten:\n%s", got)
	}
	if got := w.liveColor("ignored"); got != "blue" {
		t.Errorf("an ignored proposal changed the ConfigMap: %q", got)
	}
}

// restartKeepsHolds: the daemon starts again while a proposal waits; its first list writes every
// live object, but not over the file under review.
func restartKeepsHolds(w *wbWorld) {
	t := w.t
	w.patch(crds.GitDestinations, "dest", map[string]any{"spec": map[string]any{"writeBack": map[string]any{"suspend": false}}})
	path, p := w.pendingEdit("kept")
	edited := w.remote(path)
	w.d.Stop(t)
	w.d = startDaemon(w.root, w.root.TempDir(), "--git-batch-quiet-ms", "200")
	w.configMap("after-restart", map[string]string{"k": "v"})
	if got := w.remote(path); got != edited {
		t.Errorf("after a restart the mirror wrote over the file under review:\n%s", got)
	}
	w.decide("carol", p, crds.DecisionApprove)
	w.waitProposal(path, "approved after the restart", func(q *crds.Proposal) bool { return q.Name == p.Name && q.Status.Phase == crds.PhaseApplied })
}

// pendingEdit mirrors a ConfigMap, has alice change its data in Git and waits for the pending
// update proposal.
func (w *wbWorld) pendingEdit(name string) (string, *crds.Proposal) {
	w.t.Helper()
	w.configMap(name, map[string]string{"color": "blue"})
	path := w.cmPath(name)
	w.edit(map[string]string{path: "# from alice\n" + w.replace(w.liveYAML(name), "color: blue", "color: green")})
	w.syncNow()
	return path, w.waitProposal(path, "pending update", func(p *crds.Proposal) bool {
		return p.Status.Phase == crds.PhasePending && p.Spec.Change == crds.ChangeUpdate
	})
}

func (w *wbWorld) liveColor(name string) string {
	cm, err := w.kube.CoreV1().ConfigMaps(w.ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		w.t.Fatal(err)
	}
	return cm.Data["color"]
}

func approvals(w *wbWorld) {
	t := w.t
	path, p := w.pendingEdit("approved")
	testenv.Eventually(t, time.Minute, "the oldest pending proposal's creation time exported", func() (bool, string) {
		got := w.d.Metric(t, "gitops_reverser_proposals_oldest_pending_timestamp_seconds")
		return got == float64(p.CreationTimestamp.Unix()), fmt.Sprintf("%v, want %d", got, p.CreationTimestamp.Unix())
	}, w.d.FailFast())
	w.decide("alice", p, crds.DecisionApprove)
	p = w.waitProposal(path, "alice's approval refused", func(p *crds.Proposal) bool {
		c := conditionOf(p, crds.ConditionApplied)
		return c != nil && c.Reason == "Forbidden" && p.Spec.Decision == crds.DecisionNone
	})
	if p.Status.Phase != crds.PhasePending || p.Status.ReviewedBy == nil || p.Status.ReviewedBy.Username != "alice" {
		t.Errorf("after alice's approval: phase %s, reviewedBy %+v", p.Status.Phase, p.Status.ReviewedBy)
	}
	if got := w.liveColor("approved"); got != "blue" {
		t.Fatalf("alice's approval changed the ConfigMap: color %q", got)
	}
	w.decide("carol", p, crds.DecisionApprove)
	p = w.waitProposal(path, "carol's approval applied", func(p *crds.Proposal) bool { return p.Status.Phase == crds.PhaseApplied })
	testenv.Eventually(t, time.Minute, "no pending proposal, exported as 0", func() (bool, string) {
		got := w.d.Metric(t, "gitops_reverser_proposals_oldest_pending_timestamp_seconds")
		return got == 0, fmt.Sprint(got)
	}, w.d.FailFast())
	if p.Status.ReviewedBy == nil || p.Status.ReviewedBy.Username != "carol" || p.Status.AutoApplied {
		t.Errorf("after carol's approval: reviewedBy %+v, autoApplied %v", p.Status.ReviewedBy, p.Status.AutoApplied)
	}
	if got := w.liveColor("approved"); got != "green" {
		t.Errorf("color %q after the approved apply, want green", got)
	}
	testenv.Eventually(t, time.Minute, "mirror records the apply", func() (bool, string) {
		got := w.remote(path)
		return !strings.Contains(got, "#") && strings.Contains(got, "color: green"), got
	}, w.d.FailFast())
	if c := w.commitOf(path); c.AuthorName != alice.Name || c.Trailers["X-ConfigButler-ApprovedBy"] != "carol" {
		t.Errorf("commit recording the apply: author %q, trailers %v", c.AuthorName, c.Trailers)
	}
}

func stale(w *wbWorld) {
	t := w.t
	path, p := w.pendingEdit("moving")
	if _, err := w.kube.CoreV1().ConfigMaps(w.ns).Patch(context.Background(), "moving", types.MergePatchType,
		[]byte(`{"data":{"color":"red"}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	w.waitProposal(path, "proposal Stale", func(q *crds.Proposal) bool { return q.Name == p.Name && q.Status.Phase == crds.PhaseStale })
	testenv.Eventually(t, time.Minute, "live state back in Git", func() (bool, string) {
		got := w.remote(path)
		return got == w.liveYAML("moving"), got
	}, w.d.FailFast())
}

func rejection(w *wbWorld) {
	t := w.t
	path, p := w.pendingEdit("rejected")
	w.decide("carol", p, crds.DecisionReject)
	p = w.waitProposal(path, "proposal Rejected", func(q *crds.Proposal) bool { return q.Name == p.Name && q.Status.Phase == crds.PhaseRejected })
	if p.Status.ReviewedBy == nil || p.Status.ReviewedBy.Username != "carol" {
		t.Errorf("reviewedBy %+v, want carol", p.Status.ReviewedBy)
	}
	testenv.Eventually(t, time.Minute, "live state back in Git", func() (bool, string) {
		got := w.remote(path)
		return got == w.liveYAML("rejected"), got
	}, w.d.FailFast())
	if got := w.liveColor("rejected"); got != "blue" {
		t.Errorf("rejected proposal changed the ConfigMap: %q", got)
	}
}

func suspended(w *wbWorld) {
	t := w.t
	w.patch(crds.GitDestinations, "dest", map[string]any{"spec": map[string]any{"writeBack": map[string]any{"suspend": true}}})
	path, p := w.pendingEdit("suspended")
	w.decide("carol", p, crds.DecisionApprove)
	w.waitProposal(path, "approval held by suspend", appliedReason(p, "Suspended"))
	if got := w.liveColor("suspended"); got != "blue" {
		t.Errorf("suspended destination applied a proposal: color %q", got)
	}
}

// TestHaltWriteBackStopsEveryApply: with --halt-write-back, an auto-apply destination opens
// proposals but applies none, and an approval (known from the webhook) waits too.
func TestHaltWriteBackStopsEveryApply(t *testing.T) {
	planes.Lend(t)
	// Without the approver policies, who approved comes from the webhook's record: the fallback.
	w := newWBWorld(t, "wb-halt", crds.WriteBack{Enabled: true, AutoApply: true}, nil, "--halt-write-back", "--approver-policy=none")
	w.waitReady("ApproverFromWebhook")
	w.reviewers("carol")
	grant(t, w.kube, w.ns, "carol")
	path, p := w.pendingEdit("halted")
	w.decide("carol", p, crds.DecisionApprove)
	w.waitProposal(path, "approval held by the kill switch", appliedReason(p, "Halted"))
	if got := w.liveColor("halted"); got != "blue" {
		t.Errorf("halted daemon applied a proposal: color %q", got)
	}
}

// appliedReason is a condition for waitProposal: p's Applied condition has reason.
func appliedReason(p *crds.Proposal, reason string) func(*crds.Proposal) bool {
	return func(q *crds.Proposal) bool {
		c := conditionOf(q, crds.ConditionApplied)
		return q.Name == p.Name && c != nil && c.Reason == reason
	}
}

// refusedFor is a condition for waitProposal: p's approval was refused for reason, and its
// decision cleared for someone else.
func refusedFor(p *crds.Proposal, reason string) func(*crds.Proposal) bool {
	return func(q *crds.Proposal) bool {
		return appliedReason(p, reason)(q) && q.Spec.Decision == crds.DecisionNone
	}
}

func conditionOf(p *crds.Proposal, typ string) *metav1.Condition {
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == typ {
			return &p.Status.Conditions[i]
		}
	}
	return nil
}

// TestApprovalWithoutAKnownApproverIsAskedAgain: without the webhook and the approver policies
// nobody is known to have set the decision, so nothing is applied, the decision is cleared and
// the status says why.
func TestApprovalWithoutAKnownApproverIsAskedAgain(t *testing.T) {
	planes.Lend(t)
	w := newWBWorld(t, "wb-unknown", crds.WriteBack{Enabled: true}, nil, "--enable-webhook=false", "--approver-policy=none")
	w.waitReady("ApproverUnknown") // the policies an earlier test installed are gone
	w.reviewers("carol")
	grant(t, w.kube, w.ns, "carol")
	path, p := w.pendingEdit("unknown")
	w.decide("carol", p, crds.DecisionApprove)
	w.waitProposal(path, "approval refused: approver unknown", refusedFor(p, "ApproverUnknown"))
	if got := w.liveColor("unknown"); got != "blue" {
		t.Errorf("an approval by nobody known changed the ConfigMap: %q", got)
	}
}

// TestWriteBackSwallowsNoEdit: what a person pushes right after the mirror's first commit, before
// write-back ever ran, becomes proposals (the baseline is the daemon's newest commit, not the
// tip); after a force-push, a file a person changed becomes a proposal credited to the commit
// that changed it, a file the force-push took away a proposal to destroy its object, and the
// files the mirror wrote last do not. With one proposal per run, the runs after a force-push go
// on comparing the whole folder until every change is proposed.
func TestWriteBackSwallowsNoEdit(t *testing.T) {
	planes.Lend(t)
	w := newWBWorld(t, "wb-baseline", crds.WriteBack{}, nil, "--max-proposals-per-tick", "1") // write-back is off until the edit is pushed
	for _, name := range []string{"tuned", "doomed", "forced", "forced-too", "erased"} {
		w.configMap(name, map[string]string{"color": "blue"})
	}
	log, err := w.srv.Log("state", "main")
	if err != nil {
		t.Fatal(err)
	}
	mirrored := log[0].SHA
	tuned, doomed := w.cmPath("tuned"), w.cmPath("doomed")
	elsewhere := layout.Path("live", "", "configmaps", "elsewhere", "stray")
	person := w.edit(map[string]string{
		tuned:     "# from alice\n" + w.replace(w.liveYAML("tuned"), "color: blue", "color: green"),
		elsewhere: "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: stray\n  namespace: elsewhere\n",
	}, doomed)

	w.patch(crds.GitDestinations, "dest", map[string]any{"spec": map[string]any{"writeBack": map[string]any{"enabled": true}}})
	w.syncUntilProposed(person, map[string]crds.ProposalChange{tuned: crds.ChangeUpdate, doomed: crds.ChangeDestroy})
	testenv.Eventually(t, time.Minute, "the first run done, the stray file refused", func() (bool, string) {
		st := w.destStatus()
		for _, r := range w.runs() {
			for _, f := range r.Status.Refused {
				if f.Path == elsewhere && st.LastRevision == person && r.Status.BaseRevision == mirrored {
					return true, ""
				}
			}
		}
		return false, fmt.Sprintf("lastRevision %s, want %s", st.LastRevision, person)
	}, w.d.FailFast())

	write := map[string]string{}
	for _, name := range []string{"forced", "forced-too"} {
		write[w.cmPath(name)] = "# rewritten\n" + w.replace(w.liveYAML(name), "color: blue", "color: red")
	}
	rewritten, err := w.srv.ForcePush("state", "main", mirrored, alice, "rewrite by alice", write, []string{w.cmPath("erased")})
	if err != nil {
		t.Fatal(err)
	}
	w.syncUntilProposed(rewritten, map[string]crds.ProposalChange{
		w.cmPath("forced"): crds.ChangeUpdate, w.cmPath("forced-too"): crds.ChangeUpdate, w.cmPath("erased"): crds.ChangeDestroy,
	})
	run := w.lastRun()
	var message string
	if c := meta.FindStatusCondition(run.Status.Conditions, crds.ConditionComplete); c != nil {
		message = c.Message
	}
	if !strings.Contains(message, "force-pushed") {
		t.Errorf("run after the force-push: %q; want a word on the force-push", message)
	}
	for _, p := range w.proposals() {
		if p.Spec.Path == w.cmPath("seed") {
			t.Errorf("a file the mirror wrote last was proposed: %s %s", p.Name, p.Spec.Path)
		}
	}
}

// syncUntilProposed asks for runs until every path has a proposal of its change from commit by
// alice.
func (w *wbWorld) syncUntilProposed(commit string, want map[string]crds.ProposalChange) {
	w.t.Helper()
	testenv.Eventually(w.t, 2*time.Minute, fmt.Sprintf("%d proposals from %.12s", len(want), commit), func() (bool, string) {
		found := map[string]bool{}
		for _, p := range w.proposals() {
			if change, ok := want[p.Spec.Path]; ok && p.Spec.Change == change && p.Spec.SourceCommit == commit && p.Spec.Author.Email == alice.Email {
				found[p.Spec.Path] = true
			}
		}
		if len(found) == len(want) {
			return true, ""
		}
		w.syncNow()
		return false, fmt.Sprintf("proposed: %v", found)
	}, w.d.FailFast())
}
