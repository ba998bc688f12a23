package daemon

import (
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/configbutler/gitops-reverser/crds"
	"github.com/configbutler/gitops-reverser/gitops"
	"github.com/configbutler/gitops-reverser/watch"
	"github.com/configbutler/gitops-reverser/webhook"
	"github.com/configbutler/gitops-reverser/writeback"
	"github.com/urfave/cli/v2"
)

// EnvPrefix prefixes the environment variable of every key: --git-batch-max-files is
// GITOPS_REVERSER_GIT_BATCH_MAX_FILES.
const EnvPrefix = "GITOPS_REVERSER_"

// The keys of every setting. Each is a command-line flag (--key), an environment variable
// (EnvPrefix + KEY) and a key of the YAML config file, with precedence flag > env > file > default.
const (
	keyConfig               = "config"
	keyKubeconfig           = "kubeconfig"
	keyInstallCRDs          = "install-crds"
	keyApproverPolicy       = "approver-policy"
	keyCrossNamespaceRefs   = "cross-namespace-refs"
	keyDefaultSA            = "default-service-account"
	keyEnableWatchIngestion = "enable-watch-ingestion"
	keyDiscoveryRefresh     = "discovery-refresh"
	keyWatchAll             = "watch-all"
	keyDiscoveryExclude     = "discovery-exclude"
	keyBatchMaxFiles        = "git-batch-max-files"
	keyBatchMaxBytesMiB     = "git-batch-max-bytes-mib"
	keyBatchMaxWaitSec      = "git-batch-max-wait-sec"
	keyBatchQuietMs         = "git-batch-quiet-ms"
	keyWorkersMaxGlobal     = "workers-max-global"
	keyWorkersMaxPerRepo    = "workers-max-per-repo"
	keyPullRequestPoll      = "pull-request-poll"
	keyWorkDir              = "work-dir"
	keyNamespace            = "namespace"
	keyEnableWebhook        = "enable-webhook"
	keyWebhookBindAddress   = "webhook-bind-address"
	keyWebhookCertDir       = "webhook-cert-dir"
	keyWebhookURL           = "webhook-url"
	keyWebhookServiceName   = "webhook-service-name"
	keyWebhookClientCAFile  = "webhook-client-ca-file"
	keyCorrelationTTL       = "correlation-ttl"
	keyCorrelationCapacity  = "correlation-capacity"
	keyMetricsBindAddress   = "metrics-bind-address"
	keyHealthBindAddress    = "health-probe-bind-address"
	keyLogFormat            = "log-format"
	keyLogLevel             = "log-level"
	keyHaltWriteBack        = "halt-write-back"
	keyWriteBackInterval    = "write-back-interval"
	keyMaxProposalsPerTick  = "max-proposals-per-tick"
	keySyncRunRetention     = "syncrun-retention"
	keySyncRunRetentionFail = "syncrun-retention-failed"
	keyProposalRetention    = "proposal-retention"
	keyReceiverBindAddress  = "receiver-bind-address"
	keyReceiverCertDir      = "receiver-cert-dir"
	keyUIBindAddress        = "ui-bind-address"
	keyUIAuth               = "ui-auth"
	keyUICertDir            = "ui-cert-dir"
	keyLeaderElect          = "leader-elect"
	keyLeaderElectionNS     = "leader-election-namespace"
	keyLeaderElectionID     = "leader-election-id"
	keyLeaseDuration        = "leader-election-lease-duration"
	keyRenewDeadline        = "leader-election-renew-deadline"
	keyRetryPeriod          = "leader-election-retry-period"
	keyPodName              = "pod-name"
	keyShards               = "shards"
	keyPeerAddress          = "peer-address"
	keyGitCommitterName     = "git-committer-name"
	keyGitCommitterEmail    = "git-committer-email"
)

// inCluster says whether the daemon runs in a Pod: the kubelet gives every container the
// apiserver's Service address, as client-go's in-cluster configuration expects.
func inCluster() bool {
	return os.Getenv("KUBERNETES_SERVICE_HOST") != "" && os.Getenv("KUBERNETES_SERVICE_PORT") != ""
}

// defaultWorkDir is /var/cache/gitops-reverser in a cluster (the Pod mounts its volume there),
// else the user's cache directory, which a local non-root user can write.
func defaultWorkDir() string {
	if !inCluster() {
		if dir, err := os.UserCacheDir(); err == nil {
			return filepath.Join(dir, "gitops-reverser")
		}
	}
	return "/var/cache/gitops-reverser"
}

