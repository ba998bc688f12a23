package receiver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/configbutler/gitops-reverser/controller"
	"github.com/configbutler/gitops-reverser/crds"
)

// Timing of the controller.
const (
	// ResyncInterval is how often every Receiver is resolved again even when nothing changed:
	// Secrets are read with a GET, not watched, so a rotated token is picked up by then.
	ResyncInterval = 30 * time.Second
	// ObserveInterval is the least time between two writes of one Receiver's last event.
	ObserveInterval = time.Second

	syncKey          = "sync"
	observeKeyPrefix = "o/"
)

// ControllerConfig is what the controller needs. Log may be nil.
type ControllerConfig struct {
	Kube  *rest.Config
	Index *Index // the controller Sets it after every change
	Log   *slog.Logger
	// Namespace is the daemon's own namespace, the only one where it may read and create
	// Secrets: a GitRepoConfig elsewhere asking for a generated Receiver is skipped (with a
	// Warning Event). Empty allows every namespace (tests).
	Namespace string
	// Resync is how often every Receiver is resolved again; ResyncInterval when zero.
	Resync time.Duration
}

// Controller resolves Receivers into the Index, reports their status, and generates a Receiver
// (with its token Secret) for every GitRepoConfig with spec.receiver.
type Controller struct {
	cfg       ControllerConfig
	dyn       dynamic.Interface
	ctl       *controller.Controller
	recorder  *controller.Events
	receivers cache.SharedIndexInformer
	dests     cache.SharedIndexInformer
	repos     cache.SharedIndexInformer

	mu       sync.Mutex
	observed map[string]*observation // last events not written yet, or written last, per Receiver
	byRepo   map[string][]string     // normalised repository → Receiver keys
	warned   map[types.UID]bool      // GitRepoConfigs told their receiver is not generated
	written  map[string]written      // the status last written per Receiver, until the cache has it
}

// NewController builds the controller; Run does the work.
func NewController(cfg ControllerConfig) (*Controller, error) {
	if cfg.Kube == nil || cfg.Index == nil {
		return nil, errors.New("receiver controller: Kube and Index are required")
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.Resync <= 0 {
		cfg.Resync = ResyncInterval
	}
	dyn, err := dynamic.NewForConfig(cfg.Kube)
	if err != nil {
		return nil, fmt.Errorf("build dynamic client: %w", err)
	}
	c := &Controller{
		cfg: cfg, dyn: dyn,
		observed: map[string]*observation{},
		written:  map[string]written{},
	}
	c.ctl = controller.New(controller.Config{
		Name: "receivers", Dynamic: dyn, Events: dyn, Handle: c.handle,
		BaseDelay: 100 * time.Millisecond, MaxDelay: 30 * time.Second, Log: cfg.Log,
	})
	c.recorder = c.ctl.Recorder()
	// Any change of a Receiver, GitDestination or GitRepoConfig resolves them all again.
	changed := func(any) string { return syncKey }
	for _, inf := range []struct {
		gvr schema.GroupVersionResource
		to  *cache.SharedIndexInformer
	}{{crds.Receivers, &c.receivers}, {crds.GitDestinations, &c.dests}, {crds.GitRepoConfigs, &c.repos}} {
		if *inf.to, err = c.ctl.Informer(inf.gvr, changed); err != nil {
			return nil, err
		}
	}
	c.ctl.Add(syncKey) // at start
	return c, nil
}

// Run resolves Receivers until ctx ends: at start, on every change of a Receiver, GitDestination
// or GitRepoConfig, and every Resync. It returns once everything it started has stopped.
func (c *Controller) Run(ctx context.Context) error { return c.ctl.Run(ctx) }

// handle resolves every Receiver again (and schedules the next Resync), or writes the last event
// observed of one.
func (c *Controller) handle(ctx context.Context, key string) (time.Duration, error) {
	if key == syncKey {
		return c.cfg.Resync, c.sync(ctx)
	}
	return 0, c.writeObserved(ctx, strings.TrimPrefix(key, observeKeyPrefix))
}

// sync generates the Receivers GitRepoConfigs ask for, then rebuilds the index and writes every
// Receiver's status that changed. An error (a failed write) retries the whole sync.
func (c *Controller) sync(ctx context.Context) error {
	genErr := c.generate(ctx)
	resolved := c.resolveAll(ctx)
	byPath := make(map[string]*Entry, len(resolved))
	for _, r := range resolved {
		if r.path != "" {
			byPath[r.path] = r.entry
		}
	}
	c.cfg.Index.Set(byPath)
	c.indexRepositories(resolved)
	statusErr := c.writeStatuses(ctx, resolved)
	return errors.Join(genErr, statusErr)
}

// Recorder records the Receivers' Events; notifications tap it.
func (c *Controller) Recorder() *controller.Events { return c.recorder }
