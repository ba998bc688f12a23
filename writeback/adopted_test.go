package writeback

import (
	"context"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/configbutler/gitops-reverser/crds"
	"github.com/configbutler/gitops-reverser/placement"
)

var (
	readOnly = []string{"get", "list", "watch"}
	writes   = []string{"get", "list", "watch", "create", "patch", "delete"}
)

// TestAdoptedMultiDocumentEditProposesEachChangedDocument: in an adopted folder a person changes
// the ConfigMap's data and the Deployment's image in podinfo.yaml, a file of three documents that
// name no namespace. Exactly two proposals open, one per changed document, each for the object
// its document holds in the namespace the kustomization gives, with that document as the person
// wrote it; the Service's untouched document proposes nothing. Approved, each is applied as the
// rule's ServiceAccount writer: the ConfigMap, which writer may patch, is applied with write-back's
// field manager; the Deployment, which writer may only read, is refused by the apiserver as
// writer (the daemon itself could have), and applied once writer may. While the Deployment's
// proposal waits, the file stays held for it.
func TestAdoptedMultiDocumentEditProposesEachChangedDocument(t *testing.T) {
	e := newAdoptedEnv(t, false, []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"services"}, Verbs: readOnly},
		{APIGroups: []string{"apps"}, Resources: []string{"deployments"}, Verbs: readOnly},
		{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: writes},
	})
	deploy := strings.Replace(podinfoDeploy, "podinfo:6.5.0", "podinfo:6.5.1", 1)
	config := strings.Replace(podinfoConfig, "color: blue", "color: green", 1)
	sha := e.push(false, map[string]string{podinfoPath: podinfoFile(deploy, podinfoService, config), "apps/README.md": "# podinfo, edited\n"})
	e.runOn(crds.TriggerSyncNow, sha)

	byKind, all := e.proposals()
	if len(all) != 2 || byKind["ConfigMap"] == nil || byKind["Deployment"] == nil {
		t.Fatalf("%d proposals %v; want one for the ConfigMap and one for the Deployment", len(all), keys(byKind))
	}
	for kind, want := range map[string]string{"ConfigMap": config, "Deployment": deploy} {
		p := byKind[kind]
		if p.Spec.Path != podinfoPath || p.Spec.Change != crds.ChangeUpdate || p.Spec.Target.Namespace != e.ns ||
			p.Spec.Target.Name != "podinfo" || p.Spec.Desired != want || p.Spec.SourceCommit != sha {
			t.Errorf("%s proposal: path %s, change %s, target %+v, commit %s, desired\n%s\nwant %s update of %s/podinfo from %s, the document as written",
				kind, p.Spec.Path, p.Spec.Change, p.Spec.Target, short(p.Spec.SourceCommit), p.Spec.Desired, podinfoPath, e.ns, short(sha))
		}
	}
	if d := byKind["Deployment"].Spec.Diff; !strings.Contains(d, "-        image: ghcr.io/stefanprodan/podinfo:6.5.0") || !strings.Contains(d, "+        image: ghcr.io/stefanprodan/podinfo:6.5.1") {
		t.Errorf("the Deployment's diff does not show the person's change:\n%s", d)
	}
	if run := e.lastRun(); run.Status.ProposalsOpened != 2 || run.Status.RefusedTotal != 0 {
		t.Errorf("run: %d opened, %d refused %+v; want 2 and none", run.Status.ProposalsOpened, run.Status.RefusedTotal, run.Status.Refused)
	}

	e.approve(byKind["ConfigMap"])
	e.approve(byKind["Deployment"])
	e.waitProposal(byKind["ConfigMap"].Name, "the ConfigMap applied", func(p *crds.Proposal) bool { return p.Status.Phase == crds.PhaseApplied })
	cm := e.live(configMaps, e.ns, "podinfo")
	if color, _, _ := unstructured.NestedString(cm.Object, "data", "color"); color != "green" || !managedBy(cm, crds.FieldManager) {
		t.Errorf("ConfigMap: color %q, managers %v; want green, applied by %s", color, cm.GetManagedFields(), crds.FieldManager)
	}
	refused := e.waitProposal(byKind["Deployment"].Name, "the Deployment refused as writer", func(p *crds.Proposal) bool {
		return appliedReason(p) == reasonForbidden && p.Spec.Decision == crds.DecisionNone
	})
	if sa := "system:serviceaccount:" + e.ns + ":writer"; !strings.Contains(refused.Status.Message, sa) {
		t.Errorf("the refusal is not the apiserver's as %s: %s", sa, refused.Status.Message)
	}
	if held, _ := e.pool.Held(e.git.RepoURL("repo"), "main", podinfoPath); !held {
		t.Errorf("%s released while the Deployment's proposal waits on it", podinfoPath)
	}

	e.bind("writer-deploys", "system:serviceaccount:"+e.ns+":writer", []rbacv1.PolicyRule{{APIGroups: []string{"apps"}, Resources: []string{"deployments"}, Verbs: []string{"patch"}}})
	e.approve(refused)
	e.waitProposal(refused.Name, "the Deployment applied once writer may", func(p *crds.Proposal) bool { return p.Status.Phase == crds.PhaseApplied })
	containers, _, _ := unstructured.NestedSlice(e.live(deployments, e.ns, "podinfo").Object, "spec", "template", "spec", "containers")
	if len(containers) != 1 || containers[0].(map[string]any)["image"] != "ghcr.io/stefanprodan/podinfo:6.5.1" {
		t.Errorf("Deployment containers %v, want podinfo:6.5.1", containers)
	}
	if held, _ := e.pool.Held(e.git.RepoURL("repo"), "main", podinfoPath); held {
		t.Errorf("%s still held once no proposal waits on it", podinfoPath)
	}
}

