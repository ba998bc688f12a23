package writeback

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"
	promtestutil "github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/configbutler/gitops-reverser/crds"
	"github.com/configbutler/gitops-reverser/gitops"
	"github.com/configbutler/gitops-reverser/metrics"
	"github.com/configbutler/gitops-reverser/testenv"
)

// cp is the package's control plane, shared by the controller tests.
var cp *testenv.ControlPlane

// TestMain runs the tests against one control plane, then checks that every controller, informer
// and Git worker a test started was joined.
func TestMain(m *testing.M) {
	os.Exit(testenv.RunMainNoLeaks(m, &cp, testenv.LeakIgnores()...))
}

const converge = 30 * time.Second

var (
	installOnce sync.Once
	installErr  error
	nsSeq       atomic.Int64
)

// wbEnv is one test's world: its namespace, a Git server with one repository, its credentials,
// a GitRepoConfig "repo" and a GitDestination "dest" on branch main.
type wbEnv struct {
	t    *testing.T
	ns   string
	dyn  dynamic.Interface
	kube kubernetes.Interface
	git  *testenv.GitServer
}

func newWBEnv(t *testing.T, writeBack *crds.WriteBack) *wbEnv {
	t.Helper()
	ctx := context.Background()
	installOnce.Do(func() {
		installErr = crds.Install(ctx, cp.AdminConfig(), slog.New(slog.NewTextHandler(io.Discard, nil)))
	})
	if installErr != nil {
		t.Fatalf("install CRDs: %v", installErr)
	}
	e := &wbEnv{t: t, ns: fmt.Sprintf("wb-%d", nsSeq.Add(1)), git: testenv.MustGitServer(t, "wb", "s3cret", "repo"),
		dyn: dynamic.NewForConfigOrDie(cp.AdminConfig()), kube: kubernetes.NewForConfigOrDie(cp.AdminConfig())}
	if _, err := e.kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: e.ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create namespace: %v", err)
	}
	if _, err := e.kube.CoreV1().Secrets(e.ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "git"},
		StringData: map[string]string{"username": e.git.Username, "password": e.git.Password}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create Secret: %v", err)
	}
	e.create(crds.GitRepoConfigs, &crds.GitRepoConfig{ObjectMeta: metav1.ObjectMeta{Name: "repo"},
		Spec: crds.GitRepoConfigSpec{RepoURL: e.git.RepoURL("repo"), AllowedBranches: []string{"main"},
			SecretRef: &crds.LocalReference{Name: "git"}}})
	e.create(crds.GitDestinations, &crds.GitDestination{ObjectMeta: metav1.ObjectMeta{Name: "dest"},
		Spec: crds.GitDestinationSpec{RepoRef: crds.NamespacedReference{Name: "repo"}, Branch: "main",
			BaseFolder: "clusters/test", WriteBack: writeBack}})
	t.Cleanup(func() {
		for _, gvr := range []schema.GroupVersionResource{crds.GitDestinations, crds.GitRepoConfigs} {
			_ = e.dyn.Resource(gvr).Namespace(e.ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})
		}
	})
	return e
}

func (e *wbEnv) create(gvr schema.GroupVersionResource, obj any) {
	e.t.Helper()
	u, err := crds.ToUnstructured(obj)
	if err != nil {
		e.t.Fatal(err)
	}
	unstructured.RemoveNestedField(u.Object, "status")
	u.SetNamespace(e.ns)
	if _, err := e.dyn.Resource(gvr).Namespace(e.ns).Create(context.Background(), u, metav1.CreateOptions{}); err != nil {
		e.t.Fatalf("create %s %s: %v", gvr.Resource, u.GetName(), err)
	}
}

// run runs a write-back controller on git until the test ends.
func (e *wbEnv) run(git Git, log *slog.Logger) *Controller {
	e.t.Helper()
	return e.start(Config{Kube: cp.AdminConfig(), Git: git, Log: log}, nil)
}

// start runs a write-back controller with cfg until the test ends; prep, if set, is given the
// controller before it runs.
// testSealKey seals the proposals of the tests' controllers, and those the tests make as theirs.
var testSealKey = []byte("a test's key of the proposals' seals")

