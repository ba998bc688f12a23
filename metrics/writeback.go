package metrics

import "github.com/prometheus/client_golang/prometheus"

// Label values of the write-back collectors.
const (
	ApplyAuto     = "auto"     // proposals_applied_total{mode}: applied without review (autoApply)
	ApplyApproved = "approved" // proposals_applied_total{mode}: applied after a person approved it
)

// WriteBack are the collectors of the Git → cluster flow: Git edits become proposals, which are
// applied after review or automatically, each reconcile recorded as a SyncRun.
type WriteBack struct {
	ProposalsOpened  *prometheus.CounterVec // by change: create | update | destroy
	ProposalsApplied *prometheus.CounterVec // by mode: auto | approved
	ProposalsRefused *prometheus.CounterVec // by reason: a refused Git file or a refused approval
	SyncRuns         *prometheus.CounterVec // by status: success | failed | partial
	Pending          prometheus.Gauge       // proposals waiting for a decision, over every destination
	AppliesFenced    prometheus.Counter     // applies and deletes not made because this replica no longer held the lease
	// PoliciesRestored counts the times the daemon put its admission policies back after someone
	// deleted, replaced or changed them.
	PoliciesRestored prometheus.Counter
	// OldestPending is the creation time (Unix seconds) of the oldest proposal waiting for a
	// decision, 0 when none waits: an alert reads its age as time() minus it.
	OldestPending prometheus.Gauge
}

func newWriteBack(reg prometheus.Registerer) *WriteBack {
	w := &WriteBack{
		ProposalsOpened: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Name: "proposals_opened_total",
			Help: "Proposals opened from Git edits, by change (create, update, destroy)."}, []string{"change"}),
		ProposalsApplied: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Name: "proposals_applied_total",
			Help: "Proposals applied to the cluster, by mode (auto, approved)."}, []string{"mode"}),
		ProposalsRefused: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Name: "proposals_refused_total",
			Help: "Git files and approvals write-back refused to act on, by reason."}, []string{"reason"}),
		SyncRuns: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Name: "syncruns_total",
			Help: "Write-back reconciles finished, by status (success, failed, partial)."}, []string{"status"}),
		Pending: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: Namespace, Name: "proposals_pending",
			Help: "Proposals waiting for a decision, over every destination."}),
		OldestPending: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: Namespace, Name: "proposals_oldest_pending_timestamp_seconds",
			Help: "Creation time, in Unix seconds, of the oldest proposal waiting for a decision; 0 when none waits."}),
		AppliesFenced: prometheus.NewCounter(prometheus.CounterOpts{Namespace: Namespace, Name: "writeback_applies_fenced_total",
			Help: "Applies and deletes of proposals not made because this replica no longer held the leader Lease; the leader makes them."}),
		PoliciesRestored: prometheus.NewCounter(prometheus.CounterOpts{Namespace: Namespace, Name: "approver_policies_restored_total",
			Help: "Times the daemon put its admission policies back after someone else deleted, replaced or changed them."}),
	}
	for _, c := range []string{"create", "update", "destroy"} {
		w.ProposalsOpened.WithLabelValues(c)
	}
	for _, m := range []string{ApplyAuto, ApplyApproved} {
		w.ProposalsApplied.WithLabelValues(m)
	}
	for _, s := range []string{"success", "failed", "partial"} {
		w.SyncRuns.WithLabelValues(s)
	}
	reg.MustRegister(w.ProposalsOpened, w.ProposalsApplied, w.ProposalsRefused, w.SyncRuns, w.Pending, w.OldestPending, w.AppliesFenced, w.PoliciesRestored)
	return w
}
