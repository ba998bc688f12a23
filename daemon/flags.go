package daemon

import (
	"os"
	"path/filepath"
	"strings"

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
	keyRemoteAllowExec      = "remote-allow-exec"
	keyRemoteAllowInsecure  = "remote-allow-insecure"
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
	keyNotifications        = "notifications"
	keyPageURL              = "page-url"
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
func Flags() []cli.Flag { return flagsOf(settings(&Config{}, &rawSettings{})) }

func flagsOf(set []setting) []cli.Flag {
	out := make([]cli.Flag, len(set))
	for i, s := range set {
		out[i] = s.flag
	}
	return out
}