func (e *wbEnv) start(cfg Config, prep func(*Controller)) *Controller {
	e.t.Helper()
	if cfg.SealKey == nil { // the daemon keeps it in a Secret; any fixed key does here
		cfg.SealKey = func(context.Context) ([]byte, error) { return testSealKey, nil }
	}
	c, err := New(cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	if prep != nil {
		prep(c)
	}
	testenv.Run(e.t, c)
	return c
}

// startPoolOnRepo runs a Git pool with a worker on the branch main of the env's repository.
func (e *wbEnv) startPoolOnRepo() *gitops.Pool {
	pool := e.startPool()
	pool.SetRepositories([]gitops.Repository{{Name: e.ns + "/repo", URL: e.git.RepoURL("repo"),
		Credentials: gitops.Credentials{Auth: &githttp.BasicAuth{Username: e.git.Username, Password: e.git.Password}, Key: "test"}}})
	pool.SetWorkers([]gitops.Branch{{Repo: e.ns + "/repo", Branch: "main"}})
	return pool
}

// startPool runs a Git pool until the test ends.
func (e *wbEnv) startPool() *gitops.Pool {
	pool := gitops.NewPool(gitops.PoolConfig{
		WorkDir: e.t.TempDir(),
		Limits:  gitops.BatchLimits{MaxFiles: 200, MaxBytes: 1 << 20, MaxWait: time.Second, Quiet: 100 * time.Millisecond},
		Identity: gitops.Identity{
			Committer: gitops.Signature{Name: "gitops-reverser", Email: "bot@example.com"},
			Bot:       gitops.Signature{Name: "gitops-reverser", Email: "bot@example.com"},
		},
	})
	testenv.Run(e.t, pool)
	return pool
}

// edits is the pool as write-back sees it, counting how its fetches (the first step of every
// read of the edits) went.
type edits struct {
	*gitops.Pool
	noWorker, answered atomic.Int64
}

func (g *edits) Fetch(ctx context.Context, url, branch string) (gitops.FetchResult, error) {
	res, err := g.Pool.Fetch(ctx, url, branch)
	switch {
	case errors.Is(err, gitops.ErrNoWorker):
		g.noWorker.Add(1)
	case err == nil:
		g.answered.Add(1)
	}
	return res, err
}

// warnings records the log records at Warn level and above.
type warnings struct {
	mu   sync.Mutex
	msgs []string
}

func (w *warnings) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }
func (w *warnings) Handle(_ context.Context, r slog.Record) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	msg := r.Message
	r.Attrs(func(a slog.Attr) bool {
		msg += " " + a.String()
		return true
	})
	w.msgs = append(w.msgs, msg)
	return nil
}
func (w *warnings) WithAttrs([]slog.Attr) slog.Handler { return w }
func (w *warnings) WithGroup(string) slog.Handler      { return w }

