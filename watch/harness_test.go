package watch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/configbutler/gitops-reverser/crds"
	"github.com/configbutler/gitops-reverser/gitops"
	"github.com/configbutler/gitops-reverser/gitsecrets"
	"github.com/configbutler/gitops-reverser/metrics"
	"github.com/configbutler/gitops-reverser/testenv"
)

var (
	cp     *testenv.ControlPlane
	gitSrv *testenv.GitServer
)

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "watch-git-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	gitSrv, err = testenv.StartGitServer(dir, "mirror", "s3cret")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := testenv.RunMain(m, &cp)
	_ = gitSrv.Close()
	_ = os.RemoveAll(dir)
	if code == 0 {
		// Every watcher, informer and Git worker a test started must have been joined.
		if err := goleak.Find(testenv.LeakIgnores()...); err != nil {
			fmt.Fprintln(os.Stderr, err)
			code = 1
		}
	}
	os.Exit(code)
}

var (
	installOnce sync.Once
	installErr  error
	envSeq      atomic.Int64
)

// env is one test's world: its own namespace, Git repository, credentials Secret,
// GitRepoConfig and GitDestination (baseFolder clusters/test), all removed when the test ends.
type env struct {
	t    *testing.T
	ctx  context.Context
	ns   string
	repo string
	dyn  dynamic.Interface
	kube *kubernetes.Clientset
	reg  *metrics.Registry
	// wrapRepos, when set, wraps the real reader of Secrets the manager is given by startManager.
	wrapRepos func(Repositories) Repositories
	// shards, when set, is the manager's sharing of destinations.
	shards Shards
	// userAgent, when set, is the manager's on the apiserver, and so the field manager of its writes.
	userAgent string
}

const baseFolder = "clusters/test"

func newEnv(t *testing.T) *env {
	t.Helper()
	ctx := context.Background()
	installOnce.Do(func() {
		installErr = crds.Install(ctx, cp.AdminConfig(), slog.New(slog.NewTextHandler(io.Discard, nil)))
	})
	if installErr != nil {
		t.Fatalf("install CRDs: %v", installErr)
	}
	n := envSeq.Add(1)
	e := &env{t: t, ctx: ctx, ns: fmt.Sprintf("mirror-%d", n), repo: fmt.Sprintf("repo-%d", n), reg: metrics.New()}
	var err error
	if e.dyn, err = dynamic.NewForConfig(cp.AdminConfig()); err != nil {
		t.Fatal(err)
	}
	if e.kube, err = kubernetes.NewForConfig(cp.AdminConfig()); err != nil {
		t.Fatal(err)
	}
	if _, err := gitSrv.CreateRepo(e.repo); err != nil {
		t.Fatal(err)
	}
	e.createNamespace(e.ns)
	e.create(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "git", Namespace: e.ns},
		StringData: map[string]string{"username": gitSrv.Username, "password": gitSrv.Password}})
	e.apply(crds.GitRepoConfigs, &crds.GitRepoConfig{ObjectMeta: metav1.ObjectMeta{Name: "repo", Namespace: e.ns},
		Spec: crds.GitRepoConfigSpec{RepoURL: gitSrv.RepoURL(e.repo), AllowedBranches: []string{"main"},
			SecretRef: &crds.LocalReference{Name: "git"}}})
	e.apply(crds.GitDestinations, &crds.GitDestination{ObjectMeta: metav1.ObjectMeta{Name: "dest", Namespace: e.ns},
		Spec: crds.GitDestinationSpec{RepoRef: crds.NamespacedReference{Name: "repo"}, Branch: "main", BaseFolder: baseFolder}})
	t.Cleanup(e.deleteConfig)
	return e
}

// deleteConfig removes every configbutler object of the test, so later tests' managers do not
// pick them up.
func (e *env) deleteConfig() {
	for _, gvr := range []schema.GroupVersionResource{crds.WatchRules, crds.GitDestinations, crds.GitRepoConfigs} {
		_ = e.dyn.Resource(gvr).Namespace(e.ns).DeleteCollection(e.ctx, metav1.DeleteOptions{}, metav1.ListOptions{})
	}
	list, err := e.dyn.Resource(crds.ClusterWatchRules).List(e.ctx, metav1.ListOptions{})
	if err == nil {
		for _, item := range list.Items {
			_ = e.dyn.Resource(crds.ClusterWatchRules).Delete(e.ctx, item.GetName(), metav1.DeleteOptions{})
		}
	}
}

func (e *env) createNamespace(name string) {
	e.t.Helper()
	e.create(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}})
}

// create makes a built-in object through the typed client.
func (e *env) create(obj any) {
	e.t.Helper()
	var err error
	switch o := obj.(type) {
	case *corev1.Namespace:
		_, err = e.kube.CoreV1().Namespaces().Create(e.ctx, o, metav1.CreateOptions{})
	case *corev1.Secret:
		_, err = e.kube.CoreV1().Secrets(o.Namespace).Create(e.ctx, o, metav1.CreateOptions{})
	case *corev1.ConfigMap:
		_, err = e.kube.CoreV1().ConfigMaps(o.Namespace).Create(e.ctx, o, metav1.CreateOptions{})
	default:
		e.t.Fatalf("create: unsupported %T", obj)
	}
	if err != nil {
		e.t.Fatalf("create %T: %v", obj, err)
	}
}