// TestAdoptedDocumentOfAnotherNamespaceIsRefused: a document of the adopted folder that declares
// a namespace the rule does not cover is refused (NotSelected, the SyncRun naming the document),
// and so is one that does not parse (Unparseable, at its line in the file); the file's other
// changed document still becomes a proposal.
func TestAdoptedDocumentOfAnotherNamespaceIsRefused(t *testing.T) {
	e := newAdoptedEnv(t, false, []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: writes}})
	config := strings.Replace(podinfoConfig, "color: blue", "color: green", 1)
	other := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: elsewhere\n  namespace: kube-system\ndata:\n  k: v\n"
	twice := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: twice\ndata:\n  k: v\n  k: w\n" // k given twice: lines 6 and 7 of the document
	file := podinfoFile(podinfoDeploy, podinfoService, config, other, twice)
	sha := e.push(false, map[string]string{podinfoPath: file})
	e.runOn(crds.TriggerSyncNow, sha)

	run := e.lastRun()
	if run.Status.Phase != crds.SyncRunPartial || len(run.Status.Refused) != 2 {
		t.Fatalf("run: phase %s, refused %+v; want Partial, the other namespace's document and the broken one", run.Status.Phase, run.Status.Refused)
	}
	r := run.Status.Refused[0]
	if r.Path != podinfoPath || r.Reason != ReasonNotSelected || !strings.Contains(r.Message, "document 4") || !strings.Contains(r.Message, "in namespace kube-system") {
		t.Errorf("refused %+v; want %s, NotSelected, naming document 4 and kube-system", r, podinfoPath)
	}
	at := strings.Count(file[:strings.Index(file, twice)], "\n") + 1 // the document's first line in the file
	lines := fmt.Sprintf("lines %d and %d", at+5, at+6)
	if r := run.Status.Refused[1]; r.Reason != ReasonUnparseable || !strings.Contains(r.Message, "document 5") || !strings.Contains(r.Message, lines) {
		t.Errorf("refused %+v; want Unparseable, naming document 5 and the %s of the file", r, lines)
	}
	byKind, all := e.proposals()
	if len(all) != 1 || byKind["ConfigMap"] == nil || byKind["ConfigMap"].Spec.Target.Namespace != e.ns || byKind["ConfigMap"].Spec.Target.Name != "podinfo" {
		t.Errorf("proposals %v; want the ConfigMap podinfo of %s only", keys(byKind), e.ns)
	}
}

