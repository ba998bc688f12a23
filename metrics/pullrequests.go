package metrics

import "github.com/prometheus/client_golang/prometheus"

// PullRequests are the collectors of delivery by pull (merge) request.
type PullRequests struct {
	// Open counts the requests open, over every destination that delivers by one.
	Open prometheus.Gauge
	// OldestOpened is when the oldest open request was opened (Unix seconds), 0 when none is:
	// an alert reads its age as time() minus it.
	OldestOpened prometheus.Gauge
	// Calls counts the calls of a Git host's API, by host kind and operation.
	Calls *prometheus.CounterVec
	// Errors counts the calls that failed, by host kind and HTTP status code (0: no answer).
	Errors *prometheus.CounterVec
}

func newPullRequests(reg prometheus.Registerer) *PullRequests {
	p := &PullRequests{
		Open: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: Namespace, Name: "pull_requests_open",
			Help: "Pull (merge) requests open that deliver the mirror's changes, over every destination."}),
		OldestOpened: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: Namespace, Name: "pull_requests_oldest_opened_timestamp_seconds",
			Help: "When the oldest open pull request of the mirror was opened, in Unix seconds; 0 when none is open."}),
		Calls: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Name: "pull_request_api_calls_total",
			Help: "Calls of a Git host's API for pull requests, by host (gitea, github, gitlab) and operation."}, []string{"host", "op"}),
		Errors: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Name: "pull_request_api_errors_total",
			Help: "Calls of a Git host's API for pull requests that failed, by host and HTTP status code (0: no answer, a timeout)."}, []string{"host", "code"}),
	}
	reg.MustRegister(p.Open, p.OldestOpened, p.Calls, p.Errors)
	return p
}
