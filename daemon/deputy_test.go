package daemon

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"

	"github.com/configbutler/gitops-reverser/crds"
	"github.com/configbutler/gitops-reverser/testenv"
)

// The trust rules of write-back (DESIGN.md §9), tried as attackers would: alice may create and
// decide Proposals in the world's namespace and edit its ConfigMaps, nothing else; dave may
// decide Proposals but change nothing.

// forge creates a Proposal as user, the way the attacker did: decided, with a made-up
// live digest, a target and a path of their choosing.
func (w *wbWorld) forge(user, name string, target crds.ProposalTarget, path string, annotations map[string]string) error {
	p := &crds.Proposal{
		TypeMeta:   metav1.TypeMeta{APIVersion: crds.GroupVersion.String(), Kind: crds.KindProposal},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: w.ns, Annotations: annotations},
		Spec: crds.ProposalSpec{DestinationRef: crds.LocalReference{Name: "dest"}, Change: crds.ChangeUpdate, Target: target, Path: path,
			SourceCommit: strings.Repeat("a", 40), Author: crds.GitAuthor{Name: "Alice", Email: "alice@example.com"},
			Desired: "kind: ConfigMap\n", Diff: "-\n", LiveResourceVersion: "1", LiveDigest: strings.Repeat("f", 64), // made up
			Decision: crds.DecisionApprove, DecidedBy: &crds.Reviewer{Username: user, Groups: testenv.Users[user]}},
	}
	u, err := crds.ToUnstructured(p)
	if err != nil {
		w.t.Fatal(err)
	}
	client := dynamic.NewForConfigOrDie(planes.Of(w.t).ImpersonatingConfig(user, testenv.Users[user]...))
	_, err = client.Resource(crds.Proposals).Namespace(w.ns).Create(context.Background(), u, metav1.CreateOptions{})
	return err
}

// foreign waits until the daemon disowned the proposal name.
func (w *wbWorld) foreign(name string) {
	w.t.Helper()
	testenv.Eventually(w.t, time.Minute, name+" disowned", func() (bool, string) {
		for _, p := range w.proposals() {
			if p.Name == name {
				return p.Status.Phase == crds.PhaseForeign, fmt.Sprintf("phase %q: %s", p.Status.Phase, p.Status.Message)
			}
		}
		return false, "not found"
	}, w.d.FailFast())
}

