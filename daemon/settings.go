package daemon

import (
	"fmt"
	"net"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/urfave/cli/v2"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/configbutler/gitops-reverser/crds"
	"github.com/configbutler/gitops-reverser/gitops"
	"github.com/configbutler/gitops-reverser/watch"
	"github.com/configbutler/gitops-reverser/webhook"
	"github.com/configbutler/gitops-reverser/writeback"
)

// setting is one key of the configuration: its flag (name, environment variable, default and
// usage) bound to the field of the Config it fills, and what its value must be.
type setting struct {
	flag cli.Flag
	// check says what is wrong with the value, once every value is read and converted; "" when
	// nothing is, and nil when any value will do.
	check func() string
}

// rawSettings holds the values that become a Config's only once converted: units, kinds and lists.
type rawSettings struct {
	approverPolicy, crossNamespace, logLevel, shards string
	batchMaxBytesMiB, batchMaxWaitSec, batchQuietMs  int
	discoveryExclude                                 cli.StringSlice
	levelErr                                         error
}

// must is "" when ok, else the message format says.
func must(ok bool, format string, args ...any) string {
	if ok {
		return ""
	}
	return fmt.Sprintf(format, args...)
}

func stringKey(key string, dst *string, def, usage string, check func() string) setting {
	return setting{flag: &cli.StringFlag{Name: key, EnvVars: envs(key), Value: def, Usage: usage, Destination: dst}, check: check}
}

func boolKey(key string, dst *bool, def bool, usage string) setting {
	return setting{flag: &cli.BoolFlag{Name: key, EnvVars: envs(key), Value: def, Usage: usage, Destination: dst}}
}

func intKey(key string, dst *int, def int, usage string, check func() string) setting {
	return setting{flag: &cli.IntFlag{Name: key, EnvVars: envs(key), Value: def, Usage: usage, Destination: dst}, check: check}
}

func durationKey(key string, dst *time.Duration, def time.Duration, usage string, check func() string) setting {
	return setting{flag: &cli.DurationFlag{Name: key, EnvVars: envs(key), Value: def, Usage: usage, Destination: dst}, check: check}
}

// atLeast is a check that d is at least least.
func atLeast(d *time.Duration, least time.Duration, shown string) func() string {
	return func() string { return must(*d >= least, "must be at least %s, got %s", shown, *d) }
}

// nonEmpty is a check that s is not empty.
func nonEmpty(s *string) func() string {
	return func() string { return must(*s != "", "must not be empty") }
}

// hostPortOrOff is a check that an optional server's address is host:port or :port when set.
func hostPortOrOff(addr *string) func() string {
	return func() string {
		if *addr == "" {
			return ""
		}
		_, port, err := net.SplitHostPort(*addr)
		return must(err == nil && port != "", "must be host:port or :port, got %q", *addr)
	}
}

