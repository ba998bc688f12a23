package daemon

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"sigs.k8s.io/yaml"

	"github.com/configbutler/gitops-reverser/crds"
	"github.com/configbutler/gitops-reverser/layout"
	"github.com/configbutler/gitops-reverser/sanitize"
	"github.com/configbutler/gitops-reverser/testenv"
	"github.com/configbutler/gitops-reverser/writeback"
)

// restoredObject is one object of the round trip, where it lives.
type restoredObject struct {
	gvr       schema.GroupVersionResource
	namespace string
	name      string
}

// TestRestoreRecreatesTheMirroredCluster is the round trip: a varied cluster (a CRD and its
// custom resources, workloads, RBAC, networking, quotas, a claim, a Job, ConfigMaps with control
// characters and binary data, a SOPS-encrypted Secret, a namespace whose name starts with a digit,
// and ConfigMaps and custom resources of generated values: every class of character, the int64
// edges, floats, empty strings and nulls, YAML 1.1 keys; createGenerated) is mirrored by one
// ClusterWatchRule; each generated file reads back as the live object it was written from, then `gitops-reverser restore` recreates the folder in a
// second control plane from the repository. Every object is equal on both sides apart from what
// the server assigns; a second restore changes nothing; a restore as of an older commit brings
// that commit's objects back; and a person who may write only one namespace is refused for the
// rest, which is listed, while her namespace restores.
func TestRestoreRecreatesTheMirroredCluster(t *testing.T) {
	cp := planes.Lend(t)
	ctx := context.Background()
	ns := "backup-config"
	srv, _ := mirrorSetup(t, ns)
	dyn := dynamic.NewForConfigOrDie(cp.AdminConfig())
	identity := newAgeIdentity(t)
	createAs(t, dyn, crds.GitDestinations, &crds.GitDestination{ObjectMeta: metav1.ObjectMeta{Name: "all", Namespace: ns},
		Spec: crds.GitDestinationSpec{RepoRef: crds.NamespacedReference{Name: "repo"}, Branch: "main", BaseFolder: "cluster",
			Encryption: &crds.Encryption{Provider: crds.EncryptionSOPS, Age: &crds.AgeRecipients{Recipients: []string{identity.Recipient().String()}}}}})
	createAs(t, dyn, crds.ClusterWatchRules, &crds.ClusterWatchRule{ObjectMeta: metav1.ObjectMeta{Name: "everything"},
		Spec: crds.ClusterWatchRuleSpec{DestinationRef: crds.NamespacedReference{Name: "all", Namespace: ns}, Rules: []crds.ClusterResourceRule{
			{Scope: crds.ScopeCluster}, {Scope: crds.ScopeNamespaced}, {Scope: crds.ScopeNamespaced, ResourceRule: crds.ResourceRule{Resources: []string{"secrets"}}}}}})
	t.Cleanup(func() {
		_ = dyn.Resource(crds.ClusterWatchRules).Delete(context.Background(), "everything", metav1.DeleteOptions{})
	})
	source := createFromFile(t, cp.AdminConfig(), "testdata/restore/cluster.yaml")
	generated := createGenerated(t, dyn, roundTripSeed)
	source = append(source, generated...)
	startDaemon(t, t.TempDir())
	testenv.Eventually(t, 60*time.Second, "every object mirrored", func() (bool, string) {
		files, err := srv.FileHashes("state", "main")
		if err != nil {
			return false, err.Error()
		}
		for _, o := range source {
			if _, ok := files[layout.Path("cluster", o.gvr.Group, o.gvr.Resource, o.namespace, o.name)]; !ok {
				return false, "missing " + o.gvr.Resource + " " + o.namespace + "/" + o.name
			}
		}
		return true, ""
	})

	// The mirror's own round trip: each generated file, read as write-back reads it, is the live
	// object it was written from.
	for _, o := range generated {
		file, err := srv.ReadFile("state", "main", layout.Path("cluster", o.gvr.Group, o.gvr.Resource, o.namespace, o.name))
		if err != nil {
			t.Fatal(err)
		}
		doc, err := writeback.ParseDocument(file)
		if err != nil {
			t.Errorf("seed %d: %s %s: the mirror's file does not read back: %v\n%s", roundTripSeed, o.gvr.Resource, o.name, err, file)
			continue
		}
		live, err := dyn.Resource(o.gvr).Namespace(o.namespace).Get(ctx, o.name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if want := sanitize.Object(live.Object); !reflect.DeepEqual(doc.Object.Object, want) {
			t.Errorf("seed %d: %s %s: the file reads back otherwise than the live object: %s\n%s", roundTripSeed, o.gvr.Resource, o.name,
				cmp.Diff(want, doc.Object.Object), file)
		}
	}

	target, err := testenv.Start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(target.Stop)
	admin := filepath.Join(t.TempDir(), "kubeconfig")
	if err := target.WriteKubeconfig(admin); err != nil {
		t.Fatal(err)
	}
	restoreArgs := []string{"restore", "--kubeconfig", admin, "--repo", srv.AuthURL("state"), "--branch", "main", "--path", "cluster"}
	key := "SOPS_AGE_KEY=" + identity.String()
	targetDyn := dynamic.NewForConfigOrDie(target.AdminConfig())

	// A dry run says what would be created, and stores nothing.
	out, code := runRestore(t, key, append(restoreArgs, "--dry-run")...)
	if code != 0 || summaryCount(out, "FAILED") != 0 {
		t.Fatalf("dry run exited %d:\n%s", code, out)
	}
	for _, want := range []string{"deployment/web in apps would be created", "widget/gear in apps would be created (its CRD is in the folder"} {
		if !strings.Contains(out, want) {
			t.Errorf("the dry run does not say %q:\n%s", want, out)
		}
	}
	if _, err := targetDyn.Resource(schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}).Get(ctx, "apps", metav1.GetOptions{}); err == nil {
		t.Errorf("the dry run created namespace apps")
	}

	out, code = runRestore(t, key, restoreArgs...)
	if code != 0 {
		t.Fatalf("restore exited %d:\n%s", code, out)
	}
	t.Logf("first restore:\n%s", out)
	for _, want := range []string{"gitops-reverser's own configuration", "made and kept by the apiserver"} {
		if !strings.Contains(out, want) {
			t.Errorf("the summary does not say it left out %q:\n%s", want, out)
		}
	}
	equal := 0
	for _, o := range source {
		if compareObjects(t, dyn, targetDyn, o) {
			equal++
		} else if slices.Contains(generated, o) {
			t.Errorf("the object above was generated with seed %d (roundTripSeed)", roundTripSeed)
		}
	}
	t.Logf("round trip: %d files, %d created, %d left out, %d skipped, %d failed; of the %d objects made, %d equal, %d differ",
		summaryCount(out, "TOTAL"), summaryCount(out, "CREATED"), summaryCount(out, "LEFT_OUT"), summaryCount(out, "SKIPPED"),
		summaryCount(out, "FAILED"), len(source), equal, len(source)-equal)

	// Run twice, a restore changes nothing.
	before := resourceVersions(t, targetDyn, source)
	out, code = runRestore(t, key, restoreArgs...)
	if code != 0 {
		t.Fatalf("second restore exited %d:\n%s", code, out)
	}
	if !strings.Contains(out, "\nTOTAL") || summaryCount(out, "CREATED") != 0 || summaryCount(out, "CHANGED") != 0 {
		t.Errorf("the second restore created or changed objects:\n%s", out)
	}
	if after := resourceVersions(t, targetDyn, source); !reflect.DeepEqual(before, after) {
		t.Errorf("the second restore wrote objects: resourceVersions before %v, after %v\n%s", before, after, out)
	}

	// As of an older commit: the ConfigMap as it was then.
	older, err := srv.BranchTip("state", "main")
	if err != nil {
		t.Fatal(err)
	}
	settings := schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	if _, err := dyn.Resource(settings).Namespace("7-digits").Patch(ctx, "settings", "application/merge-patch+json",
		[]byte(`{"data":{"level":"trace"}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	file := layout.Path("cluster", "", "configmaps", "7-digits", "settings")
	testenv.Eventually(t, 30*time.Second, "the change mirrored", func() (bool, string) {
		b, err := srv.ReadFile("state", "main", file)
		return err == nil && bytes.Contains(b, []byte("trace")), string(b)
	})
	if out, code := runRestore(t, key, restoreArgs...); code != 0 {
		t.Fatalf("restore of the newest exited %d:\n%s", code, out)
	}
	if got := configMapValue(t, targetDyn, "7-digits", "settings", "level"); got != "trace" {
		t.Fatalf("after restoring the newest commit, level = %q, want trace", got)
	}
	if out, code := runRestore(t, key, append(restoreArgs, "--at", older)...); code != 0 {
		t.Fatalf("restore --at %s exited %d:\n%s", older, code, out)
	}
	if got := configMapValue(t, targetDyn, "7-digits", "settings", "level"); got != "debug" {
		t.Errorf("after restoring as of %.12s, level = %q, want debug (that commit's)", older, got)
	}

	// A person who may write only the apps namespace: refused for the rest, said so; apps restores.
	targetKube := kubernetes.NewForConfigOrDie(target.AdminConfig())
	grantRole(t, targetKube, target, "apps", "alice-all",
		rbacv1.PolicyRule{APIGroups: []string{"*"}, Resources: []string{"*"}, Verbs: []string{"*"}}, "secrets", "alice")
	if _, err := targetDyn.Resource(settings).Namespace("apps").Patch(ctx, "tricky", "application/merge-patch+json",
		[]byte(`{"data":{"empty":"drifted"}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	aliceConfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := target.WriteUserKubeconfig(aliceConfig, "alice", ""); err != nil {
		t.Fatal(err)
	}
	aliceArgs := append([]string{"restore", "--kubeconfig", aliceConfig}, restoreArgs[3:]...)
	out, code = runRestore(t, key, aliceArgs...)
	if code != 1 {
		t.Errorf("a restore with refusals exited %d, want 1:\n%s", code, out)
	}
	if !strings.Contains(out, "configmap/settings in 7-digits failed: read: error from server (Forbidden)") {
		t.Errorf("the refusal for namespace 7-digits is not listed:\n%s", out)
	}
	if got := configMapValue(t, targetDyn, "apps", "tricky", "empty"); got != "" {
		t.Errorf("alice's namespace was not restored: data.empty = %q", got)
	}
}

// roundTripSeed seeds the values createGenerated draws: change it to try others, set it to the
// seed a failure printed to replay that failure.
const roundTripSeed = 57

// createGenerated creates, in namespace apps, ConfigMaps and Widgets holding values a live object
// may hold and YAML gets wrong most often: every class of testenv.EdgeStrings, the integers of
// testenv.EdgeIntegers, and random ones of testenv.RandomValue drawn from seed.
func createGenerated(t *testing.T, dyn dynamic.Interface, seed uint64) []restoredObject {
	t.Helper()
	r := rand.New(rand.NewPCG(seed, seed))
	cmGVR := schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	widgets := schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widgets"}
	configKeys := []string{"on", "no", "y", "Yes", "OFF", "1", "null", "a.b", "-x", "_y"}
	var objs []*unstructured.Unstructured
	edges, ints := map[string]any{}, map[string]any{}
	for class, s := range testenv.EdgeStrings {
		edges[class] = s
	}
	for name, n := range testenv.EdgeIntegers {
		ints[strings.NewReplacer("^", "pow").Replace(name)] = n
	}
	objs = append(objs, object("v1", "ConfigMap", "edges", map[string]any{"data": edges}),
		object("example.com/v1", "Widget", "edges", map[string]any{"spec": map[string]any{"ints": ints, "strings": edges}}))
	for i := range 8 {
		data := map[string]any{}
		for range 1 + r.IntN(6) {
			data[configKeys[r.IntN(len(configKeys))]] = testenv.RandomString(r, 60)
		}
		spec := map[string]any{}
		for range 1 + r.IntN(6) {
			spec[testenv.RandomKey(r)] = testenv.RandomValue(r, 3)
		}
		objs = append(objs, object("v1", "ConfigMap", fmt.Sprintf("generated-%d", i), map[string]any{"data": data}),
			object("example.com/v1", "Widget", fmt.Sprintf("generated-%d", i), map[string]any{"spec": spec}))
	}
	var out []restoredObject
	for _, u := range objs {
		gvr := cmGVR
		if u.GetKind() == "Widget" {
			gvr = widgets
		}
		if _, err := dyn.Resource(gvr).Namespace("apps").Create(context.Background(), u, metav1.CreateOptions{}); err != nil {
			t.Fatalf("seed %d: create %s %s: %v", seed, u.GetKind(), u.GetName(), err)
		}
		out = append(out, restoredObject{gvr, "apps", u.GetName()})
	}
	return out
}

// object is an object of namespace apps with the top-level fields of rest.
func object(apiVersion, kind, name string, rest map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: rest}
	u.SetAPIVersion(apiVersion)
	u.SetKind(kind)
	u.SetName(name)
	u.SetNamespace("apps")
	return u
}

// summaryCount reads the TOTAL row of a restore's summary table in the column named column
// (LEFT_OUT for LEFT OUT, WOULD_BE_CREATED for WOULD BE CREATED); column TOTAL is the row's sum;
// -1 when the table has no such column.
func summaryCount(out, column string) int {
	var head []string
	for _, line := range strings.Split(out, "\n") {
		fields := strings.Fields(strings.NewReplacer("LEFT OUT", "LEFT_OUT", "WOULD BE ", "WOULD_BE_").Replace(line))
		if column == "TOTAL" && len(fields) > 1 && fields[0] == "TOTAL" {
			sum := 0
			for _, f := range fields[1:] {
				n := 0
				_, _ = fmt.Sscan(f, &n)
				sum += n
			}
			return sum
		}
		switch {
		case len(fields) > 0 && fields[0] == "KIND":
			head = fields
		case len(fields) > 0 && fields[0] == "TOTAL" && len(head) > 0:
			for i, h := range head {
				if h == column && i < len(fields) {
					n := 0
					_, _ = fmt.Sscan(fields[i], &n)
					return n
				}
			}
		}
	}
	return -1
}

// runRestore runs the daemon binary's restore command with env added, and returns its output and
// exit code.
func runRestore(t *testing.T, env string, args ...string) (string, int) {
	t.Helper()
	cmd := exec.Command(daemonBin, args...)
	cmd.Env = append(os.Environ(), env, "HOME="+t.TempDir())
	out, err := cmd.CombinedOutput()
	if err != nil {
		if exit, ok := err.(*exec.ExitError); ok {
			return string(out), exit.ExitCode()
		}
		t.Fatalf("run restore: %v", err)
	}
	return string(out), 0
}

// createFromFile creates the objects of a multi-document YAML file as the admin, the CRDs first
// and waited for, and returns them.
func createFromFile(t *testing.T, cfg *rest.Config, path string) []restoredObject {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	dyn := dynamic.NewForConfigOrDie(cfg)
	var objs []restoredObject
	mapper := mapperOf(t, cfg)
	for _, doc := range strings.Split(string(data), "\n---\n") {
		var u unstructured.Unstructured
		if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
			t.Fatal(err)
		}
		gvk := u.GroupVersionKind()
		var gvr schema.GroupVersionResource
		testenv.Eventually(t, 30*time.Second, "the kind "+gvk.Kind+" served", func() (bool, string) {
			mapping, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
			if err != nil {
				mapper.Reset()
				return false, err.Error()
			}
			gvr = mapping.Resource
			return true, ""
		})
		if _, err := dyn.Resource(gvr).Namespace(u.GetNamespace()).Create(context.Background(), &u, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create %s %s: %v", gvk.Kind, u.GetName(), err)
		}
		if gvk.Kind != "CustomResourceDefinition" {
			objs = append(objs, restoredObject{gvr, u.GetNamespace(), u.GetName()})
		}
	}
	return objs
}

func mapperOf(t *testing.T, cfg *rest.Config) *restmapper.DeferredDiscoveryRESTMapper {
	t.Helper()
	disco, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(disco))
}

