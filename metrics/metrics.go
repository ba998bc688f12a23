// Package metrics owns the daemon's Prometheus registry. Every collector the daemon exports is
// created here, under the gitops_reverser namespace, so names and label sets stay in one place and
// stay cardinality-safe (labels are bounded: never object names or users).
package metrics

import (
	"net/http"
	"runtime/debug"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Namespace prefixes every metric name.
const Namespace = "gitops_reverser"

// Registry holds the daemon's collectors. Packages receive the collectors they update; only the
// daemon serves the registry.
type Registry struct {
	reg         *prometheus.Registry
	Mirror      *Mirror
	Attribution *Attribution
	Health      *Health
	WriteBack   *WriteBack
	Receiver    *Receiver
	Shards      *Shards
	Requests    *PullRequests
	Notify      *Notify
}

// New creates a registry with the Go runtime and process collectors and a build_info gauge.
func New() *Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		buildInfo(),
	)
	return &Registry{reg: reg, Mirror: newMirror(reg), Attribution: newAttribution(reg), Health: newHealth(reg),
		WriteBack: newWriteBack(reg), Receiver: newReceiver(reg), Shards: newShards(reg),
		Requests: newPullRequests(reg), Notify: newNotify(reg)}
}

// Gather returns the current value of every collector, for tests and benchmarks.
func (r *Registry) Gather() (map[string]float64, error) {
	families, err := r.reg.Gather()
	if err != nil {
		return nil, err
	}
	out := map[string]float64{}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			switch {
			case m.GetCounter() != nil:
				out[f.GetName()] += m.GetCounter().GetValue()
			case m.GetGauge() != nil:
				out[f.GetName()] += m.GetGauge().GetValue()
			}
		}
	}
	return out, nil
}

// Describe sends the description of every collector, also of vectors that have no labelled
// child yet and so are absent from Gather and /metrics: tests use it to list every family.
func (r *Registry) Describe(ch chan<- *prometheus.Desc) {
	r.reg.Describe(ch)
}

// Handler serves the registry in the Prometheus exposition format.
func (r *Registry) Handler() http.Handler {
	return promhttp.HandlerFor(r.reg, promhttp.HandlerOpts{Registry: r.reg})
}

func buildInfo() prometheus.Collector {
	version := "devel"
	if info, ok := debug.ReadBuildInfo(); ok && info.Main.Version != "" {
		version = info.Main.Version
	}
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace:   Namespace,
		Name:        "build_info",
		Help:        "Always 1; the version label tells which build is running.",
		ConstLabels: prometheus.Labels{"version": version},
	})
	g.Set(1)
	return g
}