// settings is every key of the configuration, in the order the reference lists them, bound to
// cfg (and raw, for what is converted after reading).
func settings(cfg *Config, raw *rawSettings) []setting {
	m, wh, wb, l := &cfg.Mirror, &cfg.Webhook, &cfg.WriteBack, &cfg.Leader
	return []setting{
		stringKey(keyConfig, nil, "", "path of a YAML config file whose keys are these flag names", nil),
		stringKey(keyKubeconfig, &cfg.Kubeconfig, "", "kubeconfig to use; empty means $KUBECONFIG, ~/.kube/config, then the in-cluster config", nil),
		boolKey(keyInstallCRDs, &cfg.InstallCRDs, true, "apply the configbutler.ai CRDs at start; set false where Helm or another tool owns them"),
		stringKey(keyApproverPolicy, &raw.approverPolicy, string(crds.ApproverPolicyMutating),
			"admission policies applied with the CRDs that make a Proposal's approval carry its approver (spec.decidedBy): "+
				"mutating (the apiserver writes it where it serves MutatingAdmissionPolicy, 1.36+, and refuses any other name), "+
				"validating (an approval must name its approver, 1.30+) or none (the admission webhook alone tells)",
			func() string {
				return must(slices.Contains([]crds.ApproverPolicy{crds.ApproverPolicyMutating, crds.ApproverPolicyValidating, crds.ApproverPolicyNone}, cfg.ApproverPolicy),
					"must be mutating, validating or none, got %q", cfg.ApproverPolicy)
			}),
		stringKey(keyCrossNamespaceRefs, &raw.crossNamespace, string(watch.CrossNamespaceConsent),
			"whether a GitDestination may use a GitRepoConfig, and a WatchRule a GitDestination, of another namespace: consent (only when the object referred to admits the namespace in its spec.accessPolicy) or deny (never)",
			func() string {
				return must(slices.Contains([]watch.CrossNamespaceRefs{watch.CrossNamespaceConsent, watch.CrossNamespaceDeny}, m.CrossNamespace),
					"must be consent or deny, got %q", m.CrossNamespace)
			}),
		stringKey(keyDefaultSA, &m.DefaultSA, "",
			"the ServiceAccount, in each WatchRule's namespace, that a rule naming none (spec.serviceAccountName) acts as: its rights bound what the rule mirrors, and write-back applies the rule's objects as it; empty lets such rules read with the daemon's rights, except Secrets, and write nothing back",
			func() string {
				return must(m.DefaultSA == "" || len(validation.IsDNS1123Subdomain(m.DefaultSA)) == 0, "must be a ServiceAccount name, got %q", m.DefaultSA)
			}),
		boolKey(keyEnableWatchIngestion, &m.Enabled, true, "list and watch the selected resources and mirror them into Git"),
		durationKey(keyDiscoveryRefresh, &m.DiscoveryRefresh, 5*time.Minute, "how often API discovery is re-read to follow CRDs being installed or removed",
			atLeast(&m.DiscoveryRefresh, 10*time.Second, "10s")),
		boolKey(keyWatchAll, &m.WatchAll, false, "when a rule omits resources, select every list+watch-able resource instead of the desired-state default"),
		boolKey(keyRemoteAllowExec, &m.Remote.AllowExec, false, "let RemoteClusters' kubeconfigs run exec credential plugins and auth providers inside the daemon's container"),
		boolKey(keyRemoteAllowInsecure, &m.Remote.AllowInsecure, false, "let RemoteClusters' kubeconfigs skip the verification of their apiserver's certificate"),
		{flag: &cli.StringSliceFlag{Name: keyDiscoveryExclude, EnvVars: envs(keyDiscoveryExclude), Destination: &raw.discoveryExclude,
			Usage: "resource to never watch: resource.group, or a bare resource name for every group (repeatable)"},
			check: func() string {
				for _, ex := range m.DiscoveryExclude {
					if ex == "" || ex[0] == '.' {
						return fmt.Sprintf("%q is not resource or resource.group", ex)
					}
				}
				return ""
			}},
		intKey(keyBatchMaxFiles, &m.Batch.MaxFiles, gitops.DefaultMaxFiles, "flush a batch to Git once it holds this many files",
			func() string { return must(m.Batch.MaxFiles >= 1, "must be at least 1, got %d", m.Batch.MaxFiles) }),
		intKey(keyBatchMaxBytesMiB, &raw.batchMaxBytesMiB, gitops.DefaultMaxBytes>>20, "flush a batch to Git once it holds this many MiB",
			func() string {
				return must(raw.batchMaxBytesMiB >= 1 && raw.batchMaxBytesMiB <= 1024, "must be between 1 and 1024, got %d", raw.batchMaxBytesMiB)
			}),
		intKey(keyBatchMaxWaitSec, &raw.batchMaxWaitSec, int(gitops.DefaultMaxWait/time.Second), "the longest a change waits in a batch before it is committed, in seconds",
			func() string {
				return must(raw.batchMaxWaitSec >= 1, "must be at least 1, got %d", raw.batchMaxWaitSec)
			}),
		intKey(keyBatchQuietMs, &raw.batchQuietMs, int(gitops.DefaultQuiet/time.Millisecond), "commit a batch once no new change has arrived for this many milliseconds",
			func() string {
				return must(m.Batch.Quiet >= 10*time.Millisecond && m.Batch.Quiet <= m.Batch.MaxWait,
					"must be between 10 and %s in milliseconds, got %d", keyBatchMaxWaitSec, raw.batchQuietMs)
			}),
		intKey(keyWorkersMaxGlobal, &m.MaxWorkers, 24, "most Git workers (one per repository and branch) running at once",
			func() string { return must(m.MaxWorkers >= 1, "must be at least 1, got %d", m.MaxWorkers) }),
		intKey(keyWorkersMaxPerRepo, &m.MaxWorkersPerRepo, 5, "most Git workers (branches) running at once for one repository",
			func() string {
				return must(m.MaxWorkersPerRepo >= 1 && m.MaxWorkersPerRepo <= m.MaxWorkers,
					"must be between 1 and %s (%d), got %d", keyWorkersMaxGlobal, m.MaxWorkers, m.MaxWorkersPerRepo)
			}),
		durationKey(keyPullRequestPoll, &m.RequestPoll, gitops.DefaultRequestPoll,
			"how often a destination that delivers by pull request looks at its branch and head branch when nothing else makes it, to follow a merge or a push to the branch",
			atLeast(&m.RequestPoll, time.Second, "1s")),
		stringKey(keyWorkDir, &cfg.WorkDir, defaultWorkDir(),
			"directory for the daemon's Git clones; defaults to /var/cache/gitops-reverser in a cluster, else the user's cache directory", nonEmpty(&cfg.WorkDir)),
		stringKey(keyNamespace, &cfg.Namespace, defaultNamespace(),
			"the daemon's own namespace (Events, commit trailers); defaults to the Pod's namespace in-cluster", nonEmpty(&cfg.Namespace)),
		boolKey(keyEnableWebhook, &wh.Enabled, true, "run the admission webhook that records who changed an object, so commits carry that author"),
		stringKey(keyWebhookBindAddress, &wh.BindAddress, ":9443", "HTTPS address of the admission webhook", nil),
		stringKey(keyWebhookCertDir, &wh.CertDir, "",
			"directory with tls.crt, tls.key (and ca.crt) for the webhook, e.g. from cert-manager; empty means the daemon manages its own CA and certificate in a Secret", nil),
		stringKey(keyWebhookURL, &wh.URL, "",
			"base URL (https://host:port) the apiserver calls when the daemon runs outside the cluster; empty means the in-cluster Service",
			func() string {
				if wh.URL == "" {
					return ""
				}
				u, err := url.Parse(wh.URL)
				return must(err == nil && u.Scheme == "https" && u.Host != "" && u.Path == "" && u.User == nil,
					"must be a base URL like https://host:port (no path, no credentials), got %q", wh.URL)
			}),
		stringKey(keyWebhookServiceName, &wh.ServiceName, "gitops-reverser", "name of the Service in front of the webhook, in the daemon's namespace",
			nonEmpty(&wh.ServiceName)),
		stringKey(keyWebhookClientCAFile, &wh.ClientCAFile, "",
			"PEM file of the CA(s) whose client certificates may call the webhook (the apiserver's, from its AdmissionConfiguration); empty means any caller that reaches the port", nil),
		durationKey(keyCorrelationTTL, &wh.CorrelationTTL, webhook.DefaultTTL, "how long the webhook remembers who made a change, waiting for the watch to see it",
			atLeast(&wh.CorrelationTTL, time.Second, "1s")),
		intKey(keyCorrelationCapacity, &wh.CorrelationCapacity, webhook.DefaultCapacity, "most changes remembered at once; the least recently used are evicted beyond it",
			func() string {
				return must(wh.CorrelationCapacity >= 100, "must be at least 100, got %d", wh.CorrelationCapacity)
			}),
		stringKey(keyMetricsBindAddress, &cfg.Endpoints.MetricsBindAddress, ":8080", "address of the Prometheus /metrics endpoint", nil),
		stringKey(keyHealthBindAddress, &cfg.Endpoints.HealthBindAddress, ":8081", "address of the /healthz and /readyz endpoints", nil),
		boolKey(keyHaltWriteBack, &wb.Halt, false, "kill switch: apply nothing from Git, automatic or approved; proposals are still opened"),
		durationKey(keyWriteBackInterval, &wb.Interval, writeback.DefaultInterval, "how often each write-back destination is fetched and compared with the cluster (at least 10s)",
			atLeast(&wb.Interval, 10*time.Second, "10s")),
		intKey(keyMaxProposalsPerTick, &wb.MaxPerTick, writeback.DefaultMaxPerTick, "proposals one write-back run opens at most; the rest come on the next runs",
			func() string { return must(wb.MaxPerTick >= 1, "must be at least 1, got %d", wb.MaxPerTick) }),
		durationKey(keySyncRunRetention, &wb.Retention, writeback.DefaultRetention, "how long successful SyncRuns are kept", atLeast(&wb.Retention, time.Hour, "1h")),
		durationKey(keySyncRunRetentionFail, &wb.FailedRetention, writeback.DefaultFailedRetention, "how long failed and partial SyncRuns are kept",
			atLeast(&wb.FailedRetention, time.Hour, "1h")),
		durationKey(keyProposalRetention, &wb.ProposalRetention, writeback.DefaultProposalRetention,
			"how long a Proposal is kept once it ended (Applied, Rejected, Stale, Superseded); Pending and Ignored ones are kept", atLeast(&wb.ProposalRetention, time.Hour, "1h")),
		stringKey(keyReceiverBindAddress, &cfg.Receivers.BindAddress, "",
			"address of the Receivers' webhook server (Git hosts, CDEvents), e.g. :9292; empty means off", hostPortOrOff(&cfg.Receivers.BindAddress)),
		stringKey(keyReceiverCertDir, &cfg.Receivers.CertDir, "",
			"directory with tls.crt and tls.key for the Receivers' server; empty means plain HTTP, for an Ingress in front",
			func() string {
				return must(cfg.Receivers.CertDir == "" || cfg.Receivers.BindAddress != "", "has no effect without %s", keyReceiverBindAddress)
			}),
		stringKey(keyGitCommitterName, &cfg.Bot.Name, gitops.Bot.Name,
			"the daemon's name in Git: the committer of every commit and the author of changes nobody is credited with",
			func() string {
				return must(cfg.Bot.Name != "" && !strings.ContainsAny(cfg.Bot.Name, "<>\n"), "must be a name without <, > or newlines, got %q", cfg.Bot.Name)
			}),
		stringKey(keyGitCommitterEmail, &cfg.Bot.Email, gitops.Bot.Email,
			"the daemon's email in Git; for signed commits to show as verified, a Git host wants it to be an email of the account that holds the signing key",
			func() string {
				return must(strings.Count(cfg.Bot.Email, "@") == 1 && !strings.ContainsAny(cfg.Bot.Email, "<> \n"), "must be an email address, got %q", cfg.Bot.Email)
			}),
		stringKey(keyUIBindAddress, &cfg.UI.BindAddress, "", "address of the operator page (destinations, sync runs, proposals), e.g. :9090; empty means off", nil),
		stringKey(keyUIAuth, &cfg.UI.Auth, uiAuthToken,
			"who may see the operator page: token (a Kubernetes bearer token, checked with a TokenReview and SubjectAccessReviews) or none (everything read-only, loopback addresses only)", nil),
		stringKey(keyUICertDir, &cfg.UI.CertDir, "", "directory with tls.crt and tls.key for the operator page; empty means plain HTTP, for an Ingress with TLS in front", nil),
		boolKey(keyNotifications, &cfg.Notify.Enabled, true,
			"send the daemon's Events that NotifyRules select to their NotifyChannels (Slack, Teams, webhooks, CloudEvents, commit statuses); off: no informer, no goroutine"),
		stringKey(keyPageURL, &cfg.Notify.PageURL, "",
			"the operator page's address as people reach it (https://gitops.example.com), for the links of notifications and commit statuses; empty: messages carry no link",
			func() string {
				u, err := url.Parse(cfg.Notify.PageURL)
				return must(cfg.Notify.PageURL == "" || err == nil && (u.Scheme == "https" || u.Scheme == "http") && u.Host != "",
					"must be an http(s) URL, got %q", cfg.Notify.PageURL)
			}),
		boolKey(keyLeaderElect, &l.Elect, false, "run as one of several replicas: only the holder of a Lease mirrors, pushes, applies and serves webhooks; the others stand by"),
		stringKey(keyLeaderElectionNS, &l.Namespace, "", "namespace of the leader election Lease; empty means the daemon's namespace", nil),
		stringKey(keyLeaderElectionID, &l.ID, "gitops-reverser-leader", "name of the leader election Lease", nil),
		durationKey(keyLeaseDuration, &l.LeaseDuration, 15*time.Second, "how long a standby waits after the leader's last renewal before it takes the Lease", nil),
		durationKey(keyRenewDeadline, &l.RenewDeadline, 10*time.Second,
			"how long the leader keeps trying to renew before it steps down; pushes stop this long after the last renewal", nil),
		durationKey(keyRetryPeriod, &l.RetryPeriod, 2*time.Second, "how often the Lease is renewed by the leader and tried by a standby", nil),
		stringKey(keyPodName, &l.PodName, defaultPodName(),
			"this replica's Pod, which it labels configbutler.ai/leader=true while it leads; defaults to the hostname in a cluster, empty (no label) outside", nil),
		stringKey(keyShards, &raw.shards, shardsOff,
			"off: the leader does all the work; auto (with --leader-elect): every (repository, branch) is owned by one replica through a Lease of its own, and the replicas share them fairly",
			func() string {
				if raw.shards != shardsOff && raw.shards != shardsAuto {
					return fmt.Sprintf("must be %s or %s, got %q", shardsOff, shardsAuto, raw.shards)
				}
				return must(!l.Shards || l.Elect, "%s needs --%s: the cluster-wide work stays with one leader", shardsAuto, keyLeaderElect)
			}),
		stringKey(keyPeerAddress, &l.PeerAddress, "",
			"with --shards=auto, host:port where the other replicas reach this one's webhook server to hand it the authors of changes (the chart sets the Pod's IP); empty: changes to its shards made through another replica are credited to the bot",
			func() string {
				return must(l.PeerAddress == "" || validHostPort(l.PeerAddress), "must be host:port, got %q", l.PeerAddress)
			}),
		stringKey(keyLogFormat, &cfg.Log.Format, "text", "log format: text (human, coloured on a terminal) or json",
			func() string {
				return must(slices.Contains([]string{"text", "json"}, cfg.Log.Format), "must be text or json, got %q", cfg.Log.Format)
			}),
		stringKey(keyLogLevel, &raw.logLevel, "info", "log level: debug, info, warn or error",
			func() string {
				return must(raw.levelErr == nil, "must be debug, info, warn or error, got %q", raw.logLevel)
			}),
	}
}

