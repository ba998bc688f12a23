package sanitize

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"

	"github.com/configbutler/gitops-reverser/testenv"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/ from the live objects")

var cp *testenv.ControlPlane

func TestMain(m *testing.M) { os.Exit(testenv.RunMain(m, &cp)) }

// fixture is one object created on the apiserver from testdata/input/{name}.yaml; its sanitized
// YAML is compared with testdata/{name}.yaml.
type fixture struct {
	name string
	gvr  schema.GroupVersionResource
}

var (
	namespaces   = schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}
	crds         = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	deployments  = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}
	services     = schema.GroupVersionResource{Version: "v1", Resource: "services"}
	configMaps   = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	widgets      = schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widgets"}
	clusterRoles = schema.GroupVersionResource{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "clusterroles"}
)

// fixtures in creation order: the namespace first, everything else lives in it.
var fixtures = []fixture{
	{"namespace", namespaces},
	{"deployment", deployments},
	{"service", services},
	{"service-headless", services},
	{"configmap", configMaps},
	{"widget", widgets},
	{"clusterrole", clusterRoles},
}

// live reaches the apiserver holding the fixtures; dryRuns keeps the admission-time view of each
// object (a dry-run create, made just before the real one).
type live struct {
	client  dynamic.Interface
	dryRuns map[string]map[string]any
}

var (
	liveOnce sync.Once
	liveEnv  *live
	liveErr  error
)

// mustLive creates the CRD and every fixture once per test binary.
func mustLive(tb testing.TB) *live {
	tb.Helper()
	liveOnce.Do(func() { liveEnv, liveErr = createFixtures(context.Background()) })
	if liveErr != nil {
		tb.Fatalf("create fixtures: %v", liveErr)
	}
	return liveEnv
}

func createFixtures(ctx context.Context) (*live, error) {
	client, err := dynamic.NewForConfig(cp.AdminConfig())
	if err != nil {
		return nil, fmt.Errorf("dynamic client: %w", err)
	}
	l := &live{client: client, dryRuns: map[string]map[string]any{}}
	crd, err := readManifest("crd")
	if err != nil {
		return nil, err
	}
	if _, err := client.Resource(crds).Create(ctx, crd, metav1.CreateOptions{}); err != nil {
		return nil, fmt.Errorf("create crd: %w", err)
	}
	if err := waitEstablished(ctx, client, crd.GetName()); err != nil {
		return nil, err
	}
	for _, f := range fixtures {
		obj, err := readManifest(f.name)
		if err != nil {
			return nil, err
		}
		res := client.Resource(f.gvr).Namespace(obj.GetNamespace())
		dry, err := res.Create(ctx, obj, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err != nil {
			return nil, fmt.Errorf("dry-run create %s: %w", f.name, err)
		}
		l.dryRuns[f.name] = dry.Object
		if _, err := res.Create(ctx, obj, metav1.CreateOptions{}); err != nil {
			return nil, fmt.Errorf("create %s: %w", f.name, err)
		}
	}
	return l, nil
}

func readManifest(name string) (*unstructured.Unstructured, error) {
	b, err := os.ReadFile(filepath.Join("testdata", "input", name+".yaml"))
	if err != nil {
		return nil, err
	}
	obj := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(b, &obj.Object); err != nil {
		return nil, fmt.Errorf("parse %s: %w", name, err)
	}
	return obj, nil
}

func waitEstablished(ctx context.Context, client dynamic.Interface, name string) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		crd, err := client.Resource(crds).Get(ctx, name, metav1.GetOptions{})
		if err == nil {
			conds, _, _ := unstructured.NestedSlice(crd.Object, "status", "conditions")
			for _, c := range conds {
				if c, ok := c.(map[string]any); ok && c["type"] == "Established" && c["status"] == "True" {
					return nil
				}
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("crd %s not established: %w (last error: %v)", name, ctx.Err(), err)
		case <-tick.C:
		}
	}
}

// get reads a fixture back from the apiserver, as the watch would see it.
func (l *live) get(tb testing.TB, name string) map[string]any {
	tb.Helper()
	for _, f := range fixtures {
		if f.name != name {
			continue
		}
		manifest, err := readManifest(name)
		if err != nil {
			tb.Fatal(err)
		}
		obj, err := l.client.Resource(f.gvr).Namespace(manifest.GetNamespace()).
			Get(context.Background(), manifest.GetName(), metav1.GetOptions{})
		if err != nil {
			tb.Fatalf("get %s: %v", name, err)
		}
		return obj.Object
	}
	tb.Fatalf("no fixture %q", name)
	return nil
}

func mustYAML(tb testing.TB, obj map[string]any) []byte {
	tb.Helper()
	b, err := YAML(obj)
	if err != nil {
		tb.Fatalf("yaml: %v", err)
	}
	return b
}

func TestLiveObjectsMatchGoldenFiles(t *testing.T) {
	l := mustLive(t)
	for _, f := range fixtures {
		t.Run(f.name, func(t *testing.T) {
			got := mustYAML(t, Object(l.get(t, f.name)))
			path := filepath.Join("testdata", f.name+".yaml")
			if *update {
				if err := os.WriteFile(path, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("read golden file (run with -update to create it): %v", err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("%s differs from the live object (-want +got):\n%s", path, cmp.Diff(string(want), string(got)))
			}
			for _, field := range []string{"uid:", "resourceVersion:", "managedFields:", "creationTimestamp:",
				"generation:", "status:", "last-applied-configuration", "deployment.kubernetes.io/revision"} {
				if strings.Contains(string(got), field) {
					t.Errorf("%s still holds server-owned %q:\n%s", path, field, got)
				}
			}
		})
	}
}
