package writeback

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/configbutler/gitops-reverser/crds"
)

const podinfoImage = "ghcr.io/stefanprodan/podinfo"

// TestOverlayImageEditProposesTheRenderedDeployment: a person bumps newTag in the images: of the
// overlay's kustomization, a file that holds no object. Exactly one proposal opens, for the
// Deployment the overlay renders, in the overlay's namespace: its desired object is the render
// (the new image, the overlay's replicas and patch kept), its diff the render's change (the
// image's line alone), its path the overlay's kustomization, held while it waits. Approved, it is
// applied as the rule's ServiceAccount writer: refused by the apiserver while writer may only
// read Deployments (the daemon itself could have applied it), applied once writer may patch them.
func TestOverlayImageEditProposesTheRenderedDeployment(t *testing.T) {
	e := newOverlayEnv(t, false, []rbacv1.PolicyRule{{APIGroups: []string{"apps"}, Resources: []string{"deployments"}, Verbs: readOnly}}, nil)
	sha := e.push(false, map[string]string{overlayKust: e.edit(overlayKust, "newTag: 6.5.1", "newTag: 6.5.2")})
	e.runOn(crds.TriggerSyncNow, sha)

	_, all := e.proposals()
	if len(all) != 1 {
		t.Fatalf("proposals %v; want one, for the Deployment", describe(all))
	}
	p := all[0]
	if p.Spec.Path != overlayKust || p.Spec.Change != crds.ChangeUpdate || p.Spec.Target.Kind != "Deployment" ||
		p.Spec.Target.Namespace != e.ns || p.Spec.Target.Name != "podinfo" || p.Spec.SourceCommit != sha || p.Spec.Author.Name != alice.Name {
		t.Errorf("proposal: path %s, %s %s, commit %s by %s; want %s, update of Deployment %s/podinfo from %s by %s",
			p.Spec.Path, p.Spec.Change, targetName(p.Spec.Target), short(p.Spec.SourceCommit), p.Spec.Author.Name, overlayKust, e.ns, short(sha), alice.Name)
	}
	desired := documentObject(t, p.Spec.Desired)
	c := containerOf(t, desired)
	if replicas, _, _ := unstructured.NestedInt64(desired, "spec", "replicas"); c["image"] != podinfoImage+":6.5.2" || replicas != 2 || colourOf(c) != "#34577c" {
		t.Errorf("desired: image %v, replicas %d, colour %q; want the render: 6.5.2, 2 and #34577c\n%s", c["image"], replicas, colourOf(c), p.Spec.Desired)
	}
	if lines := changedLines(p.Spec.Diff); len(lines) != 2 || !strings.HasPrefix(lines[0], "-") || !strings.Contains(lines[0], podinfoImage+":6.5.1") ||
		!strings.HasPrefix(lines[1], "+") || !strings.Contains(lines[1], podinfoImage+":6.5.2") {
		t.Errorf("diff changes %q; want the image's line from 6.5.1 to 6.5.2 alone\n%s", lines, p.Spec.Diff)
	}
	if run := e.lastRun(); run.Status.ProposalsOpened != 1 || run.Status.RefusedTotal != 0 {
		t.Errorf("run: %d opened, %d refused %+v; want 1 and none", run.Status.ProposalsOpened, run.Status.RefusedTotal, run.Status.Refused)
	}
	if held, _ := e.pool.Held(e.git.RepoURL("repo"), "main", overlayKust); !held {
		t.Errorf("%s not held while its proposal waits", overlayKust)
	}
	// An approval checks the proposal against the overlay's render at its commit: another image
	// is not what Git renders.
	d, err := e.c.destination(e.ns, "dest")
	if err != nil {
		t.Fatal(err)
	}
	if err := e.c.adoptedFromGit(context.Background(), d, p); err != nil {
		t.Errorf("the proposal is not what the overlay renders at its commit: %v", err)
	}
	forged := *p
	forged.Spec.Desired = strings.Replace(p.Spec.Desired, "6.5.2", "6.6.6", 1)
	var refusedErr *Refused
	if err := e.c.adoptedFromGit(context.Background(), d, &forged); !errors.As(err, &refusedErr) || refusedErr.Reason != ReasonNotFromGit {
		t.Errorf("a desired object the overlay does not render: %v; want %s", err, ReasonNotFromGit)
	}

	e.approve(p)
	refused := e.waitProposal(p.Name, "the Deployment refused as writer", func(p *crds.Proposal) bool {
		return appliedReason(p) == reasonForbidden && p.Spec.Decision == crds.DecisionNone
	})
	sa := "system:serviceaccount:" + e.ns + ":writer"
	if !strings.Contains(refused.Status.Message, sa) {
		t.Errorf("the refusal is not the apiserver's as %s: %s", sa, refused.Status.Message)
	}
	e.bind("writer-deploys", sa, []rbacv1.PolicyRule{{APIGroups: []string{"apps"}, Resources: []string{"deployments"}, Verbs: []string{"patch"}}})
	e.approve(refused)
	e.waitProposal(p.Name, "the Deployment applied once writer may", func(p *crds.Proposal) bool { return p.Status.Phase == crds.PhaseApplied })
	live := e.live(deployments, e.ns, "podinfo")
	if c := containerOf(t, live.Object); c["image"] != podinfoImage+":6.5.2" || !managedBy(live, crds.FieldManager) {
		t.Errorf("live Deployment: image %v, managers %v; want 6.5.2, applied by %s", c["image"], live.GetManagedFields(), crds.FieldManager)
	}
	if held, _ := e.pool.Held(e.git.RepoURL("repo"), "main", overlayKust); held {
		t.Errorf("%s still held once no proposal waits on it", overlayKust)
	}
}

