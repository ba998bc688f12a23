package placement

import (
	"errors"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// overlayFiles reads testdata/overlays, a repository of a base with a staging and a production
// overlay, as the worker gives it.
func overlayFiles(t *testing.T) map[string][]byte {
	t.Helper()
	root := filepath.Join("testdata", "overlays")
	files := map[string][]byte{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(p)
		rel, _ := filepath.Rel(root, p)
		files[filepath.ToSlash(rel)] = data
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

type mapTree map[string][]byte

func (m mapTree) File(p string) ([]byte, bool) { d, ok := m[p]; return d, ok }
func (m mapTree) IsDir(p string) bool {
	for q := range m {
		if strings.HasPrefix(q, p+"/") {
			return true
		}
	}
	return false
}

func productionOverlay(t *testing.T) *Overlay {
	t.Helper()
	o, err := RenderOverlay(FilesOf(mapTree(overlayFiles(t)), "apps/production"), "apps/production")
	if err != nil {
		t.Fatal(err)
	}
	return o
}

func underProduction(p string) bool { return strings.HasPrefix(p, "apps/production/") }

var podinfo = Key{Group: "apps", Kind: "Deployment", Namespace: "production", Name: "podinfo"}

// landed lands ops on k, checks the render, and returns each file it wrote as the lines that
// differ from the file before: "-old" and "+new", in order.
func landed(t *testing.T, o *Overlay, k Key, ops ...Op) map[string][]string {
	t.Helper()
	edits, _, err := o.Place(k, ops, underProduction)
	if err != nil {
		t.Fatalf("place: %v", err)
	}
	out := map[string][]string{}
	for _, e := range edits {
		out[e.Path] = lineDiff(string(o.Files[e.Path]), string(e.Data))
	}
	return out
}

func expectEdits(t *testing.T, got map[string][]string, want map[string][]string) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("files written: %v, want %v", slices.Sorted(maps.Keys(got)), slices.Sorted(maps.Keys(want)))
	}
	for p, lines := range want {
		if !slices.Equal(got[p], lines) {
			t.Errorf("%s:\n%q\nwant\n%q", p, got[p], lines)
		}
	}
}

var image = Path{{Field: "spec"}, {Field: "template"}, {Field: "spec"}, {Field: "containers"}, {Match: "name", Value: "podinfod"}, {Field: "image"}}

func TestAnImageLandsInTheOverlaysImagesEntry(t *testing.T) {
	got := landed(t, productionOverlay(t), podinfo, Op{Path: image, Value: "ghcr.io/stefanprodan/podinfo:6.5.5"})
	expectEdits(t, got, map[string][]string{"apps/production/kustomization.yaml": {
		"-12:    newTag: 6.5.4 # bump with care: see the runbook",
		"+12:    newTag: 6.5.5 # bump with care: see the runbook",
	}})
}

func TestANewImageNameAndDigestLandInTheEntry(t *testing.T) {
	got := landed(t, productionOverlay(t), podinfo, Op{Path: image, Value: "registry.example/podinfo@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"})
	expectEdits(t, got, map[string][]string{"apps/production/kustomization.yaml": {
		"-12:    newTag: 6.5.4 # bump with care: see the runbook",
		"+12:    newName: registry.example/podinfo",
		"+13:    digest: sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
	}})
}

func TestReplicasLandInTheOverlaysReplicasEntry(t *testing.T) {
	got := landed(t, productionOverlay(t), podinfo, Op{Path: Path{{Field: "spec"}, {Field: "replicas"}}, Value: int64(5)})
	expectEdits(t, got, map[string][]string{"apps/production/kustomization.yaml": {
		"-15:    count: 2",
		"+15:    count: 5",
	}})
}

func TestAFieldAPatchSetsLandsInThatPatch(t *testing.T) {
	memory := Path{{Field: "spec"}, {Field: "template"}, {Field: "spec"}, {Field: "containers"}, {Match: "name", Value: "podinfod"},
		{Field: "resources"}, {Field: "limits"}, {Field: "memory"}}
	got := landed(t, productionOverlay(t), podinfo, Op{Path: memory, Value: "1Gi"})
	expectEdits(t, got, map[string][]string{"apps/production/podinfo-patch.yaml": {
		"-12:              memory: 512Mi # production's traffic",
		"+12:              memory: 1Gi # production's traffic",
	}})
}

func TestAnotherFieldOfABaseObjectLandsInItsPatch(t *testing.T) {
	color := Path{{Field: "spec"}, {Field: "template"}, {Field: "spec"}, {Field: "containers"}, {Match: "name", Value: "podinfod"},
		{Field: "env"}, {Match: "name", Value: "PODINFO_UI_COLOR"}, {Field: "value"}}
	got := landed(t, productionOverlay(t), podinfo, Op{Path: color, Value: "#ff0000"})
	expectEdits(t, got, map[string][]string{"apps/production/podinfo-patch.yaml": {
		"+13:          env:",
		"+14:            - name: PODINFO_UI_COLOR",
		"+15:              value: '#ff0000'",
	}})
}

func TestAFieldOfABaseObjectWithoutAPatchGetsANewPatchFile(t *testing.T) {
	svc := Key{Kind: "Service", Namespace: "production", Name: "podinfo"}
	got := landed(t, productionOverlay(t), svc, Op{Path: Path{{Field: "spec"}, {Field: "type"}}, Value: "NodePort"})
	expectEdits(t, got, map[string][]string{
		"apps/production/kustomization.yaml": {
			"+22:  - path: podinfo-service-patch.yaml",
		},
		"apps/production/podinfo-service-patch.yaml": {
			"+1:apiVersion: v1", "+2:kind: Service", "+3:metadata:", "+4:  name: podinfo", "+5:spec:", "+6:  type: NodePort",
		},
	})
}

func TestAnObjectOnlyTheOverlayDeclaresIsEditedInPlace(t *testing.T) {
	cache := Key{Group: "apps", Kind: "Deployment", Namespace: "production", Name: "cache"}
	memcached := Path{{Field: "spec"}, {Field: "template"}, {Field: "spec"}, {Field: "containers"}, {Match: "name", Value: "memcached"}, {Field: "image"}}
	got := landed(t, productionOverlay(t), cache, Op{Path: memcached, Value: "memcached:1.6.22"})
	expectEdits(t, got, map[string][]string{"apps/production/cache.yaml": {
		"-16:          image: memcached:1.6.21",
		"+16:          image: memcached:1.6.22",
	}})
}

func TestAGeneratedConfigMapOfABaseGetsAMergeGeneratorInTheOverlay(t *testing.T) {
	o := productionOverlay(t)
	var cm Key
	for k := range o.Objects {
		if k.Kind == "ConfigMap" {
			cm = k
		}
	}
	got := landed(t, o, cm, Op{Path: Path{{Field: "data"}, {Field: "PODINFO_UI_MESSAGE"}}, Value: "hi"})
	expectEdits(t, got, map[string][]string{"apps/production/kustomization.yaml": {
		"+22:configMapGenerator:", "+23:  - name: podinfo-config", "+24:    behavior: merge", "+25:    literals:", "+26:      - PODINFO_UI_MESSAGE=hi",
	}})
	_, err := o.Land(cm, []Op{{Path: Path{{Field: "data"}, {Field: "PODINFO_UI_MESSAGE"}}, Remove: true}}, underProduction)
	if !errors.Is(err, ErrNotExpressible) {
		t.Fatalf("removing a key of a base's generator: err = %v, want ErrNotExpressible", err)
	}
}

func TestADeletedBaseObjectGetsADeletePatch(t *testing.T) {
	o := productionOverlay(t)
	svc := Key{Kind: "Service", Namespace: "production", Name: "podinfo"}
	edits, err := o.Remove(svc, underProduction)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := o.CheckGone(svc, edits); err != nil {
		t.Fatal(err)
	}
	got := map[string][]string{}
	for _, e := range edits {
		got[e.Path] = lineDiff(string(o.Files[e.Path]), string(e.Data))
	}
	expectEdits(t, got, map[string][]string{
		"apps/production/kustomization.yaml": {"+22:  - path: podinfo-service-delete.yaml"},
		"apps/production/podinfo-service-delete.yaml": {
			"+1:apiVersion: v1", "+2:kind: Service", "+3:metadata:", "+4:  name: podinfo", "+5:$patch: delete",
		},
	})
}

// overlayWith is production's overlay with files replaced or added.
func overlayWith(t *testing.T, changed map[string]string) *Overlay {
	t.Helper()
	files := overlayFiles(t)
	for p, s := range changed {
		files[p] = []byte(s)
	}
	o, err := RenderOverlay(FilesOf(mapTree(files), "apps/production"), "apps/production")
	if err != nil {
		t.Fatal(err)
	}
	return o
}

func TestAFieldAJSONPatchSetsLandsInThatOp(t *testing.T) {
	kust := string(overlayFiles(t)["apps/production/kustomization.yaml"]) +
		"  - path: cache-replicas.yaml\n    target: {group: apps, version: v1, kind: Deployment, name: cache}\n"
	o := overlayWith(t, map[string]string{"apps/production/kustomization.yaml": kust,
		"apps/production/cache-replicas.yaml": "- op: replace\n  path: /spec/replicas\n  value: 2 # two for production\n"})
	cache := Key{Group: "apps", Kind: "Deployment", Namespace: "production", Name: "cache"}
	got := landed(t, o, cache, Op{Path: Path{{Field: "spec"}, {Field: "replicas"}}, Value: int64(4)})
	expectEdits(t, got, map[string][]string{"apps/production/cache-replicas.yaml": {
		"-3:  value: 2 # two for production", "+3:  value: 4 # two for production",
	}})
}

func TestAnInlinePatchIsTracedAndNotEdited(t *testing.T) {
	kust := string(overlayFiles(t)["apps/production/kustomization.yaml"]) +
		"  - patch: |-\n      - op: replace\n        path: /spec/replicas\n        value: 2\n    target: {kind: Deployment, name: cache}\n"
	o := overlayWith(t, map[string]string{"apps/production/kustomization.yaml": kust})
	cache := Key{Group: "apps", Kind: "Deployment", Namespace: "production", Name: "cache"}
	_, err := o.Land(cache, []Op{{Path: Path{{Field: "spec"}, {Field: "replicas"}}, Value: int64(4)}}, underProduction)
	if !errors.Is(err, ErrNotExpressible) || !strings.Contains(err.Error(), "inline patch") {
		t.Fatalf("err = %v, want an inline patch, not expressible", err)
	}
}

// A base inside the destination's folder that another overlay renders too is never written:
// the change goes into the overlay.
func TestABaseAnotherOverlaySharesIsNotWritten(t *testing.T) {
	o := productionOverlay(t)
	underApps := func(p string) bool { return strings.HasPrefix(p, "apps/") && !strings.HasPrefix(p, "apps/base/") }
	svc := Key{Kind: "Service", Namespace: "production", Name: "podinfo"}
	edits, err := o.Land(svc, []Op{{Path: Path{{Field: "spec"}, {Field: "type"}}, Value: "NodePort"}}, underApps)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range edits {
		if strings.HasPrefix(e.Path, "apps/base/") {
			t.Errorf("wrote the shared base file %s", e.Path)
		}
	}
}

func TestAnOverlayWithARemoteBaseIsNeverRendered(t *testing.T) {
	files := overlayFiles(t)
	files["apps/production/kustomization.yaml"] = []byte("resources:\n  - https://github.com/stefanprodan/podinfo//kustomize?ref=6.5.4\n")
	_, err := RenderOverlay(files, "apps/production")
	if !errors.Is(err, ErrRemote) {
		t.Fatalf("err = %v, want ErrRemote", err)
	}
	files["apps/production/kustomization.yaml"] = []byte("helmCharts:\n  - name: podinfo\n    repo: https://stefanprodan.github.io/podinfo\n")
	if _, err = RenderOverlay(files, "apps/production"); !errors.Is(err, ErrHelm) {
		t.Fatalf("err = %v, want ErrHelm", err)
	}
}

// An image the overlay's images: entry sets for two objects is changed for the one a person
// changed only: a new image name goes into its own patch (the entry, which would change the
// other too, does not match the new name); a new tag, which the entry would put back over any
// patch, is not written, and the reason names the other object.
func TestAnImageOthersShareLandsInTheObjectsPatch(t *testing.T) {
	cache := string(overlayFiles(t)["apps/production/cache.yaml"])
	o := overlayWith(t, map[string]string{"apps/production/cache.yaml": strings.Replace(cache,
		"- name: memcached\n          image: memcached:1.6.21", "- name: memcached\n          image: ghcr.io/stefanprodan/podinfo:6.5.0", 1)})
	got := landed(t, o, podinfo, Op{Path: image, Value: "registry.example/podinfo:6.5.5"})
	expectEdits(t, got, map[string][]string{"apps/production/podinfo-patch.yaml": {
		"+13:          image: registry.example/podinfo:6.5.5",
	}})
	_, _, err := o.Place(podinfo, []Op{{Path: image, Value: "ghcr.io/stefanprodan/podinfo:6.5.5"}}, underProduction)
	if err == nil || !strings.Contains(err.Error(), "also change Deployment.apps production/cache") {
		t.Fatalf("a new tag of a shared images: entry: err = %v, want it refused naming the cache", err)
	}
}

// With a namePrefix, an object is found, and named in a new patch and in replicas:, by the name
// its document writes: what kustomize matches them by.
func TestANamePrefixIsTracedToTheDocumentsName(t *testing.T) {
	kust := strings.Replace(string(overlayFiles(t)["apps/production/kustomization.yaml"]), "namespace: production\n", "namespace: production\nnamePrefix: prod-\n", 1)
	kust = strings.Replace(kust, "replicas:\n  - name: podinfo\n    count: 2\n", "", 1)
	o := overlayWith(t, map[string]string{"apps/production/kustomization.yaml": kust})
	deploy := Key{Group: "apps", Kind: "Deployment", Namespace: "production", Name: "prod-podinfo"}
	got := landed(t, o, deploy, Op{Path: Path{{Field: "spec"}, {Field: "replicas"}}, Value: int64(3)})
	expectEdits(t, got, map[string][]string{"apps/production/kustomization.yaml": {
		"+20:replicas:", "+21:  - name: podinfo", "+22:    count: 3",
	}})
	svc := Key{Kind: "Service", Namespace: "production", Name: "prod-podinfo"}
	got = landed(t, o, svc, Op{Path: Path{{Field: "spec"}, {Field: "type"}}, Value: "NodePort"})
	if !slices.Contains(got["apps/production/podinfo-service-patch.yaml"], "+4:  name: podinfo") {
		t.Errorf("the new patch names the Service %q, want podinfo", got["apps/production/podinfo-service-patch.yaml"])
	}
}

// A base only this overlay renders, inside the destination's folder, is the object's own
// document: a field there is edited in place, but an image an images: entry decides still lands
// in that entry.
func TestABaseOnlyThisOverlayRendersIsEditedButItsImagesEntryDecides(t *testing.T) {
	o := productionOverlay(t)
	underApps := func(p string) bool { return strings.HasPrefix(p, "apps/") }
	edits, _, err := o.Place(podinfo, []Op{{Path: image, Value: "ghcr.io/stefanprodan/podinfo:6.5.5"}}, underApps)
	if err != nil {
		t.Fatal(err)
	}
	if len(edits) != 1 || edits[0].Path != "apps/production/kustomization.yaml" {
		t.Errorf("the image went to %v, want the overlay's images: entry", edits)
	}
	svc := Key{Kind: "Service", Namespace: "production", Name: "podinfo"}
	edits, _, err = o.Place(svc, []Op{{Path: Path{{Field: "spec"}, {Field: "type"}}, Value: "NodePort"}}, underApps)
	if err != nil {
		t.Fatal(err)
	}
	if got := lineDiff(string(o.Files["apps/base/podinfo/service.yaml"]), string(edits[0].Data)); len(edits) != 1 ||
		!slices.Equal(got, []string{"+12:  type: NodePort"}) {
		t.Errorf("the Service's type: %v %q, want its own document, that one line", edits[0].Path, got)
	}
}

// The trace names the file or generator each object of production's render comes from.
func TestTheTraceNamesWhereEachObjectComesFrom(t *testing.T) {
	o := productionOverlay(t)
	got := map[string]Origin{}
	for k, origin := range o.Origins {
		got[k.Kind+"/"+hashStem(k.Name)] = origin
	}
	want := map[string]Origin{
		"Deployment/podinfo":       {Path: "apps/base/podinfo/deployment.yaml"},
		"Service/podinfo":          {Path: "apps/base/podinfo/service.yaml"},
		"HelmRelease/redis":        {Path: "apps/base/podinfo/release.yaml"},
		"Deployment/cache":         {Path: "apps/production/cache.yaml"},
		"ConfigMap/podinfo-config": {Generator: "ConfigMapGenerator", ConfiguredIn: "apps/base/podinfo/kustomization.yaml"},
	}
	if !maps.Equal(got, want) {
		t.Errorf("origins %v, want %v", got, want)
	}
}

// A label the overlay gives every object is the overlay's: a person's other value of it on one
// object cannot be said in a patch (the overlay's labels win over it), and is never written into
// the base.
func TestALabelTheOverlayAddsIsNotWrittenAnywhere(t *testing.T) {
	o := productionOverlay(t)
	env := Path{{Field: "metadata"}, {Field: "labels"}, {Field: "env"}}
	edits, _, err := o.Place(podinfo, []Op{{Path: env, Value: "hotfix"}}, underProduction)
	if err == nil || !strings.Contains(err.Error(), "metadata.labels.env") {
		t.Fatalf("edits %v, err %v: want the change refused, naming the label", edits, err)
	}
}

// A HelmRelease is a document like any other: a change of its values lands in the overlay's
// patch that sets them.
func TestAHelmReleasesValuesLandInThePatchThatSetsThem(t *testing.T) {
	redis := Key{Group: "helm.toolkit.fluxcd.io", Kind: "HelmRelease", Namespace: "production", Name: "redis"}
	architecture := Path{{Field: "spec"}, {Field: "values"}, {Field: "architecture"}}
	got := landed(t, productionOverlay(t), redis, Op{Path: architecture, Value: "standalone"})
	expectEdits(t, got, map[string][]string{"apps/production/redis-values.yaml": {
		"-7:    architecture: replication", "+7:    architecture: standalone",
	}})
}

func TestAnImageWithoutAnEntryGetsANewImagesEntry(t *testing.T) {
	kust := strings.Replace(string(overlayFiles(t)["apps/production/kustomization.yaml"]),
		"images:\n  - name: ghcr.io/stefanprodan/podinfo\n    newTag: 6.5.4 # bump with care: see the runbook\n", "", 1)
	o := overlayWith(t, map[string]string{"apps/production/kustomization.yaml": kust})
	got := landed(t, o, podinfo, Op{Path: image, Value: "ghcr.io/stefanprodan/podinfo:6.5.5"})
	expectEdits(t, got, map[string][]string{"apps/production/kustomization.yaml": {
		"+19:images:", "+20:  - name: ghcr.io/stefanprodan/podinfo", "+21:    newTag: 6.5.5",
	}})
}

// The data of a ConfigMap the overlay generates lands in its generator: a literal in place, and
// a key read from a file in that file.
func TestAGeneratedConfigMapsDataLandsInItsGenerator(t *testing.T) {
	kust := string(overlayFiles(t)["apps/production/kustomization.yaml"]) +
		"configMapGenerator:\n  - name: limits\n    literals:\n      - MAX_CONNS=100 # per pod\n    files:\n      - banner.txt\n"
	o := overlayWith(t, map[string]string{"apps/production/kustomization.yaml": kust, "apps/production/banner.txt": "Welcome\n"})
	var limits Key
	for k := range o.Objects {
		if k.Kind == "ConfigMap" && strings.HasPrefix(k.Name, "limits-") {
			limits = k
		}
	}
	got := landed(t, o, limits,
		Op{Path: Path{{Field: "data"}, {Field: "MAX_CONNS"}}, Value: "200"},
		Op{Path: Path{{Field: "data"}, {Field: "banner.txt"}}, Value: "Maintenance at noon\n"})
	expectEdits(t, got, map[string][]string{
		"apps/production/kustomization.yaml": {"-25:      - MAX_CONNS=100 # per pod", "+25:      - MAX_CONNS=200 # per pod"},
		"apps/production/banner.txt":         {"-1:Welcome", "+1:Maintenance at noon"},
	})
}
