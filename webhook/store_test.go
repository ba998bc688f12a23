package webhook

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	authenticationv1 "k8s.io/api/authentication/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/configbutler/gitops-reverser/gitops"
	"github.com/configbutler/gitops-reverser/metrics"
)

var (
	bot       = gitops.Signature{Name: "gitops-reverser", Email: "bot@example.com"}
	alice     = authenticationv1.UserInfo{Username: "alice", Groups: []string{"devs"}}
	bob       = authenticationv1.UserInfo{Username: "bob@example.com"}
	configMap = schema.GroupKind{Kind: "ConfigMap"}
	aliceSig  = gitops.Signature{Name: "alice", Email: "alice@users.noreply.configbutler.ai"}
)

// testClock is the injected clock: records age only when a test says so.
type testClock struct{ now time.Time }

func (c *testClock) Now() time.Time          { return c.now }
func (c *testClock) Advance(d time.Duration) { c.now = c.now.Add(d) }

// newTestStore returns a Store on a fresh registry and a clock the test moves by hand.
func newTestStore(tb testing.TB, cfg StoreConfig) (*Store, *metrics.Attribution, *testClock) {
	tb.Helper()
	clock := &testClock{now: time.Date(2025, 10, 20, 12, 0, 0, 0, time.UTC)}
	cfg.Now, cfg.Metrics, cfg.Bot = clock.Now, metrics.New().Attribution, bot
	s := NewStore(cfg)
	runStore(tb, s)
	return s, cfg.Metrics, clock
}

// stops holds how to stop each running test store, for the tests that need its counters final.
var stops sync.Map // *Store → func()

// runStore runs s until the test ends or stopStore(s) is called.
func runStore(tb testing.TB, s *Store) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = s.Run(ctx)
	}()
	stop := sync.OnceFunc(func() { cancel(); <-done })
	stops.Store(s, stop)
	tb.Cleanup(stop)
}

// stopStore stops a store started by runStore and returns once its counters are final.
func stopStore(s *Store) {
	if stop, ok := stops.Load(s); ok {
		stop.(func())()
	}
}

func TestRecordThenAuthorIsAHitOnce(t *testing.T) {
	s, m, _ := newTestStore(t, StoreConfig{})
	s.Record(Change{"UPDATE", configMap, "team-a", "app", []byte("data: 1\n")}, alice)

	if got, ok := s.Author("UPDATE", configMap, "team-a", "app", []byte("data: 1\n")); !ok || got.Author != aliceSig {
		t.Fatalf("first Author = %+v, %v; want %+v, true", got, ok, aliceSig)
	}
	if got, ok := s.Author("UPDATE", configMap, "team-a", "app", []byte("data: 1\n")); ok || got.Author != bot {
		t.Fatalf("second Author = %+v, %v; want the bot, false", got, ok)
	}
	if s.Len() != 0 {
		t.Errorf("Len = %d after the hit; want 0", s.Len())
	}
	if hits, misses := testutil.ToFloat64(m.EnrichHits), testutil.ToFloat64(m.EnrichMisses); hits != 1 || misses != 1 {
		t.Errorf("enrich hits, misses = %v, %v; want 1, 1", hits, misses)
	}
}

func TestDifferentContentIsAMiss(t *testing.T) {
	type lookup struct {
		op        string
		gk        schema.GroupKind
		namespace string
		name      string
		content   string
	}
	recorded := lookup{"UPDATE", configMap, "team-a", "app", "data: 1\n"}
	cases := map[string]func(*lookup){
		"other content":   func(l *lookup) { l.content = "data: 2\n" },
		"other operation": func(l *lookup) { l.op = "CREATE" },
		"other kind":      func(l *lookup) { l.gk.Kind = "Secret" },
		"other group":     func(l *lookup) { l.gk.Group = "example.com" },
		"other namespace": func(l *lookup) { l.namespace = "team-b" },
		"other name":      func(l *lookup) { l.name = "app2" },
	}
	for name, change := range cases {
		t.Run(name, func(t *testing.T) {
			s, m, _ := newTestStore(t, StoreConfig{})
			r := recorded
			s.Record(Change{r.op, r.gk, r.namespace, r.name, []byte(r.content)}, alice)
			l := recorded
			change(&l)
			if got, ok := s.Author(l.op, l.gk, l.namespace, l.name, []byte(l.content)); ok || got.Author != bot {
				t.Errorf("Author = %+v, %v; want the bot, false", got, ok)
			}
			if misses := testutil.ToFloat64(m.EnrichMisses); misses != 1 {
				t.Errorf("enrich misses = %v; want 1", misses)
			}
		})
	}
}

// The watch's last view of a deleted object need not match what admission saw: identity suffices.
func TestDeleteKeyIgnoresContent(t *testing.T) {
	s, _, _ := newTestStore(t, StoreConfig{})
	s.Record(Change{"DELETE", configMap, "team-a", "app", nil}, alice)
	if got, ok := s.Author("DELETE", configMap, "team-a", "app", []byte("data: final\n")); !ok || got.Author != aliceSig {
		t.Errorf("Author = %+v, %v; want %+v, true", got, ok, aliceSig)
	}
}