// TestOverlayPatchEditProposesTheRenderedDeployment: a person changes the colour in the overlay's
// patch, a file the index passes over as a patch. One proposal opens for the Deployment, with the
// colour the render now gives it, and (auto-applied) the live Deployment gets it, as writer.
func TestOverlayPatchEditProposesTheRenderedDeployment(t *testing.T) {
	e := newOverlayEnv(t, true, []rbacv1.PolicyRule{{APIGroups: []string{"apps"}, Resources: []string{"deployments"}, Verbs: writes}}, nil)
	sha := e.push(false, map[string]string{overlayPatch: e.edit(overlayPatch, `"#34577c"`, `"#c0ffee"`)})
	e.runOn(crds.TriggerSyncNow, sha)

	_, all := e.proposals()
	if len(all) != 1 || all[0].Spec.Target.Name != "podinfo" || all[0].Spec.Change != crds.ChangeUpdate || all[0].Spec.Path != overlayKust {
		t.Fatalf("proposals %v; want one update of the Deployment podinfo, named by %s", describe(all), overlayKust)
	}
	if c := containerOf(t, documentObject(t, all[0].Spec.Desired)); colourOf(c) != "#c0ffee" || c["image"] != podinfoImage+":6.5.1" {
		t.Errorf("desired: colour %q, image %v; want #c0ffee and 6.5.1", colourOf(c), c["image"])
	}
	e.waitProposal(all[0].Name, "the Deployment applied", func(p *crds.Proposal) bool { return p.Status.Phase == crds.PhaseApplied })
	live := e.live(deployments, e.ns, "podinfo")
	if c := containerOf(t, live.Object); colourOf(c) != "#c0ffee" || !managedBy(live, crds.FieldManager) {
		t.Errorf("live Deployment: colour %q, managers %v; want #c0ffee, applied by %s", colourOf(c), live.GetManagedFields(), crds.FieldManager)
	}
}

