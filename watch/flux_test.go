package watch

import (
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/configbutler/gitops-reverser/crds"
	"github.com/configbutler/gitops-reverser/testenv"
)

var fluxKustomizations = schema.GroupVersionResource{Group: "kustomize.toolkit.fluxcd.io", Version: "v1", Resource: "kustomizations"}

// TestFluxAgreesWithWhatTheMirrorWritesIntoTheOverlay: a real Flux (source-controller and
// kustomize-controller) applies the production overlay from the same remote the mirror writes;
// a person's kubectl scale and kubectl set image of the production Deployment are committed into
// the overlay's replicas: and images:, Flux applies that commit, and over three reconciles
// after it the live object keeps the person's values: nothing flips back.
func TestFluxAgreesWithWhatTheMirrorWritesIntoTheOverlay(t *testing.T) {
	e := newEnv(t)
	flux := testenv.StartFlux(t, cp)
	a := &adopted{e: e, files: readOverlayFixture(t, e.ns)}
	// The HelmRelease's kind is not installed here: Flux would refuse the whole overlay for it.
	a.files["apps/base/podinfo/kustomization.yaml"] = strings.Replace(a.files["apps/base/podinfo/kustomization.yaml"], "  - release.yaml\n", "", 1)
	delete(a.files, "apps/base/podinfo/release.yaml")
	const kust = "apps/production/kustomization.yaml"
	a.files[kust] = strings.Replace(a.files[kust], "  - path: redis-values.yaml\n    target:\n      kind: HelmRelease\n      name: redis\n", "", 1)
	delete(a.files, "apps/production/redis-values.yaml")
	if _, err := gitSrv.PushCommit(e.repo, "main", testenv.Signature{Name: "Team", Email: "team@example.com"}, "the team's apps", a.files, nil); err != nil {
		t.Fatal(err)
	}
	a.seen = 1
	flux.Sync(t, testenv.FluxSync{Namespace: e.ns, Name: "apps", URL: gitSrv.RepoURL(e.repo), Username: gitSrv.Username,
		Password: gitSrv.Password, Path: "./apps/production"})
	podinfoIs := func(what string, replicas int64, image string) {
		t.Helper()
		testenv.Eventually(t, 2*time.Minute, what, func() (bool, string) {
			got, img := a.podinfo()
			return got == replicas && img == image, fmt.Sprintf("replicas %d, image %s", got, img)
		}, flux.FailFast())
	}
	podinfoIs("Flux applies production", 2, "ghcr.io/stefanprodan/podinfo:6.5.4")

	e.apply(crds.GitDestinations, &crds.GitDestination{ObjectMeta: metav1.ObjectMeta{Name: "dest", Namespace: e.ns},
		Spec: crds.GitDestinationSpec{RepoRef: crds.NamespacedReference{Name: "repo"}, Branch: "main", BaseFolder: "apps/production",
			Layout: crds.LayoutExisting}})
	e.watchRule("apps", "deployments", "services", "configmaps")
	e.startManager()

	a.patchAs("kubectl-scale", deployments, "podinfo", types.MergePatchType, `{"spec":{"replicas":3}}`, "scale")
	a.expect(a.nextCommit(), map[string]*string{kust: a.edit(kust, "    count: 2\n", "    count: 3\n")})
	a.patchAs("kubectl-set", deployments, "podinfo", types.StrategicMergePatchType,
		`{"spec":{"template":{"spec":{"containers":[{"name":"podinfod","image":"ghcr.io/stefanprodan/podinfo:6.5.5"}]}}}}`)
	a.expect(a.nextCommit(), map[string]*string{kust: a.edit(kust, "newTag: 6.5.4 #", "newTag: 6.5.5 #")})

	tip := a.tip()
	testenv.Eventually(t, 2*time.Minute, "Flux applies the mirror's commit", func() (bool, string) {
		got := a.fluxStatus("lastAppliedRevision")
		return got == "main@sha1:"+tip, got
	}, flux.FailFast())
	for i := range 3 {
		at := fmt.Sprintf("agree-%d", i)
		a.requestReconcile(at)
		testenv.Eventually(t, 2*time.Minute, "Flux reconciles again ("+at+")", func() (bool, string) {
			got := a.fluxStatus("lastHandledReconcileAt")
			return got == at, got
		}, flux.FailFast())
		if replicas, image := a.podinfo(); replicas != 3 || image != "ghcr.io/stefanprodan/podinfo:6.5.5" {
			t.Fatalf("after Flux's reconcile %d the live Deployment has replicas %d and image %s: it flipped back", i+1, replicas, image)
		}
	}
	a.expectRemote() // and the mirror wrote nothing more
}

// podinfo is the live production Deployment's replicas and image.
func (a *adopted) podinfo() (int64, string) {
	u, err := a.e.resource(deployments, a.e.ns).Get(a.e.ctx, "podinfo", metav1.GetOptions{})
	if err != nil {
		return 0, err.Error()
	}
	replicas, _, _ := unstructured.NestedInt64(u.Object, "spec", "replicas")
	containers, _, _ := unstructured.NestedSlice(u.Object, "spec", "template", "spec", "containers")
	if len(containers) == 0 {
		return replicas, ""
	}
	image, _, _ := unstructured.NestedString(containers[0].(map[string]any), "image")
	return replicas, image
}

// tip is the remote branch's last commit.
func (a *adopted) tip() string {
	a.e.t.Helper()
	h, err := gitSrv.History(a.e.repo, "main")
	if err != nil || len(h) == 0 {
		a.e.t.Fatalf("history: %v", err)
	}
	return h[0].SHA
}

// fluxStatus is a status field of the test's Flux Kustomization.
func (a *adopted) fluxStatus(field string) string {
	u, err := a.e.resource(fluxKustomizations, a.e.ns).Get(a.e.ctx, "apps", metav1.GetOptions{})
	if err != nil {
		return err.Error()
	}
	v, _, _ := unstructured.NestedString(u.Object, "status", field)
	return v
}

// requestReconcile asks kustomize-controller to reconcile the Kustomization now, as flux
// reconcile does: the annotation's value comes back in status.lastHandledReconcileAt.
func (a *adopted) requestReconcile(at string) {
	a.e.t.Helper()
	patch := fmt.Sprintf(`{"metadata":{"annotations":{"reconcile.fluxcd.io/requestedAt":%q}}}`, at)
	if _, err := a.e.resource(fluxKustomizations, a.e.ns).Patch(a.e.ctx, "apps", types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		a.e.t.Fatal(err)
	}
}
