package metrics

import "github.com/prometheus/client_golang/prometheus"

// Outcomes of a receiver request, the label values of receiver_requests_total{outcome}.
const (
	ReceiverTriggered = "triggered"  // verified; at least one destination made to reconcile
	ReceiverFiltered  = "filtered"   // verified, but the Receiver's events do not list the event
	ReceiverPing      = "ping"       // a verified ping or test delivery, answered "pong"
	ReceiverDuplicate = "duplicate"  // a verified delivery whose id was seen within the TTL
	ReceiverRefused   = "refused"    // signature, token, payload or repository refused
	ReceiverNotFound  = "not_found"  // no Receiver has that path
	ReceiverNotReady  = "not_ready"  // the Receiver is suspended, has no Secret or no destination
	ReceiverTooLarge  = "too_large"  // the body is over the limit
	ReceiverBadMethod = "bad_method" // not a POST
	ReceiverBusy      = "busy"       // the bytes of bodies being read at once are at their limit: 503, retry later
)

// ReceiverOutcomes lists every outcome label value.
var ReceiverOutcomes = []string{
	ReceiverTriggered, ReceiverFiltered, ReceiverPing, ReceiverDuplicate, ReceiverRefused,
	ReceiverNotFound, ReceiverNotReady, ReceiverTooLarge, ReceiverBadMethod, ReceiverBusy,
}

// Receiver are the collectors of the webhook receiver: every request it answers, by the
// Receiver's type (one of the seven types, or "unknown" when no Receiver has the path) and
// outcome, and every reconcile it triggered.
type Receiver struct {
	Requests *prometheus.CounterVec // by type and outcome
	Triggers prometheus.Counter     // destinations made to reconcile
	// Mismatches counts destinations a verified delivery was refused for because the payload's
	// repository is not theirs, by type.
	Mismatches *prometheus.CounterVec
}

func newReceiver(reg prometheus.Registerer) *Receiver {
	r := &Receiver{
		Requests: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Name: "receiver_requests_total",
			Help: "Webhook deliveries the receiver answered, by receiver type and outcome."}, []string{"type", "outcome"}),
		Triggers: prometheus.NewCounter(prometheus.CounterOpts{Namespace: Namespace, Name: "receiver_triggers_total",
			Help: "Destinations a verified webhook delivery made reconcile."}),
		Mismatches: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace,
			Name: "receiver_repository_mismatches_total",
			Help: "Destinations a verified delivery was refused for because it names another repository, by receiver type."},
			[]string{"type"}),
	}
	reg.MustRegister(r.Requests, r.Triggers, r.Mismatches)
	return r
}
