package daemon

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/configbutler/gitops-reverser/crds"
	"github.com/configbutler/gitops-reverser/testenv"
)

// The hub's figures beside the single cluster's: one daemon (one replica) mirroring three remote
// clusters of 10,000 ConfigMaps each (RemoteClusters, a destination each), and the same 30,000
// ConfigMaps in the daemon's own cluster, in one namespace and one destination. Each case: the
// ConfigMaps are written straight into etcd (see etcd_bench_test.go) before the daemon starts,
// then daemon start → every file on the remote (checked by blob hash, as mirrorBench does), the
// peak resident set over the whole case split as resident_bench_test.go splits it, and updates at
// 1,000/s for rateRun (10 s), spread evenly over the clusters, straight into their etcds: the lag
// from the last update until the remote matched, and each change's lag from its write to the
// first tip of the remote branch that held it. Every process runs on this machine's two cores:
// the remote control planes (an etcd and an apiserver each) share them with the daemon, which a
// real hub's remotes would not.

// hubRemotes are the remote clusters of BenchmarkHub.
var hubRemotes = []string{"east", "west", "north"}

// hubRemoteNS is the namespace of each remote that is mirrored.
const hubRemoteNS = "shop"

func hubReport(format string, args ...any) { fmt.Printf("hub: "+format+"\n", args...) }

// hubSource is one cluster's objects cm-<i>: the etcd they are written to and how.
type hubSource struct {
	etcd *clientv3.Client
	put  putFunc
}

// BenchmarkHub prints the seed time, peak memory and lag of three remote clusters of 10,000
// ConfigMaps each mirrored by one daemon, and of the same 30,000 in one cluster.
func BenchmarkHub(b *testing.B) {
	planes.Lend(b)
	const perCluster = 10000
	for range b.N {
		hubRemoteCase(b, perCluster)
		hubLocalCase(b, perCluster*len(hubRemotes))
	}
}

