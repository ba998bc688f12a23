package notify

import (
	"context"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/cache"

	"github.com/configbutler/gitops-reverser/controller"
	"github.com/configbutler/gitops-reverser/crds"
	"github.com/configbutler/gitops-reverser/metrics"
)

// DefaultPushFailingAfter is how long the daemon holds a push failure before telling it.
const DefaultPushFailingAfter = 2 * time.Minute

// Bounds of the notifier.
const (
	// intakeSize is how many Events wait to be matched against the rules; beyond, they are dropped
	// (counted), so recording an Event never waits for notifications.
	intakeSize = 1024
	// statusEvery is how often a channel's status is written while it sends.
	statusEvery = 5 * time.Second
	// secretRecheck is how often a channel's Secret is read again (a rotated address or key).
	secretRecheck = time.Minute
)

// Config is what a Notifier needs.
type Config struct {
	Dynamic dynamic.Interface
	// Home is the daemon's namespace: its rules read the Events of cluster-scoped objects.
	Home string
	// PageURL is the operator page as people reach it; notices link to it when set.
	PageURL string
	// Consent says whether a GitDestination admits a rule's namespace (its spec.accessPolicy).
	Consent Consent
	// Client sends every message; each send has the channel's own timeout. nil: a default client.
	Client *http.Client
	// PushFailingAfter holds an Event of a destination's pushes failing this long, and tells it
	// only if the destination still fails so then: a push retried into success is not news.
	// 0 tells it at once.
	PushFailingAfter time.Duration
	// Statuses opens the Git host API of a commitstatus channel.
	Statuses StatusHosts
	Metrics  *metrics.Notify
	Log      *slog.Logger
}

// Notifier matches the daemon's Events against the NotifyRules and sends what they select to
// their NotifyChannels. Offer takes Events; Run does the rest.
type Notifier struct {
	cfg    Config
	ctl    *controller.Controller
	intake chan *corev1.Event
	enrich enricher
	seen   *dedupe

	channels, rules cache.SharedIndexInformer
	compiled        atomic.Pointer[[]*rule] // every Ready rule, rebuilt on each rule's change

	mu       sync.Mutex
	outboxes map[string]*running  // by namespace/name of the NotifyChannel
	matched  map[string]time.Time // when each rule (namespace/name) last matched
	reported map[string]time.Time // the match each rule's status last said
	runCtx   context.Context      // Run's, for the outboxes it starts
	wg       sync.WaitGroup
}

// running is an outbox and what it was built from.
type running struct {
	box     *outbox
	version string // of the spec and Secret it was built from
	cancel  context.CancelFunc
}

// New builds a notifier; it starts nothing.
func New(cfg Config) (*Notifier, error) {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.Client == nil {
		cfg.Client = &http.Client{}
	}
	n := &Notifier{
		cfg: cfg, intake: make(chan *corev1.Event, intakeSize), seen: newDedupe(),
		enrich: enricher{dyn: cfg.Dynamic, pageURL: cfg.PageURL}, outboxes: map[string]*running{},
		matched: map[string]time.Time{}, reported: map[string]time.Time{},
	}
	n.ctl = controller.New(controller.Config{Name: "notify", Dynamic: cfg.Dynamic, Events: cfg.Dynamic, Handle: n.handle, Log: cfg.Log})
	var err error
	if n.channels, err = n.ctl.Informer(crds.NotifyChannels, keyOf(kindChannel)); err != nil {
		return nil, err
	}
	if n.rules, err = n.ctl.Informer(crds.NotifyRules, keyOf(kindRule)); err != nil {
		return nil, err
	}
	return n, nil
}

// Offer hands an Event to the notifier without waiting: when the intake is full it is dropped
// and counted. It is controller.Events' tap.
func (n *Notifier) Offer(ev *corev1.Event) {
	select {
	case n.intake <- ev:
	default:
		n.cfg.Metrics.Dropped.WithLabelValues("", metrics.DropIntake).Inc()
	}
}

// Run matches and sends until ctx ends, then stops every channel's goroutine.
func (n *Notifier) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer func() {
		cancel()
		n.wg.Wait()
	}()
	n.mu.Lock()
	n.runCtx = ctx
	n.mu.Unlock()
	n.wg.Go(func() { n.match(ctx) })
	n.wg.Go(func() { n.reportEvery(ctx) })
	return n.ctl.Run(ctx)
}

// match takes each Event from the intake and sends it where the rules say; a push failing is
// held for Config.PushFailingAfter first, and sent only if the destination still fails so.
func (n *Notifier) match(ctx context.Context) {
	var held []heldEvent
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case ev := <-n.intake:
			if rules := n.compiled.Load(); rules == nil || len(*rules) == 0 {
				continue // no rule: nothing to match, nothing to hold
			}
			if !pushFailing(ev) || n.cfg.PushFailingAfter <= 0 {
				n.dispatch(ctx, ev)
				continue
			}
			if len(held) == maxHeld {
				held = held[1:]
				n.cfg.Metrics.Dropped.WithLabelValues("", metrics.DropIntake).Inc()
			}
			held = append(held, heldEvent{ev: ev, due: time.Now().Add(n.cfg.PushFailingAfter)})
			if len(held) == 1 {
				timer.Reset(n.cfg.PushFailingAfter)
			}
		case <-timer.C:
			for len(held) > 0 && !time.Now().Before(held[0].due) {
				if n.stillFailing(ctx, held[0].ev) {
					n.dispatch(ctx, held[0].ev)
				}
				held = held[1:]
			}
			if len(held) > 0 {
				timer.Reset(time.Until(held[0].due))
			}
		}
	}
}