// TestHandMadeProposalsAreDisowned: without the admission policies (--approver-policy=none, as on a
// cluster that lacks them), alice's hand-made Proposals for objects she may not read, at paths she
// chose, are marked Foreign, reported, and write nothing to Git or the cluster: on main each turned
// Stale and the daemon "restored" the live object (a Secret in plain text) into the repository.
// A copy of a real Proposal, seal and all, with another path fares the same.
func TestHandMadeProposalsAreDisowned(t *testing.T) {
	planes.Lend(t)
	w := newWBWorld(t, "wb-forged", crds.WriteBack{Enabled: true}, nil, "--enable-webhook=false", "--approver-policy=none")
	w.proposalRole("proposal-maker", []string{"get", "list", "watch", "create", "update", "patch"}, "alice")
	grant(t, w.kube, w.ns, "alice")
	ctx := context.Background()
	other := "wb-forged-other"
	if _, err := w.kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: other}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "topsecret", Namespace: other}, StringData: map[string]string{"password": "hunter2"}}
	if _, err := w.kube.CoreV1().Secrets(other).Create(ctx, secret, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	sysconf := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "sysconf", Namespace: "kube-system"}, Data: map[string]string{"k": "v"}}
	if _, err := w.kube.CoreV1().ConfigMaps("kube-system").Create(ctx, sysconf, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	_, real := w.pendingEdit("real")

	secretPath := "live/" + other + "/secrets/topsecret.yaml"
	innocent := w.cmPath("innocent")
	rolePath := "live/_cluster/clusterroles.rbac.authorization.k8s.io/admin.yaml"
	sealPath := "live/gitops-reverser-system/secrets/gitops-reverser-proposal-seal.yaml"
	forged := map[string]struct {
		target crds.ProposalTarget
		path   string
	}{
		"ex-secret":  {crds.ProposalTarget{APIVersion: "v1", Kind: "Secret", Resource: "secrets", Namespace: other, Name: "topsecret"}, secretPath},
		"ex-sysconf": {crds.ProposalTarget{APIVersion: "v1", Kind: "ConfigMap", Resource: "configmaps", Namespace: "kube-system", Name: "sysconf"}, innocent},
		"ex-role":    {crds.ProposalTarget{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRole", Resource: "clusterroles", Name: "admin"}, rolePath},
		"ex-seal": {crds.ProposalTarget{APIVersion: "v1", Kind: "Secret", Resource: "secrets", Namespace: "gitops-reverser-system",
			Name: "gitops-reverser-proposal-seal"}, sealPath},
		"ex-copy": {real.Spec.Target, innocent}, // a real proposal's target, seal and all, at another path
	}
	for name, f := range forged {
		var ann map[string]string
		if name == "ex-copy" {
			ann = real.Annotations
		}
		if err := w.forge("alice", name, f.target, f.path, ann); err != nil {
			t.Fatalf("alice creates %s: %v", name, err)
		}
	}
	// The path of a real one cannot be changed at all: the CRD keeps its spec immutable but the decision.
	if err := w.patchAs("alice", real, `{"path":"`+innocent+`"}`); err == nil || !strings.Contains(err.Error(), "immutable") {
		t.Errorf("alice changing a real proposal's path: %v, want a refusal", err)
	}
	for name := range forged {
		w.foreign(name)
	}

	files, err := w.srv.Files("state", "main")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{secretPath, innocent, rolePath, sealPath} {
		for _, f := range files {
			if f == p {
				t.Errorf("a hand-made proposal wrote %s into Git:\n%s", p, w.remote(p))
			}
		}
	}
	log, err := w.srv.Log("state", "main")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range log {
		if strings.Contains(c.Subject+c.Body, "proposal ex-") {
			t.Errorf("commit %s acts for a hand-made proposal: %s", c.SHA[:8], c.Subject)
		}
	}
	if got := w.liveColor("real"); got != "blue" {
		t.Errorf("a copy of the real proposal was applied: color %q", got)
	}
	if got := w.d.Metric(t, `gitops_reverser_proposals_refused_total{reason="NotOpenedByDaemon"}`); got < float64(len(forged)) {
		t.Errorf("proposals_refused_total{reason=NotOpenedByDaemon} = %v, want at least %d", got, len(forged))
	}
	w.waitEvent(crds.KindProposal, "ex-secret", "NotOpenedByDaemon")
}

// waitEvent waits for a Warning Event with reason on the object kind/name of the world's namespace.
func (w *wbWorld) waitEvent(kind, name, reason string) {
	w.t.Helper()
	waitEventOn(w.t, w.d, w.ns, kind, name, reason)
}

// TestOnlyTheDaemonCreatesProposals: with the daemon's policies in force, the apiserver itself
// refuses a Proposal or a SyncRun that anyone else creates (on main alice's was created), and
// write-back's Ready condition says so from the first run.
func TestOnlyTheDaemonCreatesProposals(t *testing.T) {
	cp := planes.Lend(t)
	w := newWBWorld(t, "wb-creator", crds.WriteBack{Enabled: true}, nil, "--enable-webhook=false")
	// The first run already says how approvers are known (main said ApproverUnknown at start).
	if c := meta.FindStatusCondition(w.destStatus().Conditions, crds.ConditionReady); c == nil || c.Reason != "ApproverFromMutatingPolicy" {
		t.Errorf("Ready after the first run: %+v, want ApproverFromMutatingPolicy", c)
	}
	w.proposalRole("proposal-maker", []string{"get", "list", "watch", "create", "update", "patch"}, "alice")
	target := crds.ProposalTarget{APIVersion: "v1", Kind: "ConfigMap", Resource: "configmaps", Namespace: w.ns, Name: "seed"}
	// The apiserver takes its policies up moments after they are installed; each Proposal alice
	// gets in meanwhile is disowned by the daemon (TestHandMadeProposalsAreDisowned).
	tries := 0
	testenv.Eventually(t, time.Minute, "alice's Proposal refused by "+crds.ApproverPolicyName, func() (bool, string) {
		tries++
		err := w.forge("alice", fmt.Sprintf("by-hand-%d", tries), target, w.cmPath("seed"), nil)
		return err != nil && strings.Contains(err.Error(), "only gitops-reverser"), fmt.Sprint(err)
	}, w.d.FailFast())
	run := &crds.SyncRun{TypeMeta: metav1.TypeMeta{APIVersion: crds.GroupVersion.String(), Kind: crds.KindSyncRun},
		ObjectMeta: metav1.ObjectMeta{Name: "by-hand", Namespace: w.ns},
		Spec:       crds.SyncRunSpec{DestinationRef: crds.LocalReference{Name: "dest"}, Trigger: crds.TriggerSyncNow}}
	u, err := crds.ToUnstructured(run)
	if err != nil {
		t.Fatal(err)
	}
	bindRole(t, w.kube, w.ns, "syncrun-maker", []rbacv1.PolicyRule{{APIGroups: []string{crds.Group}, Resources: []string{"syncruns"}, Verbs: []string{"create"}}}, "alice")
	alice := dynamic.NewForConfigOrDie(cp.ImpersonatingConfig("alice", testenv.Users["alice"]...))
	testenv.Eventually(t, time.Minute, "alice's SyncRun refused by "+crds.ApproverPolicyName, func() (bool, string) {
		_, err := alice.Resource(crds.SyncRuns).Namespace(w.ns).Create(context.Background(), u, metav1.CreateOptions{})
		return err != nil && strings.Contains(err.Error(), "only gitops-reverser"), fmt.Sprint(err) // forbidden until RBAC caught up
	}, w.d.FailFast())
}

// deletePolicies deletes the daemon's admission policies as an admin would.
func deletePolicies(t testing.TB) {
	t.Helper()
	admin := dynamic.NewForConfigOrDie(planes.Of(t).AdminConfig())
	for _, gvr := range []int{3, 2, 1, 0} {
		err := admin.Resource(crds.PolicyResources[gvr]).Delete(context.Background(), crds.ApproverPolicyName, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
	}
}

// patchWithoutPolicies is patchAs right after deletePolicies, with the daemon away: the apiserver
// learns of the deletion through its own informers, so for a moment it may still apply the
// deleted policies, which refuse the patch. It is sent again until they no longer do.
func (w *wbWorld) patchWithoutPolicies(t *testing.T, user string, p *crds.Proposal, spec string) {
	t.Helper()
	testenv.Eventually(t, time.Minute, user+"'s patch with the approver policies gone", func() (bool, string) {
		err := w.patchAs(user, p, spec)
		return err == nil, fmt.Sprint(err)
	})
}

// TestStaleStampsAreNeverEnough: an approval counts only with the stamp the policies in force now
// wrote. On main each of these was applied: dave's forged "alice" right after an admin deleted the
// policies, dave's bare Approve over the daemon's own cleared stamp, and a stamp written by a policy
// an admin replaced with one that stamps anyone.
func TestStaleStampsAreNeverEnough(t *testing.T) {
	cp := planes.Lend(t)
	flags := []string{"--git-batch-quiet-ms", "200", "--enable-webhook=false"}
	w := newWBWorld(t, "wb-stamps", crds.WriteBack{Enabled: true}, nil, flags[2:]...)
	w.reviewers("alice", "dave")
	grant(t, w.kube, w.ns, "alice")
	w.waitReady("ApproverFromMutatingPolicy")
	restart := func(between func()) {
		w.d.Stop(t)
		between()
		w.d = startDaemon(w.root, w.root.TempDir(), flags...)
	}
	notApplied := func(name, path string, p *crds.Proposal) {
		t.Helper()
		w.waitProposal(path, name+" refused", refusedFor(p, "ApproverUnknown"))
		if got := w.liveColor(name); got != "blue" {
			t.Errorf("%s applied: color %q", name, got)
		}
	}

	// A real stamp, for dave to copy.
	path, p := w.pendingEdit("genuine")
	w.decide("alice", p, crds.DecisionApprove)
	real := w.waitProposal(path, "alice's approval applied", applied(p.Name))
	if real.Spec.DecidedBy == nil || real.Spec.DecidedBy.Stamp == "" {
		t.Fatalf("decidedBy %+v: want a stamp", real.Spec.DecidedBy)
	}
	forgery := fmt.Sprintf(`{"decision":"Approve","decidedBy":{"username":"alice","groups":["developers"],"stamp":%q}}`, real.Spec.DecidedBy.Stamp)

	t.Run("forged inside the window", func(t *testing.T) {
		path, p := w.on(t).pendingEdit("window")
		deletePolicies(t)
		err := w.patchAs("dave", p, forgery) // refused when the daemon was quicker to put them back
		if err == nil {
			w.on(t).waitProposal(path, "the forgery refused", refusedFor(p, "ApproverUnknown"))
		}
		if got := w.liveColor("window"); got != "blue" {
			t.Errorf("dave's forgery was applied: color %q", got)
		}
		w.on(t).waitReady("ApproverFromMutatingPolicy") // put back
		w.on(t).waitEvent(crds.KindGitDestination, "dest", "AdmissionPolicyChanged")
		// The Event may be recorded a moment before the counter moves.
		testenv.Eventually(t, time.Minute, "restores counted", metricAtLeast(t, w.d, "gitops_reverser_approver_policies_restored_total", 1), w.d.FailFast())
	})
	t.Run("forged while the daemon was away", func(t *testing.T) {
		path, p := w.on(t).pendingEdit("away")
		restart(func() {
			deletePolicies(t)
			w.patchWithoutPolicies(t, "dave", p, forgery)
		})
		notApplied("away", path, p)
	})
	t.Run("the daemon's cleared stamp", func(t *testing.T) {
		path, p := w.on(t).pendingEdit("cleared")
		w.decide("dave", p, crds.DecisionApprove)
		p = w.on(t).waitProposal(path, "dave's approval refused", refusedFor(p, "Forbidden"))
		if p.Spec.DecidedBy != nil || p.Spec.Decision != crds.DecisionNone {
			t.Errorf("after the daemon cleared the decision: %q by %+v; want neither", p.Spec.Decision, p.Spec.DecidedBy)
		}
		restart(func() {
			deletePolicies(t)
			w.patchWithoutPolicies(t, "dave", p, `{"decision":"Approve"}`)
		})
		notApplied("cleared", path, p)
	})
	t.Run("a policy replaced to stamp anyone", func(t *testing.T) {
		path, p := w.on(t).pendingEdit("replaced")
		restart(func() { // an admin replaces both policies with ones that stamp anyone as alice
			admin := dynamic.NewForConfigOrDie(cp.AdminConfig())
			// The same policy, stamps and all, but naming alice whoever decides.
			policy, err := admin.Resource(crds.MutatingAdmissionPolicies).Get(context.Background(), crds.ApproverPolicyName, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			mutations, _, _ := unstructured.NestedSlice(policy.Object, "spec", "mutations")
			expr, _, _ := unstructured.NestedString(mutations[0].(map[string]any), "jsonPatch", "expression")
			expr = w.replace(expr, "username: request.userInfo.username", `username: "alice"`)
			if err := unstructured.SetNestedField(mutations[0].(map[string]any), expr, "jsonPatch", "expression"); err != nil {
				t.Fatal(err)
			}
			if err := unstructured.SetNestedSlice(policy.Object, mutations, "spec", "mutations"); err != nil {
				t.Fatal(err)
			}
			if _, err := admin.Resource(crds.MutatingAdmissionPolicies).Update(context.Background(), policy, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
			lax := `{"spec":{"validations":[{"expression":"true"}]}}` // and the validating one lets it through
			if _, err := admin.Resource(crds.ValidatingAdmissionPolicies).Patch(context.Background(), crds.ApproverPolicyName,
				"application/merge-patch+json", []byte(lax), metav1.PatchOptions{}); err != nil {
				t.Fatal(err)
			}
			testenv.Eventually(t, time.Minute, "the replaced policy stamps alice", func() (bool, string) {
				err := w.patchAs("dave", p, `{"decision":"Approve"}`)
				cur := w.proposals()
				for _, q := range cur {
					if q.Name == p.Name && q.Spec.DecidedBy != nil && q.Spec.DecidedBy.Username == "alice" {
						return true, ""
					}
				}
				_ = w.patchAs("dave", p, `{"decision":null}`)
				return false, fmt.Sprint(err)
			})
		})
		notApplied("replaced", path, p)
	})
	// The real approver still gets through after all that.
	path, p = w.pendingEdit("after")
	w.decide("alice", p, crds.DecisionApprove)
	w.waitProposal(path, "alice's approval applied after the attacks", applied(p.Name))
}
