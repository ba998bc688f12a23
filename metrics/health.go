package metrics

import "github.com/prometheus/client_golang/prometheus"

// Parts of the daemon that may be degraded, the label values of degraded{part}.
const (
	PartAttribution = "attribution"  // the admission webhook that credits changes to their authors
	PartWriteBack   = "write-back"   // Git edits become proposals, applied after review
	PartReceivers   = "receivers"    // webhooks of Git hosts and CDEvents make destinations reconcile now
	PartLeaderLabel = "leader-label" // the leader's Pod carries the label its Services select
	PartUI          = "ui"           // the operator page
	PartNotify      = "notify"       // NotifyRules tell people through NotifyChannels
)

// Health are the collectors of the daemon's optional parts: a part that cannot do its job (its
// namespace is missing, a permission is not granted) is degraded while the mirror keeps running.
// Why it is degraded is said in the log and on /readyz, never as a label: reasons carry error
// text, which would make the label set unbounded.
type Health struct {
	Degraded *prometheus.GaugeVec // by part: 1 while the part is degraded, else 0
	Leader   prometheus.Gauge     // 1 while this replica leads (always, without leader election), else 0
}

func newHealth(reg prometheus.Registerer) *Health {
	h := &Health{
		Degraded: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: Namespace, Name: "degraded",
			Help: "1 while an optional part of the daemon cannot do its job (see the log or /readyz for why), else 0."},
			[]string{"part"}),
		Leader: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: Namespace, Name: "leader",
			Help: "1 while this replica leads: it mirrors, pushes, applies and serves webhooks; 0 while it stands by."}),
	}
	reg.MustRegister(h.Degraded, h.Leader)
	return h
}
