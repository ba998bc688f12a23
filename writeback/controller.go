package writeback

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/configbutler/gitops-reverser/controller"
	"github.com/configbutler/gitops-reverser/crds"
	"github.com/configbutler/gitops-reverser/gitedits"
	"github.com/configbutler/gitops-reverser/gitops"
	"github.com/configbutler/gitops-reverser/metrics"
)

// Git is what write-back needs of the Git workers (gitops.Pool): their clones, read through
// gitedits, and the holds.
type Git interface {
	gitedits.Git
	Hold(url, branch, path string)
	Release(url, branch, path string, restore *gitops.Change)
}

// Approvers tells who set a proposal's spec.decision to decision, as the apiserver authenticated
// them; the admission webhook records it. False when nobody is known (the webhook was down).
type Approvers func(uid types.UID, decision string) (authenticationv1.UserInfo, bool)

// Defaults of Config.
const (
	DefaultInterval          = 5 * time.Minute
	MinInterval              = 10 * time.Second
	DefaultMaxPerTick        = 25
	DefaultRetention         = 90 * 24 * time.Hour
	DefaultFailedRetention   = 365 * 24 * time.Hour
	DefaultProposalRetention = 30 * 24 * time.Hour // once a proposal ended: Applied, Rejected, Stale or Superseded
	defaultOperationDeadline = 2 * time.Minute
	// receiverSpacing is the least time between the starts of two runs a webhook triggers.
	receiverSpacing = time.Second
	// Client-side rate limit of write-back's API requests (one proposal takes about eight).
	clientQPS   = 50
	clientBurst = 100
)

// Config is everything the controller needs. Approvers, Credits, Fences, Owns, Metrics and Log may be nil.
type Config struct {
	Kube *rest.Config
	Git  Git
	// Selections says what a destination ("namespace/name") selects: a Git file of any other
	// resource, or outside a WatchRule's namespace, is refused.
	Selections func(destination string) []Selection
	Approvers  Approvers
	Credits    *Credits
	// Ours tells the daemon's own commits (by their trailers) from people's.
	Ours       func(message string) bool
	Interval   time.Duration // between fetches of a destination; at least MinInterval
	MaxPerTick int           // proposals opened per reconcile
	// Halt stops every apply, automatic or approved; proposals are still opened.
	Halt                       bool
	Retention, FailedRetention time.Duration // of SyncRuns: success / failed and partial
	Metrics                    *metrics.WriteBack
	Log                        *slog.Logger
	// ProposalRetention is how long a proposal is kept once it ended (Applied, Rejected, Stale,
	// Superseded).
	ProposalRetention time.Duration
	// Fences, when set, gives the Fence asked just before every apply and delete whether this
	// replica may still change the cluster for a destination's branch (it holds the leader Lease,
	// or the branch's shard); nil means always. A refused apply is not made and its proposal keeps
	// its decision, for the replica that holds the Lease now.
	Fences gitops.Fences
	// Owns says whether this replica does the write-back of a repository's branch (it owns the
	// branch's shard); nil means every branch. The others are left to their owners.
	Owns func(url, branch string) bool
	// SealKey reads (or creates) the key of the seals that prove a Proposal was opened by the
	// daemon; every replica must get the same. Required.
	SealKey func(ctx context.Context) ([]byte, error)
	// Self is the daemon's own user: never counted as an approver.
	Self string
	// Approval, when set, is the daemon's admission policies that stamp approvers; nil when there
	// are none (--approver-policy=none): approvers are then known from the webhook alone.
	Approval *Approval
	// Mirror renders what the mirror writes for an object (watch.Manager): a proposal that ends
	// unapplied hands back to it only that. Nil restores nothing.
	Mirror Mirror
	// Cluster is the connection to the RemoteCluster a destination's spec.clusterRef names (the
	// kubeconfig's identity, which write-back copies and never changes), once the mirror admitted
	// the destination to it and connected; an error says why not. Write-back reads, asks the
	// approver's rights and applies there, never on the daemon's own cluster. Nil: destinations
	// of a RemoteCluster are not written back (their proposals wait).
	Cluster func(destination *crds.GitDestination) (*rest.Config, error)
}

// Approval is how the daemon's admission policies vouch for approvers.
type Approval struct {
	// Namespace holds their record, the ConfigMap crds.ApproverPolicyName: the daemon's.
	Namespace string
	// Resources are the policy kinds the apiserver serves, watched so that a deletion or a change
	// is seen at once.
	Resources []schema.GroupVersionResource
	// Reinstall puts the policies back as the daemon installs them, drawing a new epoch; nil
	// when the daemon does not install them.
	Reinstall func(ctx context.Context) error
}

// Mirror is what write-back needs of the mirror (watch.Manager).
type Mirror interface {
	// Render is the change the mirror makes for an object in a destination, through its own
	// rules; ok is false when it writes nothing for it.
	Render(destination string, gvr schema.GroupVersionResource, namespace, name string, live *unstructured.Unstructured) (gitops.Change, bool, error)
	// Admits reports whether a destination may use a GitRepoConfig ("namespace/name" both), as
	// the mirror last decided it (spec.accessPolicy); known is false while it has not.
	Admits(destination, repo string) (admitted, known bool)
}

