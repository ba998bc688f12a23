package receiver

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"

	"github.com/configbutler/gitops-reverser/crds"
	"github.com/configbutler/gitops-reverser/httpserver"
	"github.com/configbutler/gitops-reverser/metrics"
)

// Trigger makes a destination reconcile now (the daemon passes write-back's SyncNow). It must not
// block.
type Trigger func(namespace, name, why string)

// Observer hears the outcome of every delivery to a known Receiver: crds.OutcomeTriggered,
// OutcomeRefused or OutcomeFiltered, with a short message (the controller writes it to the
// Receiver's status, debounced). Pings and replayed deliveries are not observed.
type Observer func(receiverKey, outcome, message string)

// HandlerConfig is what the receiver's HTTP handler works with.
type HandlerConfig struct {
	// Index finds the Receiver of a path; the controller keeps it current.
	Index *Index
	// Deliveries refuses replayed delivery ids; nil makes one with the defaults.
	Deliveries *Deliveries
	// Trigger makes a destination reconcile; nil triggers nothing.
	Trigger Trigger
	// Observe, if set, hears every outcome.
	Observe Observer
	// Metrics, if set, counts every answer and trigger.
	Metrics *metrics.Receiver
	// Log receives one line per delivery (refusals at Warn); nil discards.
	Log *slog.Logger
	// BodyBudget caps the bytes of request bodies held at once across every request: each
	// reserves its Content-Length, or MaxBodyBytes when it has none, and one that cannot is
	// answered 503 (so a budget under MaxBodyBytes refuses every body of unknown length). Zero
	// means DefaultBodyBudget.
	BodyBudget int64
}

// TriggerReason is the why a Trigger is called with.
const TriggerReason = crds.TriggerReceiver

// Reasons the handler itself refuses a delivery for, beside Verify's and ParseCDEvent's.
const (
	reasonBadMethod          = "BadMethod"
	reasonNotReady           = "NotReady"
	reasonUnreadable         = "Unreadable"
	reasonRepositoryMismatch = "RepositoryMismatch"
)

// handler serves webhook deliveries: see NewHandler.
type handler struct {
	cfg    HandlerConfig
	budget *bodyBudget
	log    *slog.Logger
}

// NewHandler returns the handler of webhook deliveries. For each request, in order: not a POST
// → 405; a path no Receiver has → 404; a Receiver that is not ready → 503; a body over
// MaxBodyBytes → 413; a body whose bytes do not fit in what is left of the BodyBudget now → 503
// with a Retry-After; then the delivery is verified by the Receiver's type (cdevents: a bearer
// token or generic HMAC, then ParseCDEvent; the others: Verify), and a refusal is answered with
// its status. A filtered event → 200, a ping → 200 "pong", a delivery id seen within the TTL →
// 200 "duplicate delivery" (checked only once verified, so a forged request cannot burn an id).
// When the event names repositories, only the targets whose RepoURL is one of them are
// triggered (none → 403). A Git host's event that names none (its payload lacks the repository)
// is refused alike (403); a generic or CDEvents one that names none triggers every target. Triggered → 202 with
// {"triggered": ["namespace/name", ...]}.
func NewHandler(cfg HandlerConfig) http.Handler {
	if cfg.Index == nil {
		cfg.Index = &Index{}
	}
	if cfg.Deliveries == nil {
		cfg.Deliveries = NewDeliveries(0, 0, nil)
	}
	if cfg.Trigger == nil {
		cfg.Trigger = func(string, string, string) {}
	}
	log := cfg.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &handler{cfg: cfg, budget: newBodyBudget(cfg.BodyBudget), log: log}
}

// verdict is how one request ends: the answer, its metric outcome and what the Observer hears.
type verdict struct {
	status  int
	outcome string // metrics.Receiver* label value
	observe string // crds.Outcome*, "" when nothing is observed
	reason  string // a Reason* word, for the log
	message string // the answer's text, observed and logged
	json    []byte // when set, the answer's body instead of message
}

// verified is a delivery whose signature or token checked out.
type verified struct {
	name, id string   // event name (CDEvents: type) and delivery id
	repos    []string // every repository form the event names
	ping     bool
}

// ServeHTTP implements http.Handler.
func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	e := h.cfg.Index.Lookup(r.URL.Path)
	v := h.handle(w, r, e)
	h.finish(w, r, e, v)
}

