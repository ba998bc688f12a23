package metrics

import "github.com/prometheus/client_golang/prometheus"

// Mirror are the collectors of the cluster → Git flow (seed 000 §7).
type Mirror struct {
	ObjectsScanned  prometheus.Counter // objects read from the cluster by a list or a watch event
	ObjectsWritten  prometheus.Counter // files written into a commit (content changed)
	FilesDeleted    prometheus.Counter // files removed from Git (object deleted or orphaned)
	Commits         prometheus.Counter // commits created (pushed or pending)
	CommitsSigned   prometheus.Counter // commits pushed with a signature (GitRepoConfig.spec.commitSigning)
	CommitBytes     prometheus.Counter // bytes of file content written into commits
	RebaseRetries   prometheus.Counter // pushes rejected because the remote moved, then replayed
	PushFailures    prometheus.Counter // pushes that failed for any other reason and will be retried
	PushesFenced    prometheus.Counter // pushes dropped because this replica no longer held the lease
	SecretsSkipped  prometheus.Counter // Secrets selected by a rule but never written in plain text
	ActiveWorkers   prometheus.Gauge   // Git workers currently committing or pushing
	Watches         prometheus.Gauge   // resources being listed and watched
	QueueDepth      *prometheus.GaugeVec
	QueueCoalesced  *prometheus.CounterVec // times waiting changes were merged per file past a bound
	ObjectsTooLarge prometheus.Counter     // objects not written because their file would exceed the cap
	Relists         prometheus.Counter     // lists after the first of a watch: its resourceVersion expired or it restarted
	ChangesSkipped  *prometheus.CounterVec // by reason: generated objects and changes by excluded users or field managers left out
	// AdoptedUnwritten counts the changes to objects of adopted folders that were not written:
	// their document was claimed twice, or could not be edited safely (see layouts.md).
	AdoptedUnwritten prometheus.Counter
	// SigningKeysInvalid counts the repositories that ask for signed commits but whose signing key
	// Secret is missing or holds no usable key.
	SigningKeysInvalid prometheus.Gauge
	// ReferencesRefused counts the references into another namespace that its object does not
	// admit (spec.accessPolicy, --cross-namespace-refs), by the referring kind.
	ReferencesRefused *prometheus.GaugeVec
	// RulesRefused counts the WatchRules refused for the ServiceAccount they name: it may not
	// read what they select (ServiceAccountNotAllowed), or has not agreed to act for them
	// (ServiceAccountConsentMissing).
	RulesRefused *prometheus.GaugeVec
	// ClusterReady is 1 for each RemoteCluster ("namespace/name") a destination uses that is
	// connected, 0 for one that is not; ClusterWatches and ClusterLastEvent are its list+watches
	// and when one last delivered an object. A cluster no destination uses has no series.
	ClusterReady, ClusterWatches, ClusterLastEvent *prometheus.GaugeVec
}

func newMirror(reg prometheus.Registerer) *Mirror {
	counter := func(name, help string) prometheus.Counter {
		c := prometheus.NewCounter(prometheus.CounterOpts{Namespace: Namespace, Name: name, Help: help})
		reg.MustRegister(c)
		return c
	}
	m := &Mirror{
		ObjectsScanned: counter("objects_scanned_total", "Objects read from the cluster by a list or a watch event."),
		ObjectsWritten: counter("objects_written_total", "Files written into a commit because their content changed."),
		FilesDeleted:   counter("files_deleted_total", "Files removed from Git because their object was deleted or is orphaned."),
		Commits:        counter("commits_total", "Commits created by the Git workers."),
		CommitsSigned:  counter("commits_signed_total", "Commits pushed with a signature, for repositories whose GitRepoConfig asks for commitSigning."),
		CommitBytes:    counter("commit_bytes_total", "Bytes of file content written into commits."),
		RebaseRetries:  counter("rebase_retries_total", "Pushes rejected because the remote branch moved, replayed on the new tip."),
		PushFailures:   counter("push_failures_total", "Pushes that failed (remote down, 5xx, auth) and are retried with backoff."),
		PushesFenced:   counter("pushes_fenced_total", "Pushes dropped, with their commits, because this replica no longer held the leader Lease; the leader writes those changes."),
		SecretsSkipped: counter("secrets_skipped_total", "Secrets selected by a rule but skipped because they are never written in plain text."),
		ActiveWorkers: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: Namespace, Name: "repo_branch_active_workers",
			Help: "Git workers (one per repository and branch) currently committing or pushing."}),
		ReferencesRefused: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: Namespace, Name: "references_refused",
			Help: "References into another namespace refused because the object referred to does not admit them, by referring kind."}, []string{"kind"}),
		RulesRefused: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: Namespace, Name: "rules_refused",
			Help: "WatchRules refused for the ServiceAccount they act as, by reason: it may not list and watch what they select (ServiceAccountNotAllowed), or has not agreed to act for them (ServiceAccountConsentMissing)."}, []string{"reason"}),
		Watches: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: Namespace, Name: "watches",
			Help: "Resources being listed and watched: one per resource and namespace scope selected by the rules."}),
		QueueDepth: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: Namespace, Name: "repo_branch_queue_depth",
			Help: "Changes waiting in a Git worker's batch or queue, or committed and not yet pushed."}, []string{"repo", "branch"}),
		QueueCoalesced: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Name: "repo_branch_queue_coalesced_total",
			Help: "Times a Git worker merged its waiting changes per file because the remote did not keep up; the merged changes are credited to the bot."},
			[]string{"repo", "branch"}),
		ObjectsTooLarge:  counter("objects_too_large_total", "Objects not written to Git because their canonical YAML exceeds the file size cap."),
		AdoptedUnwritten: counter("adopted_changes_unwritten_total", "Changes to objects of adopted folders not written: their document was claimed twice or could not be edited safely."),
		ChangesSkipped: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Name: "changes_skipped_total",
			Help: "Objects and changes the mirror left out, by reason: generated by the cluster (KubeRootCA, DefaultServiceAccount, ControllerOwned, AutoUpdatedRBAC) or made only by an excluded user or field manager."},
			[]string{"reason"}),
		Relists: counter("relists_total", "Lists of a resource after its first: the watch expired (410) or failed and was restarted."),
	}
	m.SigningKeysInvalid = prometheus.NewGauge(prometheus.GaugeOpts{Namespace: Namespace, Name: "signing_keys_invalid",
		Help: "GitRepoConfigs that ask for signed commits but whose signing key Secret is missing or holds no usable key; their status says why."})
	cluster := func(name, help string) *prometheus.GaugeVec {
		return prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: Namespace, Name: name, Help: help}, []string{"cluster"})
	}
	m.ClusterReady = cluster("remote_cluster_ready", "1 when a RemoteCluster (namespace/name) is connected: reachable, its credentials accepted, its discovery read; 0 when not.")
	m.ClusterWatches = cluster("remote_cluster_watches", "Resources being listed and watched on a RemoteCluster.")
	m.ClusterLastEvent = cluster("remote_cluster_last_event_timestamp_seconds", "When a watch of a RemoteCluster last delivered an object, in seconds since the epoch.")
	reg.MustRegister(m.ClusterReady, m.ClusterWatches, m.ClusterLastEvent)
	reg.MustRegister(m.ActiveWorkers, m.Watches, m.QueueDepth, m.QueueCoalesced, m.ChangesSkipped, m.SigningKeysInvalid, m.ReferencesRefused, m.RulesRefused)
	return m
}
