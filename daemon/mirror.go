package daemon

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"

	"github.com/configbutler/gitops-reverser/gitops"
	"github.com/configbutler/gitops-reverser/gitsecrets"
	"github.com/configbutler/gitops-reverser/metrics"
	"github.com/configbutler/gitops-reverser/watch"
)

// controllerName names the daemon in commits and Events.
const controllerName = "gitops-reverser"

// mirror is the cluster → Git flow: the watch manager feeding the pool of Git workers.
type mirror struct {
	pool    *gitops.Pool
	repos   *gitsecrets.Repositories // reads the repositories' Secrets for the pool
	manager *watch.Manager
	// ours tells the daemon's own commits from people's, by the trailers it writes.
	ours func(message string) bool
}

// mirrorHooks connect the mirror to the optional parts beside it; any may be nil.
type mirrorHooks struct {
	authors      watch.Authors                            // who made each change
	onWatched    func(context.Context, []watch.Selection) // the watched resources changed
	onHeldChange func(url, branch, path string)           // the mirror wanted to write a file a proposal holds
	fence        gitops.Fence                             // may this replica push now; nil without leader election
	writable     <-chan struct{}                          // closed once the mirror may write files
}

// newMirror builds the mirror from the configuration. The pool gets the Git settings directly;
// the manager tells it which repositories and branches the configuration asks for.
func newMirror(ctx context.Context, cfg Config, kube *rest.Config, core corev1client.CoreV1Interface, m *metrics.Mirror, hooks mirrorHooks, log *slog.Logger) (*mirror, error) {
	identity, err := gitIdentity(ctx, cfg, core)
	if err != nil {
		return nil, err
	}
	mr := &mirror{ours: ownCommits(identity)}
	mr.pool = gitops.NewPool(gitops.PoolConfig{
		WorkDir: cfg.WorkDir,
		Limits: gitops.BatchLimits{
			MaxFiles: cfg.BatchMaxFiles, MaxBytes: cfg.BatchMaxBytes, MaxWait: cfg.BatchMaxWait, Quiet: cfg.BatchQuiet,
		},
		Identity:   identity,
		MaxWorkers: cfg.WorkersMaxGlobal, MaxWorkersPerRepo: cfg.WorkersMaxPerRepo,
		Metrics:      m,
		Log:          log,
		OnChange:     func() { mr.manager.Changed() },
		OnHeldChange: hooks.onHeldChange,
		Fence:        hooks.fence,

		OnRemoteWorks: func(url string) { mr.repos.RemoteWorks(url) }, // a push that works proves the remote
	})
	mr.repos = gitsecrets.New(gitsecrets.Config{
		Secrets: core, Pool: mr.pool, WorkDir: cfg.WorkDir, Log: log,
		OnChange: func() { mr.manager.Changed() },
	})
	opts := watch.Options{
		Expand:           watch.ExpandOptions{WatchAll: cfg.WatchAll, Exclude: cfg.DiscoveryExclude},
		DiscoveryRefresh: cfg.DiscoveryRefresh,
		Pool:             mr.pool,
		Repos:            mr.repos,
		Metrics:          m,
		Log:              log,
		Authors:          hooks.authors,
		OnWatched:        hooks.onWatched,
		Sealer:           newSealer(cfg, core),
		Writable:         hooks.writable,
	}
	if mr.manager, err = watch.NewManager(kube, opts); err != nil {
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
func gitIdentity(ctx context.Context, cfg Config, core corev1client.CoreV1Interface) (gitops.Identity, error) {
	ns, err := core.Namespaces().Get(ctx, "kube-system", metav1.GetOptions{})
	if err != nil {
		return gitops.Identity{}, fmt.Errorf("read the cluster's identity (namespace kube-system): %w", err)
	}
	host, _ := os.Hostname()
	suffix := make([]byte, 3)
	_, _ = rand.Read(suffix)
	return gitops.Identity{
		Committer: cfg.Bot,
		Bot:       cfg.Bot,
		Trailers: [][2]string{
			{"X-ConfigButler-ClusterUID", string(ns.UID)},
			{"X-ConfigButler-ControllerNS", cfg.Namespace},
			{"X-ConfigButler-ControllerName", controllerName},
			{trailerInstanceID, host + "-" + hex.EncodeToString(suffix)},
		},
	}, nil
}