// TestAdoptedRemovedDocumentProposesItsDestroy: a person removes the Service's document from
// podinfo.yaml: one destroy proposal for the Service, nothing for the documents left as they were;
// approved, the Service is deleted as writer.
func TestAdoptedRemovedDocumentProposesItsDestroy(t *testing.T) {
	e := newAdoptedEnv(t, true, []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"services"}, Verbs: writes}})
	sha := e.push(false, map[string]string{podinfoPath: podinfoFile(podinfoDeploy, podinfoConfig)})
	e.runOn(crds.TriggerSyncNow, sha)

	byKind, all := e.proposals()
	p := byKind["Service"]
	if len(all) != 1 || p == nil || p.Spec.Change != crds.ChangeDestroy || p.Spec.Target.Namespace != e.ns || p.Spec.Target.Name != "podinfo" {
		t.Fatalf("proposals %v; want only the destroy of Service %s/podinfo", keys(byKind), e.ns)
	}
	if p.Status.Phase != crds.PhasePending {
		t.Errorf("a destroy applied without review: %s", p.Status.Phase)
	}
	e.approve(p)
	e.waitProposal(p.Name, "the destroy applied", func(p *crds.Proposal) bool { return p.Status.Phase == crds.PhaseApplied })
	if e.live(services, e.ns, "podinfo") != nil {
		t.Error("the Service is still there")
	}
	if e.live(deployments, e.ns, "podinfo") == nil || e.live(configMaps, e.ns, "podinfo") == nil {
		t.Error("the destroy took more than the Service")
	}
}

// TestAdoptedFilesThatHoldNoObjectsMakeNothing: edits of the README, a Helm values file, the
// kustomization (a comment), and of podinfo.yaml's comments alone, propose nothing and refuse
// nothing.
func TestAdoptedFilesThatHoldNoObjectsMakeNothing(t *testing.T) {
	e := newAdoptedEnv(t, true, []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: writes}})
	sha := e.push(false, map[string]string{
		"apps/README.md":           "# podinfo\n\nNow with docs.\n",
		"apps/podinfo/values.yaml": "replicaCount: 3\nimage:\n  tag: 6.5.1\n",
		podinfoKust:                "# ours\napiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nnamespace: " + e.ns + "\nresources:\n- podinfo.yaml\n",
		podinfoPath:                "# podinfo, as the team keeps it\n" + podinfoFile(podinfoDeploy, podinfoService, strings.Replace(podinfoConfig, "blue", "blue # the brand", 1)),
	})
	e.runOn(crds.TriggerSyncNow, sha)
	run := e.lastRun()
	if _, all := e.proposals(); len(all) != 0 || run.Status.Phase != crds.SyncRunSuccess || run.Status.RefusedTotal != 0 {
		t.Errorf("run %s: %d proposals, %d refused %+v; want Success with none", run.Status.Phase, len(all), run.Status.RefusedTotal, run.Status.Refused)
	}
}

