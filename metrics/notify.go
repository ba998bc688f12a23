package metrics

import "github.com/prometheus/client_golang/prometheus"

// Why a notification was dropped, the label values of notifications_dropped_total{reason}.
const (
	DropCap     = "cap"     // over the channel's spec.perMinute
	DropQueue   = "queue"   // the channel's queue was full (it is down or slow)
	DropIntake  = "intake"  // the notifier's intake was full (Events came faster than rules were matched)
	DropStopped = "stopped" // the daemon stopped, or the channel was deleted, with messages still queued
)

// Notify are the collectors of notifications, by channel ("namespace/name"): there are as many
// label values as NotifyChannels, which a person creates.
type Notify struct {
	Sent    *prometheus.CounterVec // messages a channel accepted
	Failed  *prometheus.CounterVec // messages refused after every retry
	Dropped *prometheus.CounterVec // messages dropped, by channel and reason
	// SendSeconds is how long each send took, success or not, by channel type.
	SendSeconds *prometheus.HistogramVec
}

func newNotify(reg prometheus.Registerer) *Notify {
	n := &Notify{
		Sent: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Name: "notifications_sent_total",
			Help: "Notifications a NotifyChannel accepted, by channel (namespace/name)."}, []string{"channel"}),
		Failed: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Name: "notifications_failed_total",
			Help: "Notifications a NotifyChannel refused or did not answer after every retry, by channel."}, []string{"channel"}),
		Dropped: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Name: "notifications_dropped_total",
			Help: "Notifications dropped before they were sent, by channel and reason: cap (spec.perMinute), queue (the channel is down or slow), intake, stopped."},
			[]string{"channel", "reason"}),
		SendSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: Namespace, Name: "notification_send_seconds",
			Help: "How long sending one notification took, success or not, by channel type.", Buckets: []float64{.01, .05, .1, .25, .5, 1, 2.5, 5, 10, 30}},
			[]string{"type"}),
	}
	reg.MustRegister(n.Sent, n.Failed, n.Dropped, n.SendSeconds)
	return n
}
