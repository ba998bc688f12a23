// Package shard shares the daemon's Git work out across its replicas. Each (repository, branch) is
// a shard, owned by one replica through a coordination.k8s.io Lease of its own; every replica
// holds a membership Lease that says it is alive and where its peers reach it. A replica takes a
// fair share of the shards, ceil(shards / live replicas), hands the ones over it has too many of
// (after its last push of them), takes those whose owner's Lease expired, and gives every one up
// when it stops. Pushes and applies are fenced per shard: a replica acts on a shard only while it
// renewed that shard's Lease in time.
package shard

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"hash/fnv"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"

	"github.com/configbutler/gitops-reverser/kube"
	"github.com/configbutler/gitops-reverser/lease"
	"github.com/configbutler/gitops-reverser/metrics"
)

// Labels and annotations of the set's Leases.
const (
	LabelSet         = "configbutler.ai/shards"       // on every Lease of a set; the value is its Prefix
	labelRole        = "configbutler.ai/shard-role"   // member or shard
	annotationPeer   = "configbutler.ai/peer-address" // on a member's Lease: where its peers reach it
	annotationRepo   = "configbutler.ai/repository"   // on a shard's Lease: what it guards
	annotationBranch = "configbutler.ai/branch"
	roleMember       = "member"
	roleShard        = "shard"
)

// drainTimeout bounds the wait for the last push of a shard handed over; after it the Lease is
// released anyway, and the new owner's seed writes whatever was not pushed.
const drainTimeout = 30 * time.Second

// Key is a shard: a branch of a repository, as the pool keys its workers.
type Key struct{ URL, Branch string }

func (k Key) String() string { return k.URL + "@" + k.Branch }

// Config is what a Set needs. Drain, OnChange, Metrics and Log may be nil.
type Config struct {
	Leases *kube.Client[coordinationv1.Lease] // of the daemon's namespace
	// Prefix names the set's Leases (Prefix-member-…, Prefix-shard-…) and labels them.
	Prefix   string
	Identity string // this replica, as the Leases name their holder
	Address  string // where peers reach this replica ("host:port"), "" for nowhere
	Timings  lease.Timings
	// Drain returns once this replica made its last push of a shard it no longer owns (or ctx
	// ended); the shard's Lease is released only then.
	Drain func(ctx context.Context, k Key)
	// OnChange is told, without blocking, whenever the shards this replica owns changed.
	OnChange func()
	Metrics  *metrics.Shards
	Log      *slog.Logger
}

// Set is this replica's part of the sharing. Its methods are safe from any goroutine.
type Set struct {
	cfg        Config
	memberName string
	poke       chan struct{}

	mu     sync.Mutex
	want   map[Key]bool
	terms  map[Key]*term
	leases map[string]seen // every Lease of the set by name, as last seen to change
}

// seen is a Lease of the set as this replica last saw it change.
type seen struct {
	lease.Record
	role, peer string
}

// term is this replica's candidacy for one shard's Lease, and then its hold of it.
type term struct {
	key     Key
	fence   *lease.Fence
	cancel  context.CancelFunc
	done    chan struct{}
	leading bool // it holds the Lease
	leaving bool // it is being handed over: not owned, its last push is under way
}

// New makes a Set; Run does the work.
func New(cfg Config) *Set {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.OnChange == nil {
		cfg.OnChange = func() {}
	}
	if cfg.Drain == nil {
		cfg.Drain = func(context.Context, Key) {}
	}
	if cfg.Metrics == nil {
		cfg.Metrics = metrics.New().Shards
	}
	return &Set{
		cfg: cfg, memberName: cfg.Prefix + "-member-" + digest(cfg.Identity), poke: make(chan struct{}, 1),
		want: map[Key]bool{}, terms: map[Key]*term{}, leases: map[string]seen{},
	}
}