// TestStartBeforeTheGitWorkerIsQuiet is a daemon's start: write-back sees its destination before
// the mirror has started the destination's Git worker. It waits for the worker without a
// warning, in the log or as an Event, and runs once the worker is there.
func TestStartBeforeTheGitWorkerIsQuiet(t *testing.T) {
	e := newWBEnv(t, &crds.WriteBack{Enabled: true})
	git := &edits{Pool: e.startPool()}
	logs := &warnings{}
	e.run(git, slog.New(logs))
	testenv.Eventually(t, converge, "write-back asked for the missing worker", func() (bool, string) {
		return git.noWorker.Load() > 0, "no Edits call yet"
	})
	git.SetRepositories([]gitops.Repository{{Name: e.ns + "/repo", URL: e.git.RepoURL("repo"),
		Credentials: gitops.Credentials{Auth: &githttp.BasicAuth{Username: e.git.Username, Password: e.git.Password}, Key: "test"}}})
	git.SetWorkers([]gitops.Branch{{Repo: e.ns + "/repo", Branch: "main"}})
	testenv.Eventually(t, converge, "the destination reconciled once its worker runs", func() (bool, string) {
		u, err := e.dyn.Resource(crds.GitDestinations).Namespace(e.ns).Get(context.Background(), "dest", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		synced, _, _ := unstructured.NestedString(u.Object, "status", "writeBack", "lastSyncTime")
		return git.answered.Load() > 0 && synced != "", fmt.Sprintf("%d answered, last sync %q", git.answered.Load(), synced)
	})
	list, err := e.kube.CoreV1().Events(e.ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range list.Items {
		if ev.Type == corev1.EventTypeWarning {
			t.Errorf("Warning Event %s on %s %s: %s", ev.Reason, ev.InvolvedObject.Kind, ev.InvolvedObject.Name, ev.Message)
		}
	}
	logs.mu.Lock()
	defer logs.mu.Unlock()
	if len(logs.msgs) > 0 {
		t.Errorf("a normal start logged warnings:\n%s", strings.Join(logs.msgs, "\n"))
	}
}

// TestProposalsAreWatchedOnlyWhileWriteBackIsEnabled: a mirror without write-back pays no watch
// of Proposals (nor GitRepoConfigs); enabling it on a destination starts them, disabling it on
// the last one stops them. The apiserver's own count of open watches is the judge.
func TestProposalsAreWatchedOnlyWhileWriteBackIsEnabled(t *testing.T) {
	e := newWBEnv(t, nil)
	c := e.run(&edits{Pool: e.startPool()}, slog.New(slog.DiscardHandler))
	testenv.Eventually(t, converge, "the controller watches GitDestinations", func() (bool, string) {
		n := watches(t, e.kube, "gitdestinations")
		return n > 0, fmt.Sprintf("%d watches", n)
	})
	if n := watches(t, e.kube, "proposals"); n != 0 || c.Caching() {
		t.Errorf("without write-back: %d watches of Proposals, caching %v", n, c.Caching())
	}
	e.setWriteBack(true)
	testenv.Eventually(t, converge, "Proposals watched once write-back is enabled", func() (bool, string) {
		n := watches(t, e.kube, "proposals")
		return n > 0 && c.Caching(), fmt.Sprintf("%d watches, caching %v", n, c.Caching())
	})
	e.setWriteBack(false)
	testenv.Eventually(t, converge, "Proposals no longer watched once it is disabled", func() (bool, string) {
		n := watches(t, e.kube, "proposals")
		return n == 0 && !c.Caching(), fmt.Sprintf("%d watches, caching %v", n, c.Caching())
	})
}

func (e *wbEnv) setWriteBack(enabled bool) {
	e.t.Helper()
	body := fmt.Sprintf(`{"spec":{"writeBack":{"enabled":%t}}}`, enabled)
	if _, err := e.dyn.Resource(crds.GitDestinations).Namespace(e.ns).Patch(context.Background(), "dest",
		types.MergePatchType, []byte(body), metav1.PatchOptions{}); err != nil {
		e.t.Fatal(err)
	}
}

// watches is how many watches of a configbutler.ai resource the apiserver is serving, from its
// apiserver_longrunning_requests gauge.
func watches(t *testing.T, kube kubernetes.Interface, resource string) int {
	t.Helper()
	raw, err := kube.Discovery().RESTClient().Get().AbsPath("/metrics").DoRaw(context.Background())
	if err != nil {
		t.Fatalf("read the apiserver's metrics: %v", err)
	}
	n := 0
	for line := range strings.Lines(string(raw)) {
		if !strings.HasPrefix(line, "apiserver_longrunning_requests{") || !strings.Contains(line, `verb="WATCH"`) ||
			!strings.Contains(line, `group="configbutler.ai"`) || !strings.Contains(line, `resource="`+resource+`"`) {
			continue
		}
		var v float64
		if _, err := fmt.Sscan(line[strings.LastIndexByte(line, ' ')+1:], &v); err == nil {
			n += int(v)
		}
	}
	return n
}

// TestABranchOwnedElsewhereIsLeftToItsOwner: with shards, a replica that does not own the
// destination's branch runs nothing for it; a trigger it receives (a Git host's webhook) is handed
// to the owner through the sync-now annotation; once it owns the branch, Resync runs the
// destination and answers that request.
func TestABranchOwnedElsewhereIsLeftToItsOwner(t *testing.T) {
	e := newWBEnv(t, &crds.WriteBack{Enabled: true})
	pool := e.startPoolOnRepo()
	var owned atomic.Bool
	c := e.start(Config{Kube: cp.AdminConfig(), Git: pool, Owns: func(string, string) bool { return owned.Load() }}, nil)
	dest := func() *crds.GitDestination {
		u, err := e.dyn.Resource(crds.GitDestinations).Namespace(e.ns).Get(context.Background(), "dest", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		d, err := crds.FromUnstructured[crds.GitDestination](u)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	testenv.Eventually(t, converge, "write-back's caches", func() (bool, string) { return c.Caching(), "not caching" })
	c.SyncNow(e.ns, "dest", crds.TriggerReceiver)
	var requested string
	testenv.Eventually(t, converge, "the trigger handed to the owner", func() (bool, string) {
		requested = dest().Annotations[crds.AnnotationSyncNow]
		return requested != "", "no sync-now annotation"
	})
	if wb := dest().Status.WriteBack; wb != nil && wb.LastSyncTime != nil {
		t.Errorf("a replica that does not own the branch synced it at %v", wb.LastSyncTime)
	}
	owned.Store(true)
	c.Resync()
	testenv.Eventually(t, converge, "the owner answering the request", func() (bool, string) {
		wb := dest().Status.WriteBack
		if wb == nil {
			return false, "no status.writeBack"
		}
		return wb.LastHandledSyncNow == requested && wb.LastSyncTime != nil, fmt.Sprintf("handled %q, want %q", wb.LastHandledSyncNow, requested)
	})
}

// TestPendingGaugesCountOnlyOwnedBranches: with shards, a replica exports the pending proposals
// of the branches it owns, none of the others', so the replicas' gauges add up to the cluster's
// instead of each counting every proposal.
func TestPendingGaugesCountOnlyOwnedBranches(t *testing.T) {
	e := newWBEnv(t, &crds.WriteBack{Enabled: true})
	pool := e.startPool()
	var owned atomic.Bool
	m := metrics.New()
	c := e.start(Config{Kube: cp.AdminConfig(), Git: pool, Metrics: m.WriteBack, Owns: func(string, string) bool { return owned.Load() }}, nil)
	testenv.Eventually(t, converge, "write-back's caches", func() (bool, string) { return c.Caching(), "not caching" })
	e.proposalWithStatus("waiting", "dest", crds.ProposalStatus{Phase: crds.PhasePending})
	testenv.Eventually(t, converge, "the proposal cached", func() (bool, string) {
		n, _ := c.pending(e.ns + "/dest")
		return n == 1, fmt.Sprintf("%d pending of the destination", n)
	})
	if n, oldest := c.pending(""); n != 0 || !oldest.IsZero() {
		t.Errorf("a replica that owns no branch counts %d pending, the oldest at %v", n, oldest)
	}
	owned.Store(true)
	testenv.Eventually(t, converge, "the owner exporting its pending proposal", func() (bool, string) {
		c.Resync()
		n, oldest := promtestutil.ToFloat64(m.WriteBack.Pending), promtestutil.ToFloat64(m.WriteBack.OldestPending)
		return n == 1 && oldest > 0, fmt.Sprintf("%v pending, the oldest at %v", n, oldest)
	})
}

// TestADeposedOwnerWritesNothing: a replica that still believes it owns a destination's branch
// but whose Lease is gone (its fence refuses, as it does pushes and applies) writes no SyncRun
// and no status for it; once the fence allows again, the run is recorded.
func TestADeposedOwnerWritesNothing(t *testing.T) {
	e := newWBEnv(t, &crds.WriteBack{Enabled: true})
	pool := e.startPoolOnRepo()
	var deposed atomic.Bool
	var asked atomic.Int64
	deposed.Store(true)
	fences := func(string, string) gitops.Fence {
		return func() (time.Time, error) {
			asked.Add(1)
			if deposed.Load() {
				return time.Time{}, errors.New("the Lease is another replica's")
			}
			return time.Now().Add(time.Minute), nil
		}
	}
	c := e.start(Config{Kube: cp.AdminConfig(), Git: pool, Owns: func(string, string) bool { return true }, Fences: fences}, nil)
	testenv.Eventually(t, converge, "write-back's caches", func() (bool, string) { return c.Caching(), "not caching" })
	runs := func() int {
		list, err := e.dyn.Resource(crds.SyncRuns).Namespace(e.ns).List(context.Background(), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return len(list.Items)
	}
	synced := func() bool {
		u, err := e.dyn.Resource(crds.GitDestinations).Namespace(e.ns).Get(context.Background(), "dest", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		_, found, _ := unstructured.NestedString(u.Object, "status", "writeBack", "lastSyncTime")
		return found
	}
	c.SyncNow(e.ns, "dest", crds.TriggerSyncNow)
	testenv.Eventually(t, converge, "a run asked for", func() (bool, string) {
		return asked.Load() > 0 || runs() > 0 || synced(), "neither the fence asked nor a run written"
	})
	if n := runs(); n != 0 || synced() {
		t.Errorf("a deposed owner wrote %d SyncRuns, status written %v", n, synced())
	}
	deposed.Store(false)
	testenv.Eventually(t, converge, "the run recorded once the fence allows", func() (bool, string) {
		c.SyncNow(e.ns, "dest", crds.TriggerSyncNow)
		return synced(), "no status.writeBack.lastSyncTime"
	})
}
