package watch

import (
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/configbutler/gitops-reverser/crds"
	"github.com/configbutler/gitops-reverser/placement"
	"github.com/configbutler/gitops-reverser/testenv"
)

// overlayFixture pushes placement's testdata/overlays (a base, a staging and a production
// overlay, as flux2-kustomize-helm-example lays them out) with production's namespace the
// test's, applies production's render as Flux's kustomize-controller would (server-side apply,
// its field manager; the HelmRelease aside, its kind is not installed here), and points the
// destination at apps/production with layout Existing.
func overlayFixture(e *env) *adopted {
	return overlayFixtureAt(e, "apps/production", nil)
}

// overlayFixtureAt is overlayFixture with the destination on folder, tuned by existing.
func overlayFixtureAt(e *env, folder string, existing *crds.ExistingLayout) *adopted {
	e.t.Helper()
	a := &adopted{e: e, files: readOverlayFixture(e.t, e.ns)}
	if _, err := gitSrv.PushCommit(e.repo, "main", testenv.Signature{Name: "Team", Email: "team@example.com"}, "the team's apps", a.files, nil); err != nil {
		e.t.Fatal(err)
	}
	a.seen = 1
	for _, obj := range a.render("apps/production") {
		if u := (&unstructured.Unstructured{Object: obj}); u.GetKind() != "HelmRelease" {
			a.applyAs("kustomize-controller", u)
		}
	}
	e.apply(crds.GitDestinations, &crds.GitDestination{ObjectMeta: metav1.ObjectMeta{Name: "dest", Namespace: e.ns},
		Spec: crds.GitDestinationSpec{RepoRef: crds.NamespacedReference{Name: "repo"}, Branch: "main", BaseFolder: folder,
			Layout: crds.LayoutExisting, Existing: existing}})
	e.watchRule("apps", "deployments", "services", "configmaps")
	return a
}