// TestAdoptedFolderCannotReachAnotherNamespace plays the attack from the side of a tenant who
// holds only a Role in her namespace and pushes to her adopted folder, auto-applied: she points
// podinfo's kustomization at the namespace victim and changes the ConfigMap podinfo (which now
// inherits victim), and adds a file whose ConfigMap declares victim. Every document that would
// land in victim is refused as not selected; victim's ConfigMap podinfo is untouched, no proposal
// targets victim, and her own namespace is not changed either (the destroys the move implies
// wait for a person).
func TestAdoptedFolderCannotReachAnotherNamespace(t *testing.T) {
	e := newAdoptedEnv(t, true, []rbacv1.PolicyRule{
		{APIGroups: []string{"", "apps"}, Resources: []string{"configmaps", "services", "deployments"}, Verbs: writes},
	})
	ctx := context.Background()
	victim := e.ns + "-victim"
	if _, err := e.kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: victim}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.createDoc(victim, strings.Replace(podinfoConfig, "color: blue", "color: victims", 1))
	pwned := strings.Replace(podinfoConfig, "color: blue", "color: pwned", 1)
	sha := e.push(false, map[string]string{
		podinfoKust:                 "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nnamespace: " + victim + "\nresources:\n- podinfo.yaml\n",
		podinfoPath:                 podinfoFile(podinfoDeploy, podinfoService, pwned),
		"apps/podinfo/planted.yaml": strings.Replace(pwned, "  name: podinfo\n", "  name: podinfo\n  namespace: "+victim+"\n", 1),
	})
	e.runOn(crds.TriggerSyncNow, sha)

	run := e.lastRun()
	refused := map[string]int{}
	for _, r := range run.Status.Refused {
		if r.Reason != ReasonNotSelected || !strings.Contains(r.Message, "in namespace "+victim) {
			t.Errorf("refused %+v; want NotSelected in namespace %s", r, victim)
		}
		refused[r.Path]++
	}
	if refused[podinfoPath] != 3 || refused["apps/podinfo/planted.yaml"] != 1 {
		t.Errorf("refused %v; want podinfo.yaml's three documents and planted.yaml's one", refused)
	}
	if color, _, _ := unstructured.NestedString(e.live(configMaps, victim, "podinfo").Object, "data", "color"); color != "victims" {
		t.Errorf("victim's ConfigMap says %q", color)
	}
	if color, _, _ := unstructured.NestedString(e.live(configMaps, e.ns, "podinfo").Object, "data", "color"); color != "blue" {
		t.Errorf("her own ConfigMap says %q: a change was applied", color)
	}
	_, all := e.proposals()
	for _, p := range all {
		if p.Spec.Target.Namespace != e.ns || p.Spec.Change != crds.ChangeDestroy || p.Status.Phase != crds.PhasePending {
			t.Errorf("proposal %s: %s %s, phase %s; want only waiting destroys in %s", p.Name, p.Spec.Change, targetName(p.Spec.Target), p.Status.Phase, e.ns)
		}
	}
	if len(all) != 3 {
		t.Errorf("%d proposals; want the three destroys the move out of %s implies", len(all), e.ns)
	}
}

// keys names the proposals of byKind for a message.
func keys(byKind map[string]*crds.Proposal) []string {
	var out []string
	for kind, p := range byKind {
		out = append(out, fmt.Sprintf("%s %s %s", p.Spec.Change, kind, p.Spec.Target.Namespace+"/"+p.Spec.Target.Name))
	}
	return out
}

// TestDocumentNamespaceIsTheRulesWhenNoneIsSaid: a document's namespace is the one it declares
// or inherits; a cluster-scoped kind inherits none; a namespaced document that gets none takes
// the namespace of the rules when they select its kind in exactly one, and none (to be refused)
// when they select it in several or in all.
func TestDocumentNamespaceIsTheRulesWhenNoneIsSaid(t *testing.T) {
	cm := func(ns string) Selection {
		return Selection{GVR: configMaps, Kind: "ConfigMap", Namespaced: true, Namespace: ns}
	}
	roles := Selection{GVR: schema.GroupVersionResource{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "clusterroles"}, Kind: "ClusterRole"}
	doc := func(kind, group, ns string, inherited bool) placement.Indexed {
		return placement.Indexed{Key: placement.Key{Group: group, Kind: kind, Namespace: ns, Name: "x"}, Inherited: inherited}
	}
	for _, tc := range []struct {
		name string
		sels []Selection
		doc  placement.Indexed
		want string
	}{
		{"declared", []Selection{cm("team")}, doc("ConfigMap", "", "other", false), "other"},
		{"inherited", []Selection{cm("team")}, doc("ConfigMap", "", "kust", true), "kust"},
		{"none: the rule's one namespace", []Selection{cm("team")}, doc("ConfigMap", "", "", false), "team"},
		{"none, two rules' namespaces", []Selection{cm("team"), cm("other")}, doc("ConfigMap", "", "", false), ""},
		{"none, a ClusterWatchRule's every namespace", []Selection{cm("")}, doc("ConfigMap", "", "", false), ""},
		{"cluster-scoped inherits none", []Selection{roles}, doc("ClusterRole", "rbac.authorization.k8s.io", "kust", true), ""},
		{"cluster-scoped declaring one keeps it (then refused)", []Selection{roles}, doc("ClusterRole", "rbac.authorization.k8s.io", "team", false), "team"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := documentNamespace(tc.sels, tc.doc); got != tc.want {
				t.Errorf("namespace %q, want %q", got, tc.want)
			}
		})
	}
}