// hubRemoteCase mirrors len(hubRemotes) remote clusters of per ConfigMaps each into one
// repository, each under live/<cluster>/ (live/, the folder mirrorBench compares), with one
// daemon on the hub's control plane; the remotes are stopped and their configuration deleted
// when done, so the next case's daemon meets none of it.
func hubRemoteCase(b *testing.B, per int) {
	ctx := context.Background()
	remotes := make([]*testenv.ControlPlane, len(hubRemotes))
	errs := make([]error, len(hubRemotes))
	var wg sync.WaitGroup
	for i := range remotes {
		wg.Go(func() { remotes[i], errs[i] = testenv.Start(ctx) })
	}
	wg.Wait()
	for i, cp := range remotes {
		if cp != nil {
			b.Cleanup(cp.Stop)
		}
		if errs[i] != nil {
			b.Fatal(errs[i])
		}
	}

	// The hub's namespace holds the repository's GitRepoConfig; its own destination of live/
	// gives way to the remotes' destinations under it.
	hubNS := fmt.Sprintf("hub-fleet-%d", time.Now().UnixNano()%1e6)
	m := newMirrorBench(b, hubNS)
	m.retire()
	hubDyn := dynamic.NewForConfigOrDie(planes.Of(b).AdminConfig())
	hubKube := kubernetes.NewForConfigOrDie(planes.Of(b).AdminConfig())
	create := func(gvr schema.GroupVersionResource, obj any) {
		u, err := crds.ToUnstructured(obj)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := hubDyn.Resource(gvr).Namespace(u.GetNamespace()).Create(ctx, u, metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	sources := make([]hubSource, len(hubRemotes))
	for i, name := range hubRemotes {
		cp := remotes[i]
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: hubRemoteNS}}
		if _, err := kubernetes.NewForConfigOrDie(cp.AdminConfig()).CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
		// The benchmark's kubeconfig authenticates as the remote's admin (system:masters), not as
		// the least-privilege identity TestHubMirrorsRemoteClusters gives: what the mirror costs,
		// not RBAC, is measured (and an apiserver checks RBAC the same for either).
		path := filepath.Join(b.TempDir(), "kubeconfig")
		if err := cp.WriteKubeconfig(path); err != nil {
			b.Fatal(err)
		}
		data, err := os.ReadFile(path)
		if err != nil {
			b.Fatal(err)
		}
		secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name + "-kubeconfig", Namespace: hubNS}, Data: map[string][]byte{crds.DefaultKubeConfigKey: data}}
		if _, err := hubKube.CoreV1().Secrets(hubNS).Create(ctx, secret, metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
		create(crds.RemoteClusters, &crds.RemoteCluster{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: hubNS},
			Spec: crds.RemoteClusterSpec{KubeConfig: crds.KubeConfigReference{SecretRef: crds.SecretKeyReference{Name: name + "-kubeconfig"}},
				Namespaces: []string{hubRemoteNS}}})
		create(crds.GitDestinations, &crds.GitDestination{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: hubNS},
			Spec: crds.GitDestinationSpec{RepoRef: crds.NamespacedReference{Name: "repo"}, Branch: "main", BaseFolder: "live/" + name,
				ClusterRef: &crds.NamespacedReference{Name: name}}})
		create(crds.ClusterWatchRules, &crds.ClusterWatchRule{ObjectMeta: metav1.ObjectMeta{Name: hubNS + "-" + name},
			Spec: crds.ClusterWatchRuleSpec{DestinationRef: crds.NamespacedReference{Name: name, Namespace: hubNS},
				Rules: []crds.ClusterResourceRule{{ResourceRule: crds.ResourceRule{Resources: []string{"configmaps"}}, Scope: crds.ScopeNamespaced}}}})

		// The remote's ConfigMaps are those of namespace shop, as a mirrorBench of it writes them
		// into etcd, and land under the cluster's folder.
		of := &mirrorBench{tb: b, ns: hubRemoteNS}
		sources[i] = hubSource{etcd: etcdClientOf(b, cp), put: func(i, round int) (clientv3.Op, string, string, error) {
			op, path, hash, err := of.putOp(i, round)
			return op, "live/" + name + "/" + strings.TrimPrefix(path, "live/"), hash, err
		}}
	}

	f := hubMeasure(b, m, sources, per)
	hubReport("%d remote clusters × %s ConfigMaps, mirrored by one daemon into one repository (a destination each): %s",
		len(hubRemotes), thousands(per), f)

	for _, name := range hubRemotes {
		if err := hubDyn.Resource(crds.ClusterWatchRules).Delete(ctx, hubNS+"-"+name, metav1.DeleteOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	for _, gvr := range []schema.GroupVersionResource{crds.GitDestinations, crds.RemoteClusters} {
		if err := hubDyn.Resource(gvr).Namespace(hubNS).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	for _, cp := range remotes {
		cp.Stop()
	}
}

// hubLocalCase mirrors n ConfigMaps of one namespace of the daemon's own cluster into one
// destination, as hubRemoteCase does the remotes'.
func hubLocalCase(b *testing.B, n int) {
	m := newMirrorBench(b, fmt.Sprintf("hub-local-%d", time.Now().UnixNano()%1e6))
	f := hubMeasure(b, m, []hubSource{{etcd: etcdClient(b), put: m.putOp}}, n)
	hubReport("the same %s ConfigMaps in one cluster (the daemon's own), one namespace, one destination: %s", thousands(n), f)
	m.retire()
}

// hubFigures is what hubMeasure measured.
type hubFigures struct {
	objects          int
	written, seed    time.Duration // into etcd; daemon start → all files on the remote
	peak             residentPeak
	hwm, cpu         float64 // VmHWM (MiB), CPU seconds over the whole case
	rate             rateResult
	p50, p99, maxLag time.Duration // per change: its write → the first tip holding it
	traced           int           // changes found in the history
}

func (f hubFigures) String() string {
	return fmt.Sprintf("seed %.1f s (daemon start → all %s files on the remote; written to etcd in %.1f s); "+
		"peak %.0f MiB (%.0f MiB of memory: heap, stacks, the runtime's; %.0f MiB of the binary's pages; VmHWM %.0f MiB); "+
		"lag after 1,000 changes/s for %.0f s: %.1f s (last change → remote matches; %.0f/s reached, %s changes), "+
		"per change p50 %.2f s, p99 %.2f s, max %.2f s (write → first tip holding it, of %s traced); daemon CPU %.1f s over the case",
		f.seed.Seconds(), thousands(f.objects), f.written.Seconds(),
		f.peak.anon+f.peak.file, f.peak.anon, f.peak.file, f.hwm,
		rateRun.Seconds(), f.rate.lag.Seconds(), f.rate.reached, thousands(f.rate.sent),
		f.p50.Seconds(), f.p99.Seconds(), f.maxLag.Seconds(), thousands(f.traced), f.cpu)
}

// hubMeasure writes per ConfigMaps of each source into its etcd, starts the daemon as a newcomer
// starts it (as BenchmarkMirror2000 does), waits for every file on m's remote, drives updates at
// 1,000/s spread over the sources for rateRun, and stops the daemon.
func hubMeasure(b *testing.B, m *mirrorBench, sources []hubSource, per int) hubFigures {
	f := hubFigures{objects: per * len(sources)}
	writing := time.Now()
	for _, s := range sources {
		m.seedWith(s.etcd, 0, per, s.put)
	}
	f.written = time.Since(writing)
	if len(m.want) != f.objects {
		b.Fatalf("%d files expected on the remote, want %d", len(m.want), f.objects)
	}

	start := time.Now()
	d := startDaemon(b, b.TempDir(), "--namespace", fmt.Sprintf("bench-home-%d", time.Now().UnixNano()))
	peak := sampleResident(b, d.Pid())
	f.seed = m.mustLand(10 * time.Minute).Sub(start)

	const rate = 1000
	lags := &changeLags{written: map[string]time.Time{}}
	updates := hubUpdates(m, sources, per, rate, lags)
	tips := watchTips(m.srv)
	f.rate = m.driveRate(d, rate, etcdWriters, updates)
	lags.tips = tips()
	f.p50, f.p99, f.maxLag, f.traced = lags.percentiles(b, m.srv)

	f.peak = peak()
	f.hwm, f.cpu = usage(b, d.Pid())
	d.Stop(b)
	return f
}

// hubUpdates are the updates of a run of rateRun at rate, the k-th into source k mod len(sources)
// (so the rate is spread evenly over them), giving its object j = k/len(sources) mod per payload
// round 1+j/per. Their encodings are made beforehand, so that the writers only write; each
// records Git's target and when it was written.
func hubUpdates(m *mirrorBench, sources []hubSource, per, rate int, lags *changeLags) []func() error {
	updates := make([]func() error, rate*int(rateRun/time.Second))
	m.parallel(0, len(updates), func(ctx context.Context, k int) error {
		s, j := sources[k%len(sources)], k/len(sources)
		put, path, hash, err := s.put(j%per, 1+j/per)
		updates[k] = func() error {
			if _, err := s.etcd.Do(ctx, put); err != nil {
				return fmt.Errorf("write etcd: %w", err)
			}
			lags.wrote(path, hash)
			m.record(path, hash)
			return nil
		}
		return err
	})
	return updates
}

// changeLags finds how long each change took from its write to the remote: the first tip of the
// branch seen holding it.
type changeLags struct {
	mu      sync.Mutex
	written map[string]time.Time // path \x00 blob hash → when written
	tips    map[string]time.Time // commit → when first seen as the tip
}

func (l *changeLags) wrote(path, hash string) {
	now := time.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	l.written[path+"\x00"+hash] = now
}

// percentiles reads the branch's history and, for each change written, the first seen tip that
// holds a commit of its content: a commit that was never the tip when read landed with the
// nearest later one that was. Each object is changed once, so each change has a content of its own.
func (l *changeLags) percentiles(tb testing.TB, srv *testenv.GitServer) (p50, p99, maxLag time.Duration, traced int) {
	history, err := srv.History("state", "main")
	if err != nil {
		tb.Fatal(err)
	}
	var lags []time.Duration
	var landed time.Time
	for _, c := range history { // newest first
		if seen, ok := l.tips[c.SHA]; ok {
			landed = seen
		}
		if landed.IsZero() {
			continue
		}
		for path, content := range c.Files {
			if content == nil {
				continue
			}
			if at, ok := l.written[path+"\x00"+testenv.BlobHash(content)]; ok {
				lags = append(lags, landed.Sub(at))
			}
		}
	}
	if len(lags) == 0 {
		tb.Fatal("no change written was found in the remote's history")
	}
	slices.Sort(lags)
	return lags[len(lags)/2], lags[len(lags)*99/100], lags[len(lags)-1], len(lags)
}

// watchTips reads the tip of the remote branch every tipPoll until the returned function is
// called, which returns each tip seen with when it was first seen, the tip of then included.
func watchTips(srv *testenv.GitServer) func() map[string]time.Time {
	tips := map[string]time.Time{}
	stop, stopped := make(chan struct{}), make(chan struct{})
	look := func() {
		if sha, err := srv.BranchTip("state", "main"); err == nil && sha != "" {
			if _, ok := tips[sha]; !ok {
				tips[sha] = time.Now()
			}
		}
	}
	go func() {
		defer close(stopped)
		tick := time.NewTicker(tipPoll)
		defer tick.Stop()
		for {
			look()
			select {
			case <-tick.C:
			case <-stop:
				return
			}
		}
	}()
	return func() map[string]time.Time {
		close(stop)
		<-stopped
		look()
		return tips
	}
}

// thousands writes n with commas: 30,000.
func thousands(n int) string {
	s := fmt.Sprint(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
