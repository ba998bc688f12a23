package metrics

import "github.com/prometheus/client_golang/prometheus"

// Label values of kv_evictions_total{reason} and admission_reviews_total{result}.
const (
	EvictedCapacity = "capacity" // the correlation store was full; its least recently used entry went
	EvictedExpired  = "expired"  // an entry outlived the TTL before the watch asked for it

	ReviewRecorded = "recorded" // the author was stored for the watch to pick up
	ReviewDryRun   = "dry_run"  // a dry run: nothing will persist, so nothing to attribute
	ReviewIgnored  = "ignored"  // not a watched resource, namespace or operation, or a subresource
	ReviewError    = "error"    // a malformed request, or an object we could not sanitize
	ReviewRefused  = "refused"  // sent to a RemoteCluster's path that is not its own (or with a wrong token)
)

// Label values of correlations_forwarded_total{result}: what became of one admission record sent
// to one peer replica.
const (
	ForwardDelivered = "delivered" // the peer stored it
	ForwardRefused   = "refused"   // the peer answered with an error status (e.g. 401: its key differs)
	ForwardFailed    = "failed"    // no answer: connection or TLS failure, or nothing to sign with yet
	ForwardTimeout   = "timeout"   // no answer within the forward timeout; the admission went on
)

// Label values of correlations_received_total{result}: what became of one record a peer sent.
const (
	ReceivedImported     = "imported"     // stored for the watch to pick up
	ReceivedExpired      = "expired"      // authentic, but already older than the TTL: dropped
	ReceivedUnauthorized = "unauthorized" // no signature, or none that this replica's key verifies
	ReceivedStale        = "stale"        // its timestamp is outside the allowed clock skew
	ReceivedReplayed     = "replayed"     // a request already received
	ReceivedTooLarge     = "too_large"    // the body is over the limit
	ReceivedMalformed    = "malformed"    // not a POST, no timestamp, or a record that does not parse
	ReceivedUnavailable  = "unavailable"  // this replica has no certificate yet, so no key to verify with
	// ReceivedUnknownCluster: a record of a RemoteCluster this replica keeps no store for.
	ReceivedUnknownCluster = "unknown_cluster"
)

// ForwardResults and ReceivedResults list every label value of the two counters.
var (
	ForwardResults  = []string{ForwardDelivered, ForwardRefused, ForwardFailed, ForwardTimeout}
	ReceivedResults = []string{ReceivedImported, ReceivedExpired, ReceivedUnauthorized, ReceivedStale,
		ReceivedReplayed, ReceivedTooLarge, ReceivedMalformed, ReceivedUnavailable, ReceivedUnknownCluster}
)

// Attribution are the collectors of the who-changed-it flow: the admission webhook records the
// user, the watch looks it up (seed 000 §3, §7).
type Attribution struct {
	EnrichHits      prometheus.Counter     // watch events attributed to the admission user
	EnrichMisses    prometheus.Counter     // watch events committed as the bot (no or stale record)
	Evictions       *prometheus.CounterVec // by reason: capacity | expired
	Reviews         *prometheus.CounterVec // by result: recorded | dry_run | ignored | error
	HandlerDuration prometheus.Histogram   // time spent inside the admission handler

	// With several replicas, the one that answers an admission hands the record to the others.
	Forwarded       *prometheus.CounterVec // records sent to a peer, by result (ForwardResults)
	Received        *prometheus.CounterVec // records a peer sent, by result (ReceivedResults)
	ForwardDuration prometheus.Histogram   // time an admission waited for all its forwards
}

func newAttribution(reg prometheus.Registerer) *Attribution {
	a := &Attribution{
		EnrichHits: prometheus.NewCounter(prometheus.CounterOpts{Namespace: Namespace, Name: "enrich_hits_total",
			Help: "Watch events whose author was found in the admission correlation store."}),
		EnrichMisses: prometheus.NewCounter(prometheus.CounterOpts{Namespace: Namespace, Name: "enrich_misses_total",
			Help: "Watch events with no matching admission record, committed as the bot identity."}),
		Evictions: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Name: "kv_evictions_total",
			Help: "Admission records dropped before the watch used them, by reason (capacity, expired)."}, []string{"reason"}),
		Reviews: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Name: "admission_reviews_total",
			Help: "Admission reviews handled, by result (recorded, dry_run, ignored, error, refused: on a path that is not the sending cluster's)."}, []string{"result"}),
		HandlerDuration: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: Namespace,
			Name:    "admission_handler_duration_seconds",
			Help:    "Time from receiving an admission review to answering it, inside the handler.",
			Buckets: []float64{10e-6, 25e-6, 50e-6, 100e-6, 250e-6, 500e-6, 1e-3, 2.5e-3, 5e-3, 10e-3, 25e-3, 50e-3, 100e-3}}),
		Forwarded: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Name: "correlations_forwarded_total",
			Help: "Admission records sent to a peer replica, by result (delivered, refused, failed, timeout)."}, []string{"result"}),
		Received: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Name: "correlations_received_total",
			Help: "Admission records a peer replica sent, by result (imported, expired, unauthorized, stale, replayed, too_large, malformed, unavailable, unknown_cluster)."},
			[]string{"result"}),
		ForwardDuration: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: Namespace,
			Name:    "correlation_forward_duration_seconds",
			Help:    "Time an admission review waited for its record to reach every peer replica.",
			Buckets: []float64{100e-6, 250e-6, 500e-6, 1e-3, 2.5e-3, 5e-3, 10e-3, 25e-3, 50e-3, 100e-3, 250e-3, 500e-3}}),
	}
	// Every label value exists from the start, so a rate() over a quiet one reads 0, not absent.
	for _, r := range []string{EvictedCapacity, EvictedExpired} {
		a.Evictions.WithLabelValues(r)
	}
	for _, r := range []string{ReviewRecorded, ReviewDryRun, ReviewIgnored, ReviewError, ReviewRefused} {
		a.Reviews.WithLabelValues(r)
	}
	for _, r := range ForwardResults {
		a.Forwarded.WithLabelValues(r)
	}
	for _, r := range ReceivedResults {
		a.Received.WithLabelValues(r)
	}
	reg.MustRegister(a.EnrichHits, a.EnrichMisses, a.Evictions, a.Reviews, a.HandlerDuration,
		a.Forwarded, a.Received, a.ForwardDuration)
	return a
}