// handle decides the verdict of one request and triggers the destinations of a verified one.
func (h *handler) handle(w http.ResponseWriter, r *http.Request, e *Entry) verdict {
	switch {
	case r.Method != http.MethodPost:
		w.Header().Set("Allow", http.MethodPost)
		return refusedVerdict(http.StatusMethodNotAllowed, metrics.ReceiverBadMethod, reasonBadMethod,
			fmt.Sprintf("method %s is not allowed; deliveries are POSTed", short(r.Method)))
	case e == nil:
		return verdict{status: http.StatusNotFound, outcome: metrics.ReceiverNotFound, message: "404 page not found"}
	case e.NotReady != "":
		return refusedVerdict(http.StatusServiceUnavailable, metrics.ReceiverNotReady, reasonNotReady,
			"the receiver is not ready: "+e.NotReady)
	case len(e.Targets) == 0:
		return refusedVerdict(http.StatusServiceUnavailable, metrics.ReceiverNotReady, reasonNotReady,
			"the receiver has no destination")
	}
	release, v, ok := h.budget.reserve(w, r)
	if !ok {
		return v
	}
	defer release()
	body, v, ok := readBody(w, r)
	if !ok {
		return v
	}
	d, v, ok := verify(r, e, body)
	if !ok {
		return v
	}
	if d.ping {
		return verdict{status: http.StatusOK, outcome: metrics.ReceiverPing, message: "pong"}
	}
	targets, others := matching(e.Targets, d.repos, namesRepository(e.Type))
	if len(targets) == 0 {
		h.mismatched(e, d, others)
		msg := "repository does not match"
		if len(d.repos) == 0 {
			msg = "the payload names no repository"
		}
		return refusedVerdict(http.StatusForbidden, metrics.ReceiverRefused, reasonRepositoryMismatch, msg)
	}
	if h.cfg.Deliveries.Seen(e.Key(), d.id) {
		return verdict{status: http.StatusOK, outcome: metrics.ReceiverDuplicate, message: "duplicate delivery"}
	}
	h.mismatched(e, d, others)
	return h.trigger(e, d, targets)
}

// readBody reads at most MaxBodyBytes of the body; a larger one is answered 413. A body of known
// length is read into a buffer of that size, so it takes no more than the budget reserved for it.
func readBody(w http.ResponseWriter, r *http.Request) ([]byte, verdict, bool) {
	var buf bytes.Buffer
	err := httpserver.ReadBody(w, r, &buf, MaxBodyBytes)
	switch {
	case errors.Is(err, httpserver.ErrBodyTooLarge):
		return nil, tooLargeVerdict(), false
	case err != nil:
		return nil, refusedVerdict(http.StatusBadRequest, metrics.ReceiverRefused, reasonUnreadable,
			"the body could not be read"), false
	}
	return buf.Bytes(), verdict{}, true
}

// verify checks a delivery by the Receiver's type. A refusal with status 200 is a filtered event.
func verify(r *http.Request, e *Entry, body []byte) (verified, verdict, bool) {
	if e.Type == TypeCDEvents {
		if ref := checkCDEventAuth(e.Token, r.Header, body); ref != nil {
			return verified{}, refusalVerdict(ref.Status, ref.Reason, ref.Message), false
		}
		cde, err := ParseCDEvent(r, body, e.Events)
		if err != nil {
			var ref *CDEventRefusal
			if errors.As(err, &ref) {
				return verified{}, refusalVerdict(ref.Status, ref.Reason, ref.Message), false
			}
			return verified{}, refusalVerdict(http.StatusBadRequest, ReasonUnparseable, "the CloudEvent"), false
		}
		return verified{name: cde.Type, id: cde.ID, repos: cde.Repository}, verdict{}, true
	}
	ev, err := Verify(e.Type, e.Token, r.Header, body, e.Events)
	if err != nil {
		var ref *Refusal
		if errors.As(err, &ref) {
			return verified{}, refusalVerdict(ref.Status, ref.Reason, ref.Message), false
		}
		return verified{}, refusalVerdict(http.StatusBadRequest, ReasonUnparseable, "the delivery"), false
	}
	return verified{name: ev.Name, id: ev.Delivery, repos: ev.Repository, ping: ev.Ping}, verdict{}, true
}

// matching splits targets into those the event may trigger and the others: those whose RepoURL
// the event names. An event that names no repository may trigger every target, unless its type
// always names one (required): then it may trigger none.
func matching(targets []Target, repos []string, required bool) (match, others []Target) {
	if len(repos) == 0 {
		if required {
			return nil, targets
		}
		return targets, nil
	}
	ev := Event{Repository: repos}
	for _, t := range targets {
		if MatchesRepository(ev, t.RepoURL) {
			match = append(match, t)
		} else {
			others = append(others, t)
		}
	}
	return match, others
}

