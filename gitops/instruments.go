package gitops

import (
	"net/url"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/configbutler/gitops-reverser/metrics"
)

// instruments updates the mirror collectors; every method is a no-op without metrics.
type instruments struct {
	m         *metrics.Mirror
	depth     prometheus.Gauge
	coalesces prometheus.Counter
}

func newInstruments(m *metrics.Mirror, r Remote) instruments {
	if m == nil {
		return instruments{}
	}
	repo := redactURL(r.URL)
	return instruments{m: m, depth: m.QueueDepth.WithLabelValues(repo, r.Branch),
		coalesces: m.QueueCoalesced.WithLabelValues(repo, r.Branch)}
}

func (i instruments) landed(s buildStats) {
	if i.m == nil {
		return
	}
	i.m.Commits.Add(float64(s.commits))
	i.m.CommitsSigned.Add(float64(s.signed))
	i.m.ObjectsWritten.Add(float64(s.written))
	i.m.FilesDeleted.Add(float64(s.deleted))
	i.m.CommitBytes.Add(float64(s.bytes))
}

func (i instruments) rebaseRetry() {
	if i.m != nil {
		i.m.RebaseRetries.Inc()
	}
}

func (i instruments) pushFailure() {
	if i.m != nil {
		i.m.PushFailures.Inc()
	}
}

func (i instruments) fenced() {
	if i.m != nil {
		i.m.PushesFenced.Inc()
	}
}

func (i instruments) active(delta float64) {
	if i.m != nil {
		i.m.ActiveWorkers.Add(delta)
	}
}

func (i instruments) coalesced() {
	if i.coalesces != nil {
		i.coalesces.Inc()
	}
}

func (i instruments) adoptionFailed() {
	if i.m != nil {
		i.m.AdoptedUnwritten.Inc()
	}
}

func (i instruments) queue(n int) {
	if i.depth != nil {
		i.depth.Set(float64(n))
	}
}

// redactURL drops credentials from a repository URL so it can be a label or a log value.
func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.User == nil {
		return raw
	}
	u.User = nil
	return u.String()
}