// apply creates or replaces one of our kinds.
func (e *env) apply(gvr schema.GroupVersionResource, obj any) {
	e.t.Helper()
	u, err := crds.ToUnstructured(obj)
	if err != nil {
		e.t.Fatal(err)
	}
	res := e.resource(gvr, u.GetNamespace())
	cur, err := res.Get(e.ctx, u.GetName(), metav1.GetOptions{})
	if err == nil {
		u.SetResourceVersion(cur.GetResourceVersion())
		_, err = res.Update(e.ctx, u, metav1.UpdateOptions{})
	} else {
		_, err = res.Create(e.ctx, u, metav1.CreateOptions{})
	}
	if err != nil {
		e.t.Fatalf("apply %s %s: %v", gvr.Resource, u.GetName(), err)
	}
}

func (e *env) configMap(name string, data map[string]string) {
	e.t.Helper()
	e.create(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.ns}, Data: data})
}

func configMapIn(namespace, name string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace}, Data: map[string]string{"k": "v"}}
}

func (e *env) watchRule(name string, resources ...string) {
	e.t.Helper()
	e.apply(crds.WatchRules, &crds.WatchRule{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.ns},
		Spec: crds.WatchRuleSpec{DestinationRef: crds.NamespacedReference{Name: "dest"},
			Rules: []crds.ResourceRule{{Resources: resources}}}})
}

// startManager runs a Manager and its Git worker pool with short batching until the test ends
// or stop is called. The manager stops first, then the pool pushes what it holds, as in the
// daemon.
func (e *env) startManager() (stop func()) {
	e.t.Helper()
	return e.startManagerWith(2 * time.Second)
}

func (e *env) startManagerWith(discoveryRefresh time.Duration) (stop func()) {
	e.t.Helper()
	log := slog.New(slog.NewTextHandler(testWriter{e.t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	changes := NewChanges()
	workDir := e.t.TempDir()
	pool := gitops.NewPool(gitops.PoolConfig{
		WorkDir: workDir,
		Limits:  gitops.BatchLimits{MaxFiles: 200, MaxBytes: 1 << 20, MaxWait: 2 * time.Second, Quiet: 100 * time.Millisecond},
		Identity: gitops.Identity{
			Committer: gitops.Signature{Name: "gitops-reverser", Email: "bot@example.com"},
			Bot:       gitops.Signature{Name: "gitops-reverser", Email: "bot@example.com"},
			Trailers:  [][2]string{{"X-ConfigButler-ClusterUID", "test-cluster"}},
		},
		MaxWorkers: 4, MaxWorkersPerRepo: 2,
		Metrics:  e.reg.Mirror,
		Log:      log,
		OnChange: changes.Notify,
	})
	repos := gitsecrets.New(gitsecrets.Config{
		Dynamic: e.dyn, Pool: pool, WorkDir: workDir, Log: log, OnChange: changes.Notify,
	})
	pool.OnRemoteWorks(repos.RemoteWorks)
	var managed Repositories = repos
	if e.wrapRepos != nil {
		managed = e.wrapRepos(repos)
	}
	cfg := cp.AdminConfig()
	if e.userAgent != "" {
		cfg.UserAgent = e.userAgent
	}
	m, err := NewManager(cfg, Options{
		DiscoveryRefresh: discoveryRefresh,
		Pool:             pool,
		Repos:            managed,
		Metrics:          e.reg.Mirror,
		Log:              log,
		Changes:          changes,
		Shards:           e.shards,
	})
	if err != nil {
		e.t.Fatal(err)
	}
	stopPool, stopRepos := testenv.Run(e.t, pool), testenv.Run(e.t, repos)
	stopManager := testenv.Run(e.t, m)
	stop = sync.OnceFunc(func() { // the manager first, then what it writes to
		if err := stopManager(); err != nil {
			e.t.Errorf("manager: %v", err)
		}
		if err := errors.Join(stopPool(), stopRepos()); err != nil {
			e.t.Errorf("pool: %v", err)
		}
	})
	e.t.Cleanup(stop)
	return stop
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// files lists the remote's files under the base folder.
func (e *env) files() []string {
	e.t.Helper()
	all, err := gitSrv.Files(e.repo, "main")
	if err != nil {
		e.t.Fatal(err)
	}
	var out []string
	for _, f := range all {
		if strings.HasPrefix(f, baseFolder+"/") {
			out = append(out, strings.TrimPrefix(f, baseFolder+"/"))
		}
	}
	return out
}

// waitFiles waits until the files under the base folder are exactly want.
func (e *env) waitFiles(want ...string) {
	e.t.Helper()
	slices.Sort(want)
	testenv.Eventually(e.t, time.Minute, "remote files", func() (bool, string) {
		got := e.files()
		return slices.Equal(got, want), fmt.Sprintf("got %v, want %v", got, want)
	})
}

// cmPath is the repository path (under the base folder) of a ConfigMap in the test namespace.
func (e *env) cmPath(name string) string { return e.ns + "/configmaps/" + name + ".yaml" }

func (e *env) resource(gvr schema.GroupVersionResource, namespace string) dynamic.ResourceInterface {
	if namespace == "" {
		return e.dyn.Resource(gvr)
	}
	return e.dyn.Resource(gvr).Namespace(namespace)
}

// readyCondition returns the Ready condition of one of our objects.
func (e *env) readyCondition(gvr schema.GroupVersionResource, namespace, name string) *metav1.Condition {
	e.t.Helper()
	u, err := e.resource(gvr, namespace).Get(e.ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil
	}
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		m := c.(map[string]any)
		if m["type"] == crds.ConditionReady {
			return &metav1.Condition{Type: crds.ConditionReady, Status: metav1.ConditionStatus(fmt.Sprint(m["status"])),
				Reason: fmt.Sprint(m["reason"]), Message: fmt.Sprint(m["message"])}
		}
	}
	return nil
}