// Connect sets what the Set tells the daemon, before Run (nil keeps the default): drain returns once this replica made its
// last push of a shard it no longer owns, onChange is told (without blocking) whenever the shards
// it owns changed. The daemon's parts are built after the Set, from it, so they are connected here.
func (s *Set) Connect(drain func(ctx context.Context, k Key), onChange func()) {
	if drain != nil {
		s.cfg.Drain = drain
	}
	if onChange != nil {
		s.cfg.OnChange = onChange
	}
}

// Want says which shards exist: the daemon's configuration asks for them. It never blocks.
func (s *Set) Want(keys []Key) {
	want := make(map[Key]bool, len(keys))
	for _, k := range keys {
		want[k] = true
	}
	s.mu.Lock()
	changed := len(want) != len(s.want)
	for k := range want {
		changed = changed || !s.want[k]
	}
	s.want = want
	s.mu.Unlock()
	if changed {
		s.wake()
	}
}

// Owns says whether this replica owns the shard: it holds its Lease and is not handing it over.
func (s *Set) Owns(k Key) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.terms[k]
	return t != nil && t.leading && !t.leaving
}

// Fence is the gitops.Fence of a shard: it allows a push (or an apply) while this replica holds
// the shard's Lease, including during the last push of a shard it hands over.
func (s *Set) Fence(k Key) func() (time.Time, error) {
	return func() (time.Time, error) {
		s.mu.Lock()
		t := s.terms[k]
		s.mu.Unlock()
		if t == nil {
			return time.Time{}, &NotOwnedError{Key: k, Owner: s.Owner(k)}
		}
		return t.fence.Check()
	}
}

// Owner is the replica that holds the shard's Lease, as last seen; "" when nobody does.
func (s *Set) Owner(k Key) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r, ok := s.leases[s.shardName(k)]; ok && r.Valid(time.Now()) {
		return lease.HolderOf(r.Spec)
	}
	return ""
}

// Identity is this replica's name in the Leases.
func (s *Set) Identity() string { return s.cfg.Identity }

// Peers are the addresses of the other live replicas.
func (s *Set) Peers() []string {
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for name, r := range s.leases {
		if r.role == roleMember && name != s.memberName && r.peer != "" && r.Valid(now) {
			out = append(out, r.peer)
		}
	}
	slices.Sort(out)
	return out
}

// Status is what /readyz says of the set.
type Status struct {
	Owned   []Key // the shards this replica owns, in order
	Shards  int   // the shards there are
	Members int   // the live replicas, this one included
}

// Status is a snapshot of the set.
func (s *Set) Status() Status {
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	st := Status{Shards: len(s.want), Members: s.liveMembers(now)}
	for k, t := range s.terms {
		if t.leading && !t.leaving {
			st.Owned = append(st.Owned, k)
		}
	}
	slices.SortFunc(st.Owned, compareKeys)
	return st
}

func compareKeys(a, b Key) int {
	return cmp.Or(strings.Compare(a.URL, b.URL), strings.Compare(a.Branch, b.Branch))
}

// NotOwnedError is why a push or an apply of a shard was refused: this replica does not hold it.
type NotOwnedError struct {
	Key   Key
	Owner string // the replica that does, "" if none is known
}

func (e *NotOwnedError) Error() string {
	owner := e.Owner
	if owner == "" {
		owner = "no replica yet"
	}
	return "this replica does not own shard " + e.Key.String() + " (its owner is " + owner + ")"
}

func (s *Set) wake() {
	select {
	case s.poke <- struct{}{}:
	default:
	}
}

// shardName is the name of a shard's Lease: the prefix and a digest of the key, which is too long
// and has characters a name may not.
func (s *Set) shardName(k Key) string { return s.cfg.Prefix + "-shard-" + digest(k.String()) }

// digest is a short, name-safe digest of s.
func digest(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:5])
}

// rank orders the shards differently for every replica (rendezvous hashing), so replicas that
// look for free shards at the same moment mostly try different ones.
func (s *Set) rank(k Key) uint64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(s.cfg.Identity + "\x00" + k.String()))
	return h.Sum64()
}