// TestOverlayBaseEditIsProposedOnceAsRendered: a person edits the base's Deployment document (in
// the destination's folder, which holds the base too). The overlay reads it, so its render
// decides: one proposal, of the rendered Deployment in the overlay's namespace, and none from
// the document itself (which, without the overlay, would be a second one for the same object).
func TestOverlayBaseEditIsProposedOnceAsRendered(t *testing.T) {
	e := newOverlayEnv(t, false, []rbacv1.PolicyRule{{APIGroups: []string{"apps"}, Resources: []string{"deployments"}, Verbs: writes}}, nil)
	sha := e.push(false, map[string]string{overlayBase: e.edit(overlayBase, "- containerPort: 9898", "- containerPort: 9899")})
	e.runOn(crds.TriggerSyncNow, sha)

	_, all := e.proposals()
	if len(all) != 1 || all[0].Spec.Path != overlayKust {
		t.Fatalf("proposals %v; want one, the overlay's", describe(all))
	}
	c := containerOf(t, documentObject(t, all[0].Spec.Desired))
	ports, _ := c["ports"].([]any)
	if len(ports) != 1 || ports[0].(map[string]any)["containerPort"] != int64(9899) || c["image"] != podinfoImage+":6.5.1" {
		t.Errorf("desired container %v; want port 9899 with the overlay's image 6.5.1", c)
	}
}

// TestOverlayThatDoesNotRenderProposesNothing: a person adds a resource the overlay does not have
// to its kustomization. Nothing is proposed, and the run refuses the overlay's kustomization,
// OverlayDoesNotRender, saying what is missing; the live Deployment stays.
func TestOverlayThatDoesNotRenderProposesNothing(t *testing.T) {
	e := newOverlayEnv(t, true, []rbacv1.PolicyRule{{APIGroups: []string{"apps"}, Resources: []string{"deployments"}, Verbs: writes}}, nil)
	kust := e.edit(overlayKust, "- ../base/podinfo\n", "- ../base/podinfo\n- cache.yaml\n")
	kust = strings.Replace(kust, "newTag: 6.5.1", "newTag: 6.5.2", 1)
	sha := e.push(false, map[string]string{overlayKust: kust})
	e.runOn(crds.TriggerSyncNow, sha)

	if _, all := e.proposals(); len(all) != 0 {
		t.Errorf("proposals %v; want none", describe(all))
	}
	run := e.lastRun()
	if len(run.Status.Refused) != 1 {
		t.Fatalf("run %s: refused %+v; want the overlay's kustomization", run.Status.Phase, run.Status.Refused)
	}
	if r := run.Status.Refused[0]; r.Path != overlayKust || r.Reason != ReasonOverlayDoesNotRender || !strings.Contains(r.Message, "cache.yaml") {
		t.Errorf("refused %+v; want %s, %s, naming cache.yaml", r, overlayKust, ReasonOverlayDoesNotRender)
	}
	if c := containerOf(t, e.live(deployments, e.ns, "podinfo").Object); c["image"] != podinfoImage+":6.5.1" {
		t.Errorf("live image %v; want 6.5.1 as it was", c["image"])
	}
}

// TestOverlayCannotMoveObjectsIntoAnotherNamespace plays the attack of a tenant who holds only a
// Role in her namespace and pushes to her overlay, auto-applied: she points the overlay's
// namespace: at victim and bumps the image. writer, the ServiceAccount write-back acts as, may
// write Deployments in victim too (another rule's business): only the rules bound what this
// destination touches. The Deployment the overlay now renders in victim is refused as not
// selected; victim's Deployment is untouched and no proposal targets victim; her own Deployment,
// which the overlay no longer renders, gets a destroy that waits for a person.
func TestOverlayCannotMoveObjectsIntoAnotherNamespace(t *testing.T) {
	deploys := []rbacv1.PolicyRule{{APIGroups: []string{"apps"}, Resources: []string{"deployments"}, Verbs: writes}}
	e := newOverlayEnv(t, true, deploys, nil)
	ctx := context.Background()
	victim := e.ns + "-victim"
	if _, err := e.kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: victim}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.bindIn(victim, deploys)
	theirs := strings.Replace(e.rendered(e.files)[0], "namespace: "+e.ns+"\n", "namespace: "+victim+"\n", 1)
	e.createDoc(victim, strings.Replace(theirs, podinfoImage+":6.5.1", "ghcr.io/victim/podinfo:1.0.0", 1))

	kust := e.edit(overlayKust, "namespace: "+e.ns+"\n", "namespace: "+victim+"\n")
	kust = strings.Replace(kust, "newTag: 6.5.1", "newTag: pwned", 1)
	sha := e.push(false, map[string]string{overlayKust: kust})
	e.runOn(crds.TriggerSyncNow, sha)

	run := e.lastRun()
	if len(run.Status.Refused) != 1 {
		t.Fatalf("run %s: refused %+v; want the Deployment rendered in %s", run.Status.Phase, run.Status.Refused, victim)
	}
	if r := run.Status.Refused[0]; r.Path != overlayKust || r.Reason != ReasonNotSelected || !strings.Contains(r.Message, "rendered Deployment.apps "+victim+"/podinfo") ||
		!strings.Contains(r.Message, "in namespace "+victim) {
		t.Errorf("refused %+v; want %s, NotSelected, the rendered Deployment in namespace %s", r, overlayKust, victim)
	}
	if c := containerOf(t, e.live(deployments, victim, "podinfo").Object); c["image"] != "ghcr.io/victim/podinfo:1.0.0" {
		t.Errorf("victim's Deployment runs %v", c["image"])
	}
	if c := containerOf(t, e.live(deployments, e.ns, "podinfo").Object); c["image"] != podinfoImage+":6.5.1" {
		t.Errorf("her own Deployment runs %v: a change was applied", c["image"])
	}
	_, all := e.proposals()
	if len(all) != 1 || all[0].Spec.Target.Namespace != e.ns || all[0].Spec.Change != crds.ChangeDestroy || all[0].Status.Phase != crds.PhasePending {
		t.Errorf("proposals %v; want only the waiting destroy of Deployment %s/podinfo", describe(all), e.ns)
	}
}