// compareObjects fails when o differs between the two clusters apart from what the server
// assigns (sanitize.Object drops it, as the mirror does), and says whether they are equal.
func compareObjects(t *testing.T, from, to dynamic.Interface, o restoredObject) bool {
	t.Helper()
	ctx := context.Background()
	a, err := from.Resource(o.gvr).Namespace(o.namespace).Get(ctx, o.name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := to.Resource(o.gvr).Namespace(o.namespace).Get(ctx, o.name, metav1.GetOptions{})
	if err != nil {
		t.Errorf("%s %s/%s was not restored: %v", o.gvr.Resource, o.namespace, o.name, err)
		return false
	}
	want, _ := sanitize.YAML(sanitize.Object(a.Object))
	got, _ := sanitize.YAML(sanitize.Object(b.Object))
	if !bytes.Equal(want, got) {
		t.Errorf("%s %s/%s differs after restore:\nsource:\n%s\nrestored:\n%s", o.gvr.Resource, o.namespace, o.name, want, got)
		return false
	}
	return true
}

func resourceVersions(t *testing.T, dyn dynamic.Interface, objs []restoredObject) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, o := range objs {
		u, err := dyn.Resource(o.gvr).Namespace(o.namespace).Get(context.Background(), o.name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		out[fmt.Sprintf("%s %s/%s", o.gvr.Resource, o.namespace, o.name)] = u.GetResourceVersion()
	}
	return out
}

func configMapValue(t *testing.T, dyn dynamic.Interface, ns, name, key string) string {
	t.Helper()
	u, err := dyn.Resource(schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}).Namespace(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	v, _, _ := unstructured.NestedString(u.Object, "data", key)
	return v
}