// convert fills what the Config holds only once converted from raw, and what no key sets.
func (raw *rawSettings) convert(cfg *Config) {
	cfg.ApproverPolicy = crds.ApproverPolicy(raw.approverPolicy)
	cfg.Mirror.CrossNamespace = watch.CrossNamespaceRefs(raw.crossNamespace)
	cfg.Mirror.DiscoveryExclude = raw.discoveryExclude.Value()
	cfg.Mirror.Batch.MaxBytes = int64(raw.batchMaxBytesMiB) << 20
	cfg.Mirror.Batch.MaxWait = time.Duration(raw.batchMaxWaitSec) * time.Second
	cfg.Mirror.Batch.Quiet = time.Duration(raw.batchQuietMs) * time.Millisecond
	cfg.Bot.Name, cfg.Bot.Email = strings.TrimSpace(cfg.Bot.Name), strings.TrimSpace(cfg.Bot.Email)
	cfg.Webhook.URL = strings.TrimSuffix(cfg.Webhook.URL, "/")
	cfg.Leader.Shards = raw.shards == shardsAuto
	if cfg.Leader.Namespace == "" {
		cfg.Leader.Namespace = cfg.Namespace
	}
	cfg.InCluster = inCluster()
	raw.levelErr = cfg.Log.Level.UnmarshalText([]byte(raw.logLevel))
}
