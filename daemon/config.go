package daemon

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"sort"
	"strconv"
	"time"

	"github.com/configbutler/gitops-reverser/crds"
	"github.com/configbutler/gitops-reverser/gitops"
	"github.com/configbutler/gitops-reverser/watch"
	"github.com/urfave/cli/v2"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"

	"github.com/configbutler/gitops-reverser/lease"
)

// Config is the validated configuration. Each part has its own section; the facts every part
// shares (the daemon's namespace, its name in Git, where it keeps clones) sit at the top.
type Config struct {
	Kubeconfig  string
	InstallCRDs bool
	// ApproverPolicy is which admission policies are applied with the CRDs (--approver-policy).
	ApproverPolicy crds.ApproverPolicy
	WorkDir        string
	Namespace      string
	// Bot is the daemon in Git: the committer of every commit, and the author of changes nobody
	// can be credited with.
	Bot gitops.Signature
	// InCluster is not a setting: it says whether the daemon runs in a Pod, where the apiserver
	// can reach the webhook through its Service.
	InCluster bool
	Log       LogConfig
	Endpoints EndpointsConfig
	Mirror    MirrorConfig
	Webhook   WebhookConfig
	WriteBack WriteBackConfig
	Receivers ServerConfig
	UI        UIConfig
	Notify    NotifyConfig
	Leader    LeaderConfig
}

// LogConfig is how the daemon logs.
type LogConfig struct {
	Format string // text or json
	Level  slog.Level
}

// EndpointsConfig is where metrics and health are served.
type EndpointsConfig struct {
	MetricsBindAddress, HealthBindAddress string
}

// MirrorConfig is the cluster → Git flow's.
type MirrorConfig struct {
	Enabled           bool
	CrossNamespace    watch.CrossNamespaceRefs
	DefaultSA         string
	DiscoveryRefresh  time.Duration
	WatchAll          bool
	Remote            watch.RemoteOptions // what RemoteClusters' kubeconfigs may ask of the daemon
	DiscoveryExclude  []string
	Batch             gitops.BatchLimits
	MaxWorkers        int
	MaxWorkersPerRepo int
	RequestPoll       time.Duration // see gitops.PoolConfig.RequestPoll
}

// WebhookConfig is the admission webhook's, which credits changes to their authors.
type WebhookConfig struct {
	Enabled                                              bool
	BindAddress, CertDir, URL, ServiceName, ClientCAFile string
	CorrelationTTL                                       time.Duration
	CorrelationCapacity                                  int
}

// WriteBackConfig is the Git → cluster flow's.
type WriteBackConfig struct {
	Halt                       bool
	Interval                   time.Duration
	MaxPerTick                 int
	Retention, FailedRetention time.Duration // of SyncRuns
	ProposalRetention          time.Duration
}

// ServerConfig is where an optional server listens (empty: off) and where its TLS certificate is
// (empty: plain HTTP, for an Ingress in front).
type ServerConfig struct {
	BindAddress, CertDir string
}

// UIConfig is the operator page's.
type UIConfig struct {
	ServerConfig
	Auth string // token or none
}

// LeaderConfig is leader election's.
type LeaderConfig struct {
	Elect                                     bool
	Namespace, ID                             string
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
	PodName                                   string
	// Shards shares the destinations out across the replicas (--shards=auto), each (repository,
	// branch) owned through a Lease of its own; PeerAddress is where the others reach this one.
	Shards      bool
	PeerAddress string
}

// Values of --shards.
const (
	shardsOff  = "off"
	shardsAuto = "auto"
)

func (c LeaderConfig) timings() lease.Timings {
	return lease.Timings{LeaseDuration: c.LeaseDuration, RenewDeadline: c.RenewDeadline, RetryPeriod: c.RetryPeriod}
}

// ConfigError is a configuration the daemon refuses to start with; main exits with code 2.
type ConfigError struct{ Err error }

func (e *ConfigError) Error() string { return e.Err.Error() }
func (e *ConfigError) Unwrap() error { return e.Err }