// readOverlayFixture is placement's testdata/overlays, with production's namespace ns.
func readOverlayFixture(t *testing.T, ns string) map[string]string {
	t.Helper()
	files := map[string]string{}
	root := filepath.Join("..", "placement", "testdata", "overlays")
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(p)
		rel, _ := filepath.Rel(root, p)
		files[filepath.ToSlash(rel)] = strings.ReplaceAll(string(data), "namespace: production", "namespace: "+ns)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// render is the kustomization in dir as the remote holds it, rendered in process.
func (a *adopted) render(dir string) map[placement.Key]map[string]any {
	a.e.t.Helper()
	files := map[string][]byte{}
	for p, content := range a.files {
		files[p] = []byte(content)
	}
	objects, err := placement.Build(files, dir)
	if err != nil {
		a.e.t.Fatalf("render %s: %v", dir, err)
	}
	return objects
}

// TestALiveChangeLandsInTheOverlayWhereAPersonWouldMakeIt: each change a person makes to the
// production cluster is one commit in the production overlay, where a person would have made
// it (the replicas: entry, the images: entry, the patch that sets the field, a new patch, a
// delete patch, the overlay's own document), the base and staging untouched, the overlay's
// render equal to the live objects after each; a change only the base could say is not written,
// and the destination says why.
func TestALiveChangeLandsInTheOverlayWhereAPersonWouldMakeIt(t *testing.T) {
	e := newEnv(t)
	a := overlayFixture(e)
	staging := a.render("apps/staging")
	e.startManager()
	const kust, patch = "apps/production/kustomization.yaml", "apps/production/podinfo-patch.yaml"

	a.patchAs("kubectl-scale", deployments, "podinfo", types.MergePatchType, `{"spec":{"replicas":3}}`, "scale")
	a.expect(a.nextCommit(), map[string]*string{kust: a.edit(kust, "    count: 2\n", "    count: 3\n")})
	a.rendersLive("apps/production")

	a.patchAs("kubectl-set", deployments, "podinfo", types.StrategicMergePatchType,
		`{"spec":{"template":{"spec":{"containers":[{"name":"podinfod","image":"ghcr.io/stefanprodan/podinfo:6.5.5"}]}}}}`)
	a.expect(a.nextCommit(), map[string]*string{kust: a.edit(kust, "newTag: 6.5.4 #", "newTag: 6.5.5 #")})
	a.rendersLive("apps/production")

	a.patchAs("kubectl-edit", deployments, "podinfo", types.StrategicMergePatchType,
		`{"spec":{"template":{"spec":{"containers":[{"name":"podinfod","resources":{"limits":{"memory":"1Gi"}}}]}}}}`)
	a.expect(a.nextCommit(), map[string]*string{patch: a.edit(patch, "memory: 512Mi #", "memory: 1Gi #")})
	a.rendersLive("apps/production")

	a.patchAs("kubectl-edit", deployments, "podinfo", types.StrategicMergePatchType,
		`{"spec":{"template":{"spec":{"containers":[{"name":"podinfod","env":[{"name":"PODINFO_UI_COLOR","value":"#ff0000"}]}]}}}}`)
	a.expect(a.nextCommit(), map[string]*string{patch: a.edit(patch, "# production's traffic\n",
		"# production's traffic\n          env:\n            - name: PODINFO_UI_COLOR\n              value: '#ff0000'\n")})
	a.rendersLive("apps/production")

	a.patchAs("kubectl-edit", services, "podinfo", types.MergePatchType, `{"spec":{"publishNotReadyAddresses":true}}`)
	const svcPatch = "apps/production/podinfo-service-patch.yaml"
	newPatch := "apiVersion: v1\nkind: Service\nmetadata:\n  name: podinfo\nspec:\n  publishNotReadyAddresses: true\n"
	a.expect(a.nextCommit(), map[string]*string{svcPatch: &newPatch,
		kust: a.edit(kust, "      name: redis\n", "      name: redis\n  - path: podinfo-service-patch.yaml\n")})
	a.rendersLive("apps/production")

	const cache = "apps/production/cache.yaml"
	a.patchAs("kubectl-set", deployments, "cache", types.StrategicMergePatchType,
		`{"spec":{"template":{"spec":{"containers":[{"name":"memcached","image":"memcached:1.6.22"}]}}}}`)
	a.expect(a.nextCommit(), map[string]*string{cache: a.edit(cache, "memcached:1.6.21", "memcached:1.6.22")})
	a.rendersLive("apps/production")

	if got := a.render("apps/staging"); !reflect.DeepEqual(got, staging) {
		t.Errorf("staging's render changed with production's changes")
	}
	a.expectRemote()

	var generated string
	for k := range a.render("apps/production") {
		if k.Kind == "ConfigMap" {
			generated = k.Name
		}
	}
	a.patchAs("kubectl-edit", configMaps, generated, types.MergePatchType, `{"data":{"PODINFO_UI_MESSAGE":"hi"}}`)
	a.expect(a.nextCommit(), map[string]*string{kust: a.edit(kust, "  - path: podinfo-service-patch.yaml\n",
		"  - path: podinfo-service-patch.yaml\nconfigMapGenerator:\n  - name: podinfo-config\n    behavior: merge\n    literals:\n      - PODINFO_UI_MESSAGE=hi\n")})

	a.createAs("kubectl-create", object(t, "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: feature-flags\n  namespace: "+e.ns+"\ndata:\n  beta: \"on\"\n"))
	const flags = "apps/production/feature-flags-configmap.yaml"
	flagsDoc := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: feature-flags\n  namespace: " + e.ns + "\ndata:\n  beta: \"on\"\n"
	a.expect(a.nextCommit(), map[string]*string{flags: &flagsDoc,
		kust: a.edit(kust, "  - cache.yaml\n", "  - cache.yaml\n  - feature-flags-configmap.yaml\n")})

	if err := e.resource(services, e.ns).Delete(e.ctx, "podinfo", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	const deletePatch = "apps/production/podinfo-service-delete.yaml"
	del := "apiVersion: v1\nkind: Service\nmetadata:\n  name: podinfo\n$patch: delete\n"
	a.expect(a.nextCommit(), map[string]*string{deletePatch: &del,
		kust: a.edit(kust, "  - path: podinfo-service-patch.yaml\n", "  - path: podinfo-service-patch.yaml\n  - path: podinfo-service-delete.yaml\n")})
	if _, gone := a.render("apps/production")[placement.Key{Kind: "Service", Namespace: e.ns, Name: "podinfo"}]; gone {
		t.Error("production still renders the deleted Service")
	}
	a.expectRemote()
}

// TestAChangeToWhatAHelmReleaseRenderedIsReported: an object Flux's helm-controller rendered,
// which no document holds, is not written as a new file when a person changes it: the
// destination names the release, whose values are where the change belongs.
func TestAChangeToWhatAHelmReleaseRenderedIsReported(t *testing.T) {
	e := newEnv(t)
	a := overlayFixture(e)
	e.startManager()
	redis := object(t, `apiVersion: v1
kind: ConfigMap
metadata:
  name: redis-configuration
  labels:
    app.kubernetes.io/managed-by: Helm
    helm.toolkit.fluxcd.io/name: redis
    helm.toolkit.fluxcd.io/namespace: `+e.ns+`
  annotations:
    meta.helm.sh/release-name: redis
data:
  redis.conf: "maxmemory 64mb"
`)
	a.applyAs("helm-controller", redis)
	a.patchAs("kubectl-edit", configMaps, "redis-configuration", types.MergePatchType, `{"data":{"redis.conf":"maxmemory 128mb"}}`)
	testenv.Eventually(t, time.Minute, "status.adopted names the release", func() (bool, string) {
		for _, u := range e.adoptedStatus().Unwritten {
			if strings.Contains(u, "ConfigMap "+e.ns+"/redis-configuration") && strings.Contains(u, "rendered by the HelmRelease "+e.ns+"/redis") {
				return true, ""
			}
		}
		return false, fmt.Sprintf("%q", e.adoptedStatus().Unwritten)
	})
	a.expectRemote() // nothing written
}

// TestAnOverlayWithARemoteBaseIsNeverFetched: an overlay that names a remote base is not
// rendered (nothing is fetched); a live change of its objects is not written, and the
// destination says what the overlay met.
func TestAnOverlayWithARemoteBaseIsNeverFetched(t *testing.T) {
	e := newEnv(t)
	a := overlayFixture(e)
	const kust = "apps/production/kustomization.yaml"
	remote := map[string]string{kust: strings.Replace(a.files[kust], "  - cache.yaml\n", "  - cache.yaml\n  - https://github.com/stefanprodan/podinfo//kustomize?ref=6.5.4\n", 1)}
	if _, err := gitSrv.PushCommit(e.repo, "main", testenv.Signature{Name: "Team", Email: "team@example.com"}, "a remote base", remote, nil); err != nil {
		t.Fatal(err)
	}
	maps.Copy(a.files, remote)
	a.seen++
	e.startManager()
	a.patchAs("kubectl-scale", deployments, "podinfo", types.MergePatchType, `{"spec":{"replicas":3}}`, "scale")
	testenv.Eventually(t, time.Minute, "status.adopted says the overlay names a remote base", func() (bool, string) {
		for _, u := range e.adoptedStatus().Unwritten {
			if strings.Contains(u, "Deployment.apps "+e.ns+"/podinfo") && strings.Contains(u, "a remote base or file") {
				return true, ""
			}
		}
		return false, fmt.Sprintf("%q", e.adoptedStatus().Unwritten)
	})
	a.expectRemote() // nothing written
}

// TestABaseStagingSharesIsNeverWrittenForProduction: with the destination on apps, a folder that
// holds the base staging and production share, a change to an object of production's render
// that comes from the base goes into production's overlay, and the base stays as it was.
func TestABaseStagingSharesIsNeverWrittenForProduction(t *testing.T) {
	e := newEnv(t)
	a := overlayFixtureAt(e, "apps", &crds.ExistingLayout{Kustomization: "production"})
	e.startManager()
	const kust = "apps/production/kustomization.yaml"
	a.patchAs("kubectl-edit", services, "podinfo", types.MergePatchType, `{"spec":{"publishNotReadyAddresses":true}}`)
	newPatch := "apiVersion: v1\nkind: Service\nmetadata:\n  name: podinfo\nspec:\n  publishNotReadyAddresses: true\n"
	a.expect(a.nextCommit(), map[string]*string{"apps/production/podinfo-service-patch.yaml": &newPatch,
		kust: a.edit(kust, "      name: redis\n", "      name: redis\n  - path: podinfo-service-patch.yaml\n")})
	a.rendersLive("apps/production")
	a.expectRemote()
}
