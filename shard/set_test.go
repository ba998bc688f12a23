package shard

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"

	"github.com/configbutler/gitops-reverser/kube"
	"github.com/configbutler/gitops-reverser/lease"
	"github.com/configbutler/gitops-reverser/testenv"
)

// cp is the package's control plane: the Sets hold real Leases.
var cp *testenv.ControlPlane

func TestMain(m *testing.M) {
	os.Exit(testenv.RunMainNoLeaks(m, &cp))
}

// timings are short, so a test waits seconds, not a lease duration of 15 s.
var timings = lease.Timings{LeaseDuration: 2 * time.Second, RenewDeadline: 1500 * time.Millisecond, RetryPeriod: 200 * time.Millisecond}

// member is one Set in the test, with what it drained.
type member struct {
	*Set
	stop    context.CancelFunc
	done    chan struct{}
	mu      sync.Mutex
	drained []Key
}

func (m *member) drainedKeys() []Key {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.drained)
}

// start runs a Set named identity over the Leases of namespace ns with prefix, wanting keys.
func start(t *testing.T, ns, prefix, identity string, keys []Key) *member {
	t.Helper()
	leases := kube.For(dynamic.NewForConfigOrDie(cp.AdminConfig()), kube.Leases, ns)
	m := &member{done: make(chan struct{})}
	m.Set = New(Config{Leases: leases, Prefix: prefix, Identity: identity, Address: identity + ":9443", Timings: timings})
	m.Connect(func(_ context.Context, k Key) {
		m.mu.Lock()
		m.drained = append(m.drained, k)
		m.mu.Unlock()
	}, nil)
	m.Want(keys)
	ctx, cancel := context.WithCancel(context.Background())
	m.stop = cancel
	go func() {
		defer close(m.done)
		_ = m.Run(ctx)
	}()
	t.Cleanup(m.halt)
	return m
}

// halt stops the Set as a graceful stop does, and waits for it.
func (m *member) halt() {
	m.stop()
	<-m.done
}

func namespace(t *testing.T, name string) {
	t.Helper()
	core := dynamic.NewForConfigOrDie(cp.AdminConfig())
	ns := kube.For(core, kube.Namespaces, "")
	if _, err := ns.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func keys(n int) []Key {
	out := make([]Key, n)
	for i := range out {
		out[i] = Key{URL: fmt.Sprintf("https://git.example/repo-%02d.git", i), Branch: "main"}
	}
	return out
}

// owning is a condition: the members own want shards each (in any order), no shard twice, and
// every wanted shard once.
func owning(all []Key, ms []*member, want ...int) func() (bool, string) {
	want = slices.Sorted(slices.Values(want))
	return func() (bool, string) {
		var counts []int
		owner := map[Key]int{}
		for i, m := range ms {
			st := m.Status()
			counts = append(counts, len(st.Owned))
			for _, k := range st.Owned {
				if _, twice := owner[k]; twice {
					return false, fmt.Sprintf("%s owned by members %d and %d", k, owner[k], i)
				}
				owner[k] = i
			}
		}
		slices.Sort(counts)
		return slices.Equal(counts, want) && len(owner) == len(all), fmt.Sprintf("owned %v, want %v", counts, want)
	}
}

// TestSetsShareFairlyAndHandOver: one Set takes all six shards; a second joins and the first hands
// three over, each only after draining it; a third joins: 2/2/2. A graceful stop hands its two
// over at once (3/3); a shard nobody wants any more is released; a replica that owns a shard
// fences it, the others refuse it, naming the owner.
func TestSetsShareFairlyAndHandOver(t *testing.T) {
	namespace(t, "shards-fair")
	all := keys(6)
	a := start(t, "shards-fair", "fair", "replica-a", all)
	testenv.Eventually(t, 30*time.Second, "a owns all six", owning(all, []*member{a}, 6))
	b := start(t, "shards-fair", "fair", "replica-b", all)
	testenv.Eventually(t, 30*time.Second, "3/3", owning(all, []*member{a, b}, 3, 3))
	if got := len(a.drainedKeys()); got != 3 {
		t.Errorf("a drained %d shards before handing them over, want 3", got)
	}
	c := start(t, "shards-fair", "fair", "replica-c", all)
	testenv.Eventually(t, 30*time.Second, "2/2/2", owning(all, []*member{a, b, c}, 2, 2, 2))
	if peers := a.Peers(); !slices.Equal(peers, []string{"replica-b:9443", "replica-c:9443"}) {
		t.Errorf("a's peers %v, want b's and c's addresses", peers)
	}

	owned := c.Status().Owned[0]
	if _, err := c.Fence(owned)(); err != nil {
		t.Errorf("the owner's fence refused %s: %v", owned, err)
	}
	// a refuses at once; it names the owner once its view of the Leases has c's.
	testenv.Eventually(t, 30*time.Second, "another replica's fence refused, naming replica-c", func() (bool, string) {
		_, err := a.Fence(owned)()
		var notOwned *NotOwnedError
		if !errors.As(err, &notOwned) {
			t.Errorf("another replica's fence of %s: %v, want NotOwnedError", owned, err)
			return true, ""
		}
		return notOwned.Owner == "replica-c", err.Error()
	})

	c.halt() // a graceful stop releases at once: no lease duration to wait
	testenv.Eventually(t, 30*time.Second, "3/3 after c stopped", owning(all, []*member{a, b}, 3, 3))

	less := all[:4]
	a.Want(less)
	b.Want(less)
	testenv.Eventually(t, 30*time.Second, "2/2 of the four still wanted", owning(less, []*member{a, b}, 2, 2))
}
