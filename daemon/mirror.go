package daemon

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/configbutler/gitops-reverser/gitops"
	"github.com/configbutler/gitops-reverser/gitsecrets"
	"github.com/configbutler/gitops-reverser/kube"
	"github.com/configbutler/gitops-reverser/shard"
	"github.com/configbutler/gitops-reverser/watch"
)

// controllerName names the daemon in commits and Events.
const controllerName = "gitops-reverser"

// mirror is the cluster → Git flow: the watch manager feeding the pool of Git workers.
type mirror struct {
	pool    *gitops.Pool
	repos   *gitsecrets.Repositories // reads the repositories' Secrets for the pool
	manager *watch.Manager
	changes watch.Changes // tells the manager to reconcile: the pool's, the Secrets' or the shards' state moved
	// ours tells the daemon's own commits from people's, by the trailers it writes.
	ours func(message string) bool
}

// mirrorDeps connect the mirror to the parts beside it; any may be nil.
type mirrorDeps struct {
	authors   watch.Authors                            // who made each change
	onWatched func(context.Context, []watch.Selection) // the watched resources changed
	fences    gitops.Fences                            // may this replica push now; nil without leader election
	shards    *shard.Set                               // the shards this replica owns; nil without --shards=auto
	writable  <-chan struct{}                          // closed once the mirror may write files
	sealer    watch.Sealer                             // encrypts Secrets
	// clusterAuthors and clusterAttribution are attribution on RemoteClusters; nil without the webhook.
	clusterAuthors     func(cluster string) watch.Authors
	clusterAttribution func(cluster string, lastEvent int64) (string, string)
}

// newMirror builds the mirror: the pool of Git workers, the reader of their Secrets and the watch
// manager that tells both what the configuration asks for. The pool and the Secrets tell the
// manager that their state moved through a Changes made before any of them.
func newMirror(ctx context.Context, s shared, cfg MirrorConfig, d mirrorDeps) (*mirror, error) {
	identity, err := gitIdentity(ctx, s)
	if err != nil {
		return nil, err
	}
	changes := watch.NewChanges()
	mr := &mirror{ours: ownCommits(identity), changes: changes}
	mr.pool = gitops.NewPool(gitops.PoolConfig{
		WorkDir: s.workDir, Limits: cfg.Batch, Identity: identity,
		MaxWorkers: cfg.MaxWorkers, MaxWorkersPerRepo: cfg.MaxWorkersPerRepo,
		Metrics: s.reg.Mirror, Log: s.log, OnChange: changes.Notify, Fences: d.fences,
		Deliveries: deliveries(s.reg.Requests), Ours: mr.ours, RequestPoll: cfg.RequestPoll,
	})
	mr.repos = gitsecrets.New(gitsecrets.Config{
		Dynamic: s.dyn, Pool: mr.pool, WorkDir: s.workDir, Log: s.log, OnChange: changes.Notify,
		SigningKeysInvalid: s.reg.Mirror.SigningKeysInvalid,
	})
	mr.pool.OnRemoteWorks(mr.repos.RemoteWorks) // a push that works proves the remote
	opts := watch.Options{
		Expand:                watch.ExpandOptions{WatchAll: cfg.WatchAll, Exclude: cfg.DiscoveryExclude},
		DiscoveryRefresh:      cfg.DiscoveryRefresh,
		Pool:                  mr.pool,
		Repos:                 mr.repos,
		Metrics:               s.reg.Mirror,
		Requests:              s.reg.Requests,
		Log:                   s.log,
		Authors:               d.authors,
		OnWatched:             d.onWatched,
		Sealer:                d.sealer,
		Changes:               changes,
		Writable:              d.writable,
		CrossNamespaceRefs:    cfg.CrossNamespace,
		DefaultServiceAccount: cfg.DefaultSA,
		Remote:                cfg.Remote,
		ClusterAuthors:        d.clusterAuthors,
		ClusterAttribution:    d.clusterAttribution,
	}
	if d.shards != nil {
		opts.Shards = d.shards
	}
	if mr.manager, err = watch.NewManager(s.kube, opts); err != nil {
		return nil, err
	}
	return mr, nil
}

// Run runs the mirror until ctx ends. The watchers stop first; then the workers make a last
// push of everything the watchers handed them, and the Secret watches stop.
func (mr *mirror) Run(ctx context.Context) error {
	poolCtx, stopPool := context.WithCancel(context.WithoutCancel(ctx))
	defer stopPool()
	poolDone, reposDone := make(chan error, 1), make(chan error, 1)
	go func() { poolDone <- mr.pool.Run(poolCtx) }()
	go func() { reposDone <- mr.repos.Run(poolCtx) }()
	err := mr.manager.Run(ctx)
	stopPool()
	return errors.Join(err, <-poolDone, <-reposDone)
}

// ownCommits recognises the commits of this daemon in this cluster: their messages carry its
// cluster, namespace and name trailers (the instance trailer changes with every start).
func ownCommits(id gitops.Identity) func(message string) bool {
	var lines []string
	for _, t := range id.Trailers {
		if t[0] != trailerInstanceID {
			lines = append(lines, t[0]+": "+t[1])
		}
	}
	return func(message string) bool {
		for _, l := range lines {
			if !hasLine(message, l) {
				return false
			}
		}
		return len(lines) > 0
	}
}

func hasLine(text, line string) bool {
	for rest := text; rest != ""; {
		var l string
		l, rest, _ = strings.Cut(rest, "\n")
		if strings.TrimSpace(l) == line {
			return true
		}
	}
	return false
}

const trailerInstanceID = "X-ConfigButler-InstanceID"

// gitIdentity is the committer and the trailers of every commit. The cluster is identified by the
// UID of its kube-system namespace, which is stable for the life of the cluster.
func gitIdentity(ctx context.Context, s shared) (gitops.Identity, error) {
	ns, err := kube.For(s.dyn, kube.Namespaces, "").Get(ctx, "kube-system", metav1.GetOptions{})
	if err != nil {
		return gitops.Identity{}, fmt.Errorf("read the cluster's identity (namespace kube-system): %w", err)
	}
	host, _ := os.Hostname()
	suffix := make([]byte, 3)
	_, _ = rand.Read(suffix)
	return gitops.Identity{
		Committer: s.bot,
		Bot:       s.bot,
		Trailers: [][2]string{
			{"X-ConfigButler-ClusterUID", string(ns.UID)},
			{"X-ConfigButler-ControllerNS", s.namespace},
			{"X-ConfigButler-ControllerName", controllerName},
			{trailerInstanceID, host + "-" + hex.EncodeToString(suffix)},
		},
	}, nil
}
