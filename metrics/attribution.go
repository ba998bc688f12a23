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
)

// Attribution are the collectors of the who-changed-it flow: the admission webhook records the
// user, the watch looks it up (seed 000 §3, §7).
type Attribution struct {
	EnrichHits      prometheus.Counter     // watch events attributed to the admission user
	EnrichMisses    prometheus.Counter     // watch events committed as the bot (no or stale record)
	Evictions       *prometheus.CounterVec // by reason: capacity | expired
	Reviews         *prometheus.CounterVec // by result: recorded | dry_run | ignored | error
	HandlerDuration prometheus.Histogram   // time spent inside the admission handler
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
			Help: "Admission reviews handled, by result (recorded, dry_run, ignored, error)."}, []string{"result"}),
		HandlerDuration: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: Namespace,
			Name:    "admission_handler_duration_seconds",
			Help:    "Time from receiving an admission review to answering it, inside the handler.",
			Buckets: []float64{10e-6, 25e-6, 50e-6, 100e-6, 250e-6, 500e-6, 1e-3, 2.5e-3, 5e-3, 10e-3, 25e-3, 50e-3, 100e-3}}),
	}
	// Every label value exists from the start, so a rate() over a quiet one reads 0, not absent.
	for _, r := range []string{EvictedCapacity, EvictedExpired} {
		a.Evictions.WithLabelValues(r)
	}
	for _, r := range []string{ReviewRecorded, ReviewDryRun, ReviewIgnored, ReviewError} {
		a.Reviews.WithLabelValues(r)
	}
	reg.MustRegister(a.EnrichHits, a.EnrichMisses, a.Evictions, a.Reviews, a.HandlerDuration)
	return a
}