func TestEntryExpiresAfterTTL(t *testing.T) {
	cases := []struct {
		name        string
		age         time.Duration
		wantHit     bool
		wantExpired float64
	}{
		{"just recorded", 0, true, 0},
		{"at the TTL", 10 * time.Second, true, 0},
		{"beyond the TTL", 10*time.Second + time.Nanosecond, false, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s, m, clock := newTestStore(t, StoreConfig{TTL: 10 * time.Second})
			s.Record(Change{"CREATE", configMap, "team-a", "app", []byte("data: 1\n")}, alice)
			clock.Advance(tc.age)
			if _, ok := s.Author("CREATE", configMap, "team-a", "app", []byte("data: 1\n")); ok != tc.wantHit {
				t.Errorf("hit = %v; want %v", ok, tc.wantHit)
			}
			if got := testutil.ToFloat64(m.Evictions.WithLabelValues("expired")); got != tc.wantExpired {
				t.Errorf("kv_evictions_total{reason=expired} = %v; want %v", got, tc.wantExpired)
			}
		})
	}
}

func TestCapacityEvictsLeastRecentlyUsed(t *testing.T) {
	cases := []struct {
		name    string
		records []string
		evicted string
	}{
		{"oldest of three goes", []string{"a", "b", "c"}, "a"},
		{"recording again makes it recent", []string{"a", "b", "a", "c"}, "b"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s, m, _ := newTestStore(t, StoreConfig{Capacity: 2})
			for _, name := range tc.records {
				s.Record(Change{"DELETE", configMap, "team-a", name, nil}, alice)
			}
			stopStore(s) // waits for the eviction callbacks: the counter is final
			if got := testutil.ToFloat64(m.Evictions.WithLabelValues("capacity")); got != 1 {
				t.Errorf("kv_evictions_total{reason=capacity} = %v; want 1", got)
			}
			for _, name := range []string{"a", "b", "c"} {
				_, ok := s.Author("DELETE", configMap, "team-a", name, nil)
				if want := name != tc.evicted; ok != want {
					t.Errorf("Author(%s) hit = %v; want %v", name, ok, want)
				}
			}
		})
	}
}

func TestLastRecordWins(t *testing.T) {
	s, _, _ := newTestStore(t, StoreConfig{})
	s.Record(Change{"UPDATE", configMap, "team-a", "app", []byte("data: 1\n")}, alice)
	s.Record(Change{"UPDATE", configMap, "team-a", "app", []byte("data: 1\n")}, bob)
	want := gitops.Signature{Name: "bob@example.com", Email: "bob@example.com"}
	if got, ok := s.Author("UPDATE", configMap, "team-a", "app", []byte("data: 1\n")); !ok || got.Author != want {
		t.Errorf("Author = %+v, %v; want %+v, true", got, ok, want)
	}
}

func TestRecordWithoutUsernameIsIgnored(t *testing.T) {
	s, _, _ := newTestStore(t, StoreConfig{})
	s.Record(Change{"DELETE", configMap, "team-a", "app", nil}, authenticationv1.UserInfo{})
	if s.Len() != 0 {
		t.Errorf("Len = %d; want 0", s.Len())
	}
}

// Run with -race: the admission handler records and the watch looks up from many goroutines.
func TestStoreIsSafeForConcurrentUse(t *testing.T) {
	s, m, _ := newTestStore(t, StoreConfig{})
	const workers, each = 4, 200
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range each {
				name := fmt.Sprintf("cm-%d-%d", w, i)
				s.Record(Change{"CREATE", configMap, "team-a", name, []byte(name)}, alice)
				s.Author("CREATE", configMap, "team-a", name, []byte(name))
			}
		})
	}
	wg.Wait()
	if hits := testutil.ToFloat64(m.EnrichHits); hits != workers*each {
		t.Errorf("enrich hits = %v; want %d", hits, workers*each)
	}
}

func TestAuthorSignatureFromUserInfo(t *testing.T) {
	cases := []struct {
		name string
		user authenticationv1.UserInfo
		want gitops.Signature
	}{
		{"plain user gets a derived address",
			authenticationv1.UserInfo{Username: "alice"},
			gitops.Signature{Name: "alice", Email: "alice@users.noreply.configbutler.ai"}},
		{"service account colons become dots",
			authenticationv1.UserInfo{Username: "system:serviceaccount:ns:name"},
			gitops.Signature{Name: "system:serviceaccount:ns:name", Email: "system.serviceaccount.ns.name@users.noreply.configbutler.ai"}},
		{"spaces and non-ASCII become dots",
			authenticationv1.UserInfo{Username: "Zoë O'Neil"},
			gitops.Signature{Name: "Zoë O'Neil", Email: "Zo..O.Neil@users.noreply.configbutler.ai"}},
		{"username that is an address is the address",
			authenticationv1.UserInfo{Username: "carol@example.com"},
			gitops.Signature{Name: "carol@example.com", Email: "carol@example.com"}},
		{"email extra wins",
			authenticationv1.UserInfo{Username: "oidc:dave", Extra: map[string]authenticationv1.ExtraValue{"email": {"dave@example.com", "d@example.com"}}},
			gitops.Signature{Name: "oidc:dave", Email: "dave@example.com"}},
		{"mail extra is used too",
			authenticationv1.UserInfo{Username: "erin@corp", Extra: map[string]authenticationv1.ExtraValue{"mail": {"erin@example.com"}}},
			gitops.Signature{Name: "erin@corp", Email: "erin@example.com"}},
		{"empty extra falls through",
			authenticationv1.UserInfo{Username: "frank", Extra: map[string]authenticationv1.ExtraValue{"email": {""}}},
			gitops.Signature{Name: "frank", Email: "frank@users.noreply.configbutler.ai"}},
		{"no username is no one", authenticationv1.UserInfo{}, gitops.Signature{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := signatureOf(tc.user); got != tc.want {
				t.Errorf("signatureOf = %+v; want %+v", got, tc.want)
			}
		})
	}
}