// applyConfigFile sets every key of the YAML file at path that neither a flag nor an environment
// variable has set already, which gives the precedence flag > env > file > default.
// Unknown keys are errors: a typo must not silently fall back to a default.
func applyConfigFile(c *cli.Context, path string) error {
	raw, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("read config file: %w", err)
	}
	var values map[string]any
	if err := yaml.Unmarshal(raw, &values); err != nil {
		return fmt.Errorf("config file %s: %w", path, err)
	}
	known := map[string]bool{}
	for _, f := range Flags() {
		known[f.Names()[0]] = true
	}
	keys := make([]string, 0, len(values))
	for k := range values {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, key := range keys {
		if !known[key] || key == keyConfig {
			return fmt.Errorf("config file %s: unknown key %q", path, key)
		}
		if c.IsSet(key) {
			continue
		}
		items, isList := values[key].([]any)
		if !isList {
			items = []any{values[key]}
		}
		for _, item := range items {
			if err := c.Set(key, yamlScalar(item)); err != nil {
				return fmt.Errorf("config file %s: key %q: invalid value %v, want %s: %w", path, key, values[key], expected(key), err)
			}
		}
	}
	return nil
}

// expected describes the kind of value a key takes, for error messages.
func expected(key string) string {
	for _, f := range Flags() {
		if f.Names()[0] != key {
			continue
		}
		switch f.(type) {
		case *cli.IntFlag:
			return "a whole number"
		case *cli.DurationFlag:
			return "a duration such as 30s or 5m"
		case *cli.BoolFlag:
			return "true or false"
		case *cli.StringSliceFlag:
			return "a list of strings"
		}
	}
	return "a string"
}

// yamlScalar renders a decoded YAML value as the text a flag would receive. sigs.k8s.io/yaml
// decodes numbers as float64; whole numbers are printed without a decimal point.
func yamlScalar(v any) string {
	if f, ok := v.(float64); ok && f == float64(int64(f)) {
		return fmt.Sprint(int64(f))
	}
	return fmt.Sprint(v)
}

// configOf converts what the flags of set read into cfg and checks every value, naming the key
// at fault.
func configOf(cfg *Config, raw *rawSettings, set []setting) (Config, error) {
	raw.convert(cfg)
	var errs []error
	for _, s := range set {
		if s.check == nil {
			continue
		}
		if msg := s.check(); msg != "" {
			errs = append(errs, fmt.Errorf("%s: %s", s.flag.Names()[0], msg))
		}
	}
	check := func(ok bool, key, format string, args ...any) {
		if !ok {
			errs = append(errs, fmt.Errorf("%s: %s", key, fmt.Sprintf(format, args...)))
		}
	}
	checkUI(*cfg, check)
	checkLeaderElection(*cfg, check)
	return *cfg, errors.Join(errs...)
}

// validHostPort says whether s is host:port with a host and a port number.
func validHostPort(s string) bool {
	host, port, err := net.SplitHostPort(s)
	n, perr := strconv.Atoi(port)
	return err == nil && host != "" && perr == nil && n > 0 && n < 65536
}

// checkLeaderElection checks the Lease's name and timing: the leader must give up (renew deadline)
// well before a standby may take over (lease duration), and retry several times within the
// deadline. Lease durations are whole seconds in the Lease object.
func checkLeaderElection(cfg Config, check func(ok bool, key, format string, args ...any)) {
	check(len(validation.IsDNS1123Subdomain(cfg.Leader.ID)) == 0, keyLeaderElectionID,
		"must be a valid object name (lowercase letters, digits, '-' and '.'), got %q", cfg.Leader.ID)
	check(cfg.Leader.LeaseDuration >= 2*time.Second && cfg.Leader.LeaseDuration%time.Second == 0, keyLeaseDuration,
		"must be whole seconds, at least 2s, got %s", cfg.Leader.LeaseDuration)
	check(cfg.Leader.RenewDeadline >= time.Second && cfg.Leader.RenewDeadline < cfg.Leader.LeaseDuration, keyRenewDeadline,
		"must be at least 1s and less than %s (%s), got %s", keyLeaseDuration, cfg.Leader.LeaseDuration, cfg.Leader.RenewDeadline)
	check(cfg.Leader.RetryPeriod >= 100*time.Millisecond && 2*cfg.Leader.RetryPeriod <= cfg.Leader.RenewDeadline, keyRetryPeriod,
		"must be at least 100ms and at most half of %s (%s), got %s", keyRenewDeadline, cfg.Leader.RenewDeadline, cfg.Leader.RetryPeriod)
	check(cfg.Leader.PodName == "" || len(validation.IsDNS1123Subdomain(cfg.Leader.PodName)) == 0, keyPodName,
		"must be a Pod name, got %q", cfg.Leader.PodName)
}