// TestOverlayCannotReachAnObjectItsRulesDoNotSelect plays the same tenant against a neighbour in
// her own namespace: the rules select only Deployments labelled app=podinfo, and writer's Role
// covers every Deployment of the namespace (Roles are per namespace, not per team). She adds to
// the overlay a Deployment named billing, labelled as the other team's live billing is, running
// her image. The rendered billing is refused (its labels are not selected); the live billing keeps
// its image, and nothing is proposed for it.
func TestOverlayCannotReachAnObjectItsRulesDoNotSelect(t *testing.T) {
	e := newOverlayEnv(t, true, []rbacv1.PolicyRule{{APIGroups: []string{"apps"}, Resources: []string{"deployments"}, Verbs: writes}},
		func(_ string, labels map[string]string) bool { return labels["app"] == "podinfo" })
	billing := strings.ReplaceAll(e.edit(overlayBase, podinfoImage+":6.5.0", "ghcr.io/acme/billing:2.0.0"), "podinfo", "billing")
	e.createDoc(e.ns, billing)

	planted := strings.Replace(billing, "ghcr.io/acme/billing:2.0.0", "ghcr.io/mallory/miner:latest", 1)
	sha := e.push(false, map[string]string{
		"apps/production/billing.yaml": planted,
		overlayKust:                    e.edit(overlayKust, "- ../base/podinfo\n", "- ../base/podinfo\n- billing.yaml\n"),
	})
	e.runOn(crds.TriggerSyncNow, sha)

	run := e.lastRun()
	if len(run.Status.Refused) != 1 {
		t.Fatalf("run %s: refused %+v; want the rendered billing", run.Status.Phase, run.Status.Refused)
	}
	if r := run.Status.Refused[0]; r.Path != overlayKust || r.Reason != ReasonNotSelected || !strings.Contains(r.Message, "Deployment.apps "+e.ns+"/billing") ||
		!strings.Contains(r.Message, "labels are not selected") {
		t.Errorf("refused %+v; want %s, NotSelected, billing's labels", r, overlayKust)
	}
	if c := containerOf(t, e.live(deployments, e.ns, "billing").Object); c["image"] != "ghcr.io/acme/billing:2.0.0" {
		t.Errorf("the neighbour's billing runs %v", c["image"])
	}
	_, all := e.proposals()
	if slices.ContainsFunc(all, func(p *crds.Proposal) bool { return p.Spec.Target.Name == "billing" }) || len(all) != 0 {
		t.Errorf("proposals %v; want none (podinfo's render did not change, billing is not selected)", describe(all))
	}
}