// Controller runs write-back for every GitDestination that enables it. It always follows the
// GitDestinations; it caches GitRepoConfigs and Proposals only while one of them enables
// write-back, so a mirror without write-back pays nothing for it.
type Controller struct {
	cfg      Config
	dyn      dynamic.Interface // the daemon's own cluster, where Proposals, SyncRuns and statuses live
	own      *cluster          // the objects of destinations without spec.clusterRef
	remotes  remoteClusters    // those of destinations of a RemoteCluster
	writers  *writerClients    // every write to a cluster for a proposal goes through one
	ctl      *controller.Controller
	recorder *controller.Events
	dests    cache.SharedIndexInformer
	caches   *controller.Group // GitRepoConfigs and Proposals

	mu        sync.Mutex
	triggers  map[string]trigger   // why each queued destination runs next
	known     map[string]bool      // write-back destinations seen, to run each once at start
	requested map[string]string    // the sync-now value last queued, per destination
	started   map[string]time.Time // when each destination's last run started
	waits     map[string]int       // runs in a row that found no Git worker yet, per destination
	source    approvalSource       // how approvers are known, as last seen
	idle      map[string]time.Time // when each destination's last idle run was recorded, by clock

	clock  func() time.Time // time.Now; a test's own clock
	fenced atomic.Bool      // the last apply was fenced: said once, and again when applies resume
	key    atomic.Pointer[[]byte]
	epoch  atomic.Pointer[string] // of the admission policies, as last checked
}

// trigger is why a destination is reconciled; value is the sync-now annotation it answers.
type trigger struct{ kind, value string }

// New builds the controller; Run does the work.
func New(cfg Config) (*Controller, error) {
	cfg = withDefaults(cfg)
	kubeCfg := rest.CopyConfig(cfg.Kube)
	if kubeCfg.QPS == 0 { // client-go's default of 5 requests/s would make a 25-proposal run take 40 s
		kubeCfg.QPS, kubeCfg.Burst = clientQPS, clientBurst
	}
	dyn, err := dynamic.NewForConfig(kubeCfg)
	if err != nil {
		return nil, fmt.Errorf("build dynamic client: %w", err)
	}
	writers := &writerClients{clients: map[writerKey]dynamic.Interface{}}
	c := &Controller{
		cfg: cfg, dyn: dyn,
		own:       &cluster{config: kubeCfg, dyn: dyn, writers: writers},
		remotes:   remoteClusters{byConfig: map[*rest.Config]*cluster{}},
		writers:   writers,
		triggers:  map[string]trigger{},
		known:     map[string]bool{},
		requested: map[string]string{},
		started:   map[string]time.Time{},
		waits:     map[string]int{},
		idle:      map[string]time.Time{},
		clock:     time.Now,
	}
	c.ctl = controller.New(controller.Config{
		Name: "write-back", Dynamic: dyn, Events: dyn, Handle: c.handle,
		BaseDelay: time.Second, MaxDelay: 5 * time.Minute, Log: cfg.Log,
	})
	c.recorder = c.ctl.Recorder()
	if c.dests, err = c.ctl.Informer(crds.GitDestinations, func(obj any) string {
		if k := controller.ObjectKey(obj); k != "" {
			return seenKeyPrefix + k
		}
		return ""
	}); err != nil {
		return nil, err
	}
	c.caches = c.ctl.Group()
	c.caches.Informer(crds.GitRepoConfigs, func(any) string { return "" }, nil)
	c.caches.Informer(crds.Proposals, c.proposalKey, cache.Indexers{pathIndex: indexByPath, destinationIndex: indexByDestination})
	if cfg.Approval != nil {
		for _, gvr := range cfg.Approval.Resources {
			c.caches.Informer(gvr, policyKey, nil)
		}
	}
	return c, nil
}

func withDefaults(cfg Config) Config {
	if cfg.Interval == 0 {
		cfg.Interval = DefaultInterval
	}
	cfg.Interval = max(cfg.Interval, MinInterval)
	if cfg.MaxPerTick <= 0 {
		cfg.MaxPerTick = DefaultMaxPerTick
	}
	if cfg.Retention <= 0 {
		cfg.Retention = DefaultRetention
	}
	if cfg.FailedRetention <= 0 {
		cfg.FailedRetention = DefaultFailedRetention
	}
	if cfg.ProposalRetention <= 0 {
		cfg.ProposalRetention = DefaultProposalRetention
	}
	if cfg.Credits == nil {
		cfg.Credits = NewCredits()
	}
	if cfg.Metrics == nil {
		cfg.Metrics = metrics.New().WriteBack
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.Ours == nil {
		cfg.Ours = func(string) bool { return false }
	}
	if cfg.Selections == nil {
		cfg.Selections = func(string) []Selection { return nil }
	}
	if cfg.SealKey == nil {
		cfg.SealKey = func(context.Context) ([]byte, error) { return nil, errors.New("no key configured") }
	}
	return cfg
}

// Run reconciles until ctx ends: every write-back destination once at start, then on its
// interval, on the sync-now annotation and on SyncNow; every proposal whose decision changes.
// It returns once everything it started has stopped.
func (c *Controller) Run(ctx context.Context) error { return c.ctl.Run(ctx) }

// Caching reports whether the caches of GitRepoConfigs and Proposals run: only while some
// GitDestination enables write-back.
func (c *Controller) Caching() bool { return c.caches.Running() }

// Recorder records the controller's Events (proposals, SyncRuns); notifications tap it.
func (c *Controller) Recorder() *controller.Events { return c.recorder }