// mismatched logs and counts the targets a verified delivery is refused for because it names
// another repository, or none where its type always names one.
func (h *handler) mismatched(e *Entry, d verified, others []Target) {
	msg, repo := "receiver refused a delivery that names no repository", ""
	if len(d.repos) > 0 {
		msg, repo = "receiver refused a delivery for a destination of another repository", short(d.repos[0])
	}
	for _, t := range others {
		h.log.Warn(msg, "receiver", e.Key(), "destination", t.Namespace+"/"+t.Name, "repository", repo)
		if m := h.cfg.Metrics; m != nil {
			m.Mismatches.WithLabelValues(typeLabel(e)).Inc()
		}
	}
}

// trigger makes every target reconcile and answers 202 with their names.
func (h *handler) trigger(e *Entry, d verified, targets []Target) verdict {
	names := make([]string, 0, len(targets))
	for _, t := range targets {
		h.cfg.Trigger(t.Namespace, t.Name, TriggerReason)
		names = append(names, t.Namespace+"/"+t.Name)
	}
	if m := h.cfg.Metrics; m != nil {
		m.Triggers.Add(float64(len(targets)))
	}
	body, _ := json.Marshal(struct {
		Triggered []string `json:"triggered"`
	}{names}) // a []string always marshals
	what := d.name
	if what == "" {
		what = "delivery"
	}
	if len(d.repos) > 0 {
		what += " from " + d.repos[0]
	}
	return verdict{status: http.StatusAccepted, outcome: metrics.ReceiverTriggered, observe: crds.OutcomeTriggered,
		message: fmt.Sprintf("%s: triggered %d destinations", short(what), len(targets)), json: body}
}

// refusedVerdict is a refusal the Observer hears.
func refusedVerdict(status int, outcome, reason, message string) verdict {
	return verdict{status: status, outcome: outcome, observe: crds.OutcomeRefused, reason: reason, message: message}
}

// refusalVerdict turns a verification refusal into a verdict: status 200 is a filtered event.
func refusalVerdict(status int, reason, message string) verdict {
	switch status {
	case http.StatusOK:
		return verdict{status: status, outcome: metrics.ReceiverFiltered, observe: crds.OutcomeFiltered,
			reason: reason, message: message}
	case http.StatusRequestEntityTooLarge:
		return refusedVerdict(status, metrics.ReceiverTooLarge, reason, message)
	}
	return refusedVerdict(status, metrics.ReceiverRefused, reason, message)
}

// finish counts, observes, logs and writes the verdict.
func (h *handler) finish(w http.ResponseWriter, r *http.Request, e *Entry, v verdict) {
	typ := typeLabel(e)
	if m := h.cfg.Metrics; m != nil {
		m.Requests.WithLabelValues(typ, v.outcome).Inc()
	}
	if e != nil && v.observe != "" && h.cfg.Observe != nil {
		h.cfg.Observe(e.Key(), v.observe, v.message)
	}
	h.logVerdict(r, e, v)
	w.Header().Set("X-Content-Type-Options", "nosniff")
	if v.json != nil {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(v.status)
		_, _ = w.Write(v.json)
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(v.status)
	_, _ = io.WriteString(w, v.message+"\n")
}

// logVerdict logs one line per request: refusals of a known Receiver at Warn, unknown paths at
// Debug (scanners), the rest at Info. Never the token or the body.
func (h *handler) logVerdict(r *http.Request, e *Entry, v verdict) {
	if e == nil {
		h.log.Debug("receiver request for an unknown path", "status", v.status, "method", short(r.Method),
			"remote", r.RemoteAddr)
		return
	}
	attrs := []any{"receiver", e.Key(), "type", e.Type, "status", v.status, "remote", r.RemoteAddr}
	if v.observe == crds.OutcomeRefused {
		h.log.Warn("receiver refused a delivery", append(attrs, "reason", v.reason, "message", v.message)...)
		return
	}
	h.log.Info("receiver delivery", append(attrs, "outcome", v.outcome, "message", v.message)...)
}

// typeLabel is the Receiver's type as a bounded metric label.
func typeLabel(e *Entry) string {
	if e == nil {
		return "unknown"
	}
	switch e.Type {
	case TypeGitHub, TypeGitLab, TypeGitea, TypeBitbucket, TypeGeneric, TypeGenericHMAC, TypeCDEvents:
		return e.Type
	}
	return "unknown"
}