// maxHeld bounds the push failures held at once; past it the oldest is dropped, counted.
const maxHeld = 256

// heldEvent is an Event of a push failing, held until due.
type heldEvent struct {
	ev  *corev1.Event
	due time.Time
}

// pushFailing says whether ev says a destination's pushes fail (PushFailing, or its pull
// request's host refusing: PullRequestUnauthorized, ...): one failure is retried, and is worth
// telling only when it lasts.
func pushFailing(ev *corev1.Event) bool {
	return ev.InvolvedObject.Kind == crds.KindGitDestination && ev.Type == corev1.EventTypeWarning &&
		(ev.Reason == "PushFailing" || strings.HasPrefix(ev.Reason, "PullRequest"))
}

// stillFailing says whether the destination of ev is still not Ready for the reason ev gave.
func (n *Notifier) stillFailing(ctx context.Context, ev *corev1.Event) bool {
	o := ev.InvolvedObject
	d, ok := get[crds.GitDestination](ctx, n.cfg.Dynamic, crds.GitDestinations, o.Namespace, o.Name)
	if !ok {
		return false
	}
	c := meta.FindStatusCondition(d.Status.Conditions, crds.ConditionReady)
	return c != nil && c.Status == metav1.ConditionFalse && c.Reason == ev.Reason
}

// dispatch sends one Event's notice to the channel of every rule that selects it and may see it.
// What the Event does not say is read once, and only when a rule selects it.
func (n *Notifier) dispatch(ctx context.Context, ev *corev1.Event) {
	rules := n.compiled.Load()
	if rules == nil {
		return
	}
	base := noticeOf(ev, n.cfg.Home)
	enriched := false
	for _, r := range *rules {
		if !r.selects(base) {
			continue
		}
		if !enriched {
			n.enrich.enrich(ctx, base)
			enriched = true
		}
		if !r.sees(base, n.cfg.Consent) {
			continue
		}
		n.noteMatch(r.namespace + "/" + r.name)
		box := n.outbox(r.namespace + "/" + r.channel)
		if box == nil || box.typ == crds.ChannelCommitStatus && proposalState(*base) == "" {
			continue // a commit status marks a person's commit with what became of its proposal only
		}
		if !n.seen.first(box.name+"\x00"+base.dedupeKey(), r.window, time.Now()) {
			continue
		}
		out := *base
		out.Summary = r.summary
		box.offer(out)
	}
}

func (n *Notifier) outbox(name string) *outbox {
	n.mu.Lock()
	defer n.mu.Unlock()
	if r := n.outboxes[name]; r != nil {
		return r.box
	}
	return nil
}

// reportEvery queues the status of each channel whose sending changed, every statusEvery.
func (n *Notifier) reportEvery(ctx context.Context) {
	t := time.NewTicker(statusEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			n.mu.Lock()
			for name, r := range n.outboxes {
				if r.box.hasNews() {
					n.ctl.Add(kindStatus + "/" + name)
				}
			}
			n.mu.Unlock()
		}
	}
}

// The kinds of key the controller handles: kind/namespace/name.
const (
	kindChannel = "channel"
	kindStatus  = "status" // a channel's status only: its sending changed
	kindRule    = "rule"
)

func keyOf(kind string) controller.Keys {
	return func(obj any) string {
		if key := controller.ObjectKey(obj); key != "" {
			return kind + "/" + key
		}
		return ""
	}
}

// handle reconciles one channel or rule key.
func (n *Notifier) handle(ctx context.Context, key string) (time.Duration, error) {
	kind, name, _ := strings.Cut(key, "/")
	switch kind {
	case kindChannel:
		return n.reconcileChannel(ctx, name, false)
	case kindStatus:
		return n.reconcileChannel(ctx, name, true)
	case kindRule:
		return 0, n.reconcileRule(ctx, name)
	}
	return 0, nil
}

// matchReported is how stale a rule's status.lastMatchTime may be: a busy rule's status is not
// written for every Event it matches.
const matchReported = time.Minute

// noteMatch records that rule matched now, and queues its status when it says an older match.
func (n *Notifier) noteMatch(rule string) {
	now := time.Now()
	n.mu.Lock()
	n.matched[rule] = now
	stale := now.Sub(n.reported[rule]) >= matchReported
	if stale {
		n.reported[rule] = now
	}
	n.mu.Unlock()
	if stale {
		n.ctl.Add(kindRule + "/" + rule)
	}
}

// lastMatch is when rule last matched; zero when it has not since the daemon started.
func (n *Notifier) lastMatch(rule string) time.Time {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.matched[rule]
}

// Recorder records the notifier's own Events (a channel or rule not Ready).
func (n *Notifier) Recorder() *controller.Events { return n.ctl.Recorder() }