// defaultNamespace is the Pod's namespace when running in a cluster, else gitops-reverser-system.
func defaultNamespace() string {
	if b, err := os.ReadFile("/var/run/secrets/kubernetes.io/serviceaccount/namespace"); err == nil && len(b) > 0 {
		return strings.TrimSpace(string(b))
	}
	return "gitops-reverser-system"
}

// defaultPodName is the Pod's name in a cluster (its hostname, unless the Pod sets another), else
// empty: outside a cluster there is no Pod to label.
func defaultPodName() string {
	if !inCluster() {
		return ""
	}
	host, _ := os.Hostname()
	return host
}

// EnvVar is the environment variable that sets key.
func EnvVar(key string) string {
	return EnvPrefix + strings.ToUpper(strings.ReplaceAll(key, "-", "_"))
}

func envs(key string) []string { return []string{EnvVar(key)} }

// Flags returns the definition of every setting; a test (docs/docs_test.go) checks that the
// configuration reference, docs/configuration.md, lists exactly these.
func Flags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: keyConfig, EnvVars: envs(keyConfig),
			Usage: "path of a YAML config file whose keys are these flag names"},
		&cli.StringFlag{Name: keyKubeconfig, EnvVars: envs(keyKubeconfig),
			Usage: "kubeconfig to use; empty means $KUBECONFIG, ~/.kube/config, then the in-cluster config"},
		&cli.BoolFlag{Name: keyInstallCRDs, EnvVars: envs(keyInstallCRDs), Value: true,
			Usage: "apply the configbutler.ai CRDs at start; set false where Helm or another tool owns them"},
		&cli.StringFlag{Name: keyApproverPolicy, EnvVars: envs(keyApproverPolicy), Value: string(crds.ApproverPolicyMutating),
			Usage: "admission policies applied with the CRDs that make a Proposal's approval carry its approver (spec.decidedBy): " +
				"mutating (the apiserver writes it where it serves MutatingAdmissionPolicy, 1.36+, and refuses any other name), " +
				"validating (an approval must name its approver, 1.30+) or none (the admission webhook alone tells)"},
		&cli.StringFlag{Name: keyCrossNamespaceRefs, EnvVars: envs(keyCrossNamespaceRefs), Value: string(watch.CrossNamespaceConsent),
			Usage: "whether a GitDestination may use a GitRepoConfig, and a WatchRule a GitDestination, of another namespace: consent (only when the object referred to admits the namespace in its spec.accessPolicy) or deny (never)"},
		&cli.StringFlag{Name: keyDefaultSA, EnvVars: envs(keyDefaultSA),
			Usage: "the ServiceAccount, in each WatchRule's namespace, that a rule naming none (spec.serviceAccountName) acts as: its rights bound what the rule mirrors, and write-back applies the rule's objects as it; empty lets such rules read with the daemon's rights, except Secrets, and write nothing back"},
		&cli.BoolFlag{Name: keyEnableWatchIngestion, EnvVars: envs(keyEnableWatchIngestion), Value: true,
			Usage: "list and watch the selected resources and mirror them into Git"},
		&cli.DurationFlag{Name: keyDiscoveryRefresh, EnvVars: envs(keyDiscoveryRefresh), Value: 5 * time.Minute,
			Usage: "how often API discovery is re-read to follow CRDs being installed or removed"},
		&cli.BoolFlag{Name: keyWatchAll, EnvVars: envs(keyWatchAll),
			Usage: "when a rule omits resources, select every list+watch-able resource instead of the desired-state default"},
		&cli.StringSliceFlag{Name: keyDiscoveryExclude, EnvVars: envs(keyDiscoveryExclude),
			Usage: "resource to never watch: resource.group, or a bare resource name for every group (repeatable)"},
		&cli.IntFlag{Name: keyBatchMaxFiles, EnvVars: envs(keyBatchMaxFiles), Value: gitops.DefaultMaxFiles,
			Usage: "flush a batch to Git once it holds this many files"},
		&cli.IntFlag{Name: keyBatchMaxBytesMiB, EnvVars: envs(keyBatchMaxBytesMiB), Value: gitops.DefaultMaxBytes >> 20,
			Usage: "flush a batch to Git once it holds this many MiB"},
		&cli.IntFlag{Name: keyBatchMaxWaitSec, EnvVars: envs(keyBatchMaxWaitSec), Value: int(gitops.DefaultMaxWait / time.Second),
			Usage: "the longest a change waits in a batch before it is committed, in seconds"},
		&cli.IntFlag{Name: keyBatchQuietMs, EnvVars: envs(keyBatchQuietMs), Value: int(gitops.DefaultQuiet / time.Millisecond),
			Usage: "commit a batch once no new change has arrived for this many milliseconds"},
		&cli.IntFlag{Name: keyWorkersMaxGlobal, EnvVars: envs(keyWorkersMaxGlobal), Value: 24,
			Usage: "most Git workers (one per repository and branch) running at once"},
		&cli.IntFlag{Name: keyWorkersMaxPerRepo, EnvVars: envs(keyWorkersMaxPerRepo), Value: 5,
			Usage: "most Git workers (branches) running at once for one repository"},
		&cli.DurationFlag{Name: keyPullRequestPoll, EnvVars: envs(keyPullRequestPoll), Value: gitops.DefaultRequestPoll,
			Usage: "how often a destination that delivers by pull request looks at its branch and head branch when nothing else makes it, to follow a merge or a push to the branch"},
		&cli.StringFlag{Name: keyWorkDir, EnvVars: envs(keyWorkDir), Value: defaultWorkDir(),
			Usage: "directory for the daemon's Git clones; defaults to /var/cache/gitops-reverser in a cluster, else the user's cache directory"},
		&cli.StringFlag{Name: keyNamespace, EnvVars: envs(keyNamespace), Value: defaultNamespace(),
			Usage: "the daemon's own namespace (Events, commit trailers); defaults to the Pod's namespace in-cluster"},
		&cli.BoolFlag{Name: keyEnableWebhook, EnvVars: envs(keyEnableWebhook), Value: true,
			Usage: "run the admission webhook that records who changed an object, so commits carry that author"},
		&cli.StringFlag{Name: keyWebhookBindAddress, EnvVars: envs(keyWebhookBindAddress), Value: ":9443",
			Usage: "HTTPS address of the admission webhook"},
		&cli.StringFlag{Name: keyWebhookCertDir, EnvVars: envs(keyWebhookCertDir),
			Usage: "directory with tls.crt, tls.key (and ca.crt) for the webhook, e.g. from cert-manager; empty means the daemon manages its own CA and certificate in a Secret"},
		&cli.StringFlag{Name: keyWebhookURL, EnvVars: envs(keyWebhookURL),
			Usage: "base URL (https://host:port) the apiserver calls when the daemon runs outside the cluster; empty means the in-cluster Service"},
		&cli.StringFlag{Name: keyWebhookServiceName, EnvVars: envs(keyWebhookServiceName), Value: "gitops-reverser",
			Usage: "name of the Service in front of the webhook, in the daemon's namespace"},
		&cli.StringFlag{Name: keyWebhookClientCAFile, EnvVars: envs(keyWebhookClientCAFile),
			Usage: "PEM file of the CA(s) whose client certificates may call the webhook (the apiserver's, from its AdmissionConfiguration); empty means any caller that reaches the port"},
		&cli.DurationFlag{Name: keyCorrelationTTL, EnvVars: envs(keyCorrelationTTL), Value: webhook.DefaultTTL,
			Usage: "how long the webhook remembers who made a change, waiting for the watch to see it"},
		&cli.IntFlag{Name: keyCorrelationCapacity, EnvVars: envs(keyCorrelationCapacity), Value: webhook.DefaultCapacity,
			Usage: "most changes remembered at once; the least recently used are evicted beyond it"},
		&cli.StringFlag{Name: keyMetricsBindAddress, EnvVars: envs(keyMetricsBindAddress), Value: ":8080",
			Usage: "address of the Prometheus /metrics endpoint"},
		&cli.StringFlag{Name: keyHealthBindAddress, EnvVars: envs(keyHealthBindAddress), Value: ":8081",
			Usage: "address of the /healthz and /readyz endpoints"},
		&cli.BoolFlag{Name: keyHaltWriteBack, EnvVars: envs(keyHaltWriteBack),
			Usage: "kill switch: apply nothing from Git, automatic or approved; proposals are still opened"},
		&cli.DurationFlag{Name: keyWriteBackInterval, EnvVars: envs(keyWriteBackInterval), Value: writeback.DefaultInterval,
			Usage: "how often each write-back destination is fetched and compared with the cluster (at least 10s)"},
		&cli.IntFlag{Name: keyMaxProposalsPerTick, EnvVars: envs(keyMaxProposalsPerTick), Value: writeback.DefaultMaxPerTick,
			Usage: "proposals one write-back run opens at most; the rest come on the next runs"},
		&cli.DurationFlag{Name: keySyncRunRetention, EnvVars: envs(keySyncRunRetention), Value: writeback.DefaultRetention,
			Usage: "how long successful SyncRuns are kept"},
		&cli.DurationFlag{Name: keySyncRunRetentionFail, EnvVars: envs(keySyncRunRetentionFail), Value: writeback.DefaultFailedRetention,
			Usage: "how long failed and partial SyncRuns are kept"},
		&cli.DurationFlag{Name: keyProposalRetention, EnvVars: envs(keyProposalRetention), Value: writeback.DefaultProposalRetention,
			Usage: "how long a Proposal is kept once it ended (Applied, Rejected, Stale, Superseded); Pending and Ignored ones are kept"},
		&cli.StringFlag{Name: keyReceiverBindAddress, EnvVars: envs(keyReceiverBindAddress),
			Usage: "address of the Receivers' webhook server (Git hosts, CDEvents), e.g. :9292; empty means off"},
		&cli.StringFlag{Name: keyReceiverCertDir, EnvVars: envs(keyReceiverCertDir),
			Usage: "directory with tls.crt and tls.key for the Receivers' server; empty means plain HTTP, for an Ingress in front"},
		&cli.StringFlag{Name: keyGitCommitterName, EnvVars: envs(keyGitCommitterName), Value: gitops.Bot.Name,
			Usage: "the daemon's name in Git: the committer of every commit and the author of changes nobody is credited with"},
		&cli.StringFlag{Name: keyGitCommitterEmail, EnvVars: envs(keyGitCommitterEmail), Value: gitops.Bot.Email,
			Usage: "the daemon's email in Git; for signed commits to show as verified, a Git host wants it to be an email of the account that holds the signing key"},
		&cli.StringFlag{Name: keyUIBindAddress, EnvVars: envs(keyUIBindAddress),
			Usage: "address of the operator page (destinations, sync runs, proposals), e.g. :9090; empty means off"},
		&cli.StringFlag{Name: keyUIAuth, EnvVars: envs(keyUIAuth), Value: uiAuthToken,
			Usage: "who may see the operator page: token (a Kubernetes bearer token, checked with a TokenReview and SubjectAccessReviews) or none (everything read-only, loopback addresses only)"},
		&cli.StringFlag{Name: keyUICertDir, EnvVars: envs(keyUICertDir),
			Usage: "directory with tls.crt and tls.key for the operator page; empty means plain HTTP, for an Ingress with TLS in front"},
		&cli.BoolFlag{Name: keyLeaderElect, EnvVars: envs(keyLeaderElect),
			Usage: "run as one of several replicas: only the holder of a Lease mirrors, pushes, applies and serves webhooks; the others stand by"},
		&cli.StringFlag{Name: keyLeaderElectionNS, EnvVars: envs(keyLeaderElectionNS),
			Usage: "namespace of the leader election Lease; empty means the daemon's namespace"},
		&cli.StringFlag{Name: keyLeaderElectionID, EnvVars: envs(keyLeaderElectionID), Value: "gitops-reverser-leader",
			Usage: "name of the leader election Lease"},
		&cli.DurationFlag{Name: keyLeaseDuration, EnvVars: envs(keyLeaseDuration), Value: 15 * time.Second,
			Usage: "how long a standby waits after the leader's last renewal before it takes the Lease"},
		&cli.DurationFlag{Name: keyRenewDeadline, EnvVars: envs(keyRenewDeadline), Value: 10 * time.Second,
			Usage: "how long the leader keeps trying to renew before it steps down; pushes stop this long after the last renewal"},
		&cli.DurationFlag{Name: keyRetryPeriod, EnvVars: envs(keyRetryPeriod), Value: 2 * time.Second,
			Usage: "how often the Lease is renewed by the leader and tried by a standby"},
		&cli.StringFlag{Name: keyPodName, EnvVars: envs(keyPodName), Value: defaultPodName(),
			Usage: "this replica's Pod, which it labels configbutler.ai/leader=true while it leads; defaults to the hostname in a cluster, empty (no label) outside"},
		&cli.StringFlag{Name: keyShards, EnvVars: envs(keyShards), Value: shardsOff,
			Usage: "off: the leader does all the work; auto (with --leader-elect): every (repository, branch) is owned by one replica through a Lease of its own, and the replicas share them fairly"},
		&cli.StringFlag{Name: keyPeerAddress, EnvVars: envs(keyPeerAddress),
			Usage: "with --shards=auto, host:port where the other replicas reach this one's webhook server to hand it the authors of changes (the chart sets the Pod's IP); empty: changes to its shards made through another replica are credited to the bot"},
		&cli.StringFlag{Name: keyLogFormat, EnvVars: envs(keyLogFormat), Value: "text",
			Usage: "log format: text (human, coloured on a terminal) or json"},
		&cli.StringFlag{Name: keyLogLevel, EnvVars: envs(keyLogLevel), Value: "info",
			Usage: "log level: debug, info, warn or error"},
	}
}
