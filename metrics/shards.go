package metrics

import "github.com/prometheus/client_golang/prometheus"

// Shards are the collectors of the sharing of destinations between replicas (--shards=auto).
type Shards struct {
	Owned   *prometheus.GaugeVec   // by shard (repository@branch): 1 for each shard this replica owns
	Shards  prometheus.Gauge       // the shards the configuration asks for
	Members prometheus.Gauge       // the live replicas, this one included
	Changes *prometheus.CounterVec // by event: acquired, released (handed over), lost (not renewed in time)
}

func newShards(reg prometheus.Registerer) *Shards {
	s := &Shards{
		Owned: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: Namespace, Name: "shard_owned",
			Help: "1 for each shard (repository@branch) this replica owns: it mirrors, pushes and applies write-back for it."},
			[]string{"shard"}),
		Shards: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: Namespace, Name: "shards",
			Help: "The shards (repository and branch pairs) the destinations ask for, shared out across the replicas."}),
		Members: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: Namespace, Name: "shard_replicas",
			Help: "The replicas sharing the shards, as this one sees their membership Leases, itself included."}),
		Changes: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Name: "shard_changes_total",
			Help: "Shards this replica acquired, released (handed over) or lost (its lease not renewed in time)."},
			[]string{"event"}),
	}
	reg.MustRegister(s.Owned, s.Shards, s.Members, s.Changes)
	return s
}
