package daemon

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/configbutler/gitops-reverser/gitops"
	"github.com/urfave/cli/v2"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"
)

// Config is the validated configuration, passed down to components as plain values.
type Config struct {
	Kubeconfig           string
	InstallCRDs          bool
	EnableWatchIngestion bool
	DiscoveryRefresh     time.Duration
	WatchAll             bool
	DiscoveryExclude     []string
	BatchMaxFiles        int
	BatchMaxBytes        int64
	BatchMaxWait         time.Duration
	BatchQuiet           time.Duration
	WorkersMaxGlobal     int
	WorkersMaxPerRepo    int
	WorkDir              string
	Namespace            string
	EnableWebhook        bool
	WebhookBindAddress   string
	WebhookCertDir       string
	WebhookURL           string
	WebhookServiceName   string
	WebhookClientCAFile  string
	CorrelationTTL       time.Duration
	CorrelationCapacity  int
	MetricsBindAddress   string
	HealthBindAddress    string
	LogFormat            string
	LogLevel             slog.Level
	HaltWriteBack        bool
	WriteBackInterval    time.Duration
	MaxProposalsPerTick  int
	SyncRunRetention     time.Duration
	SyncRunRetentionFail time.Duration
	ReceiverBindAddress  string
	ReceiverCertDir      string
	UIBindAddress        string
	UIAuth               string
	UICertDir            string
	LeaderElect          bool
	LeaderElectionNS     string
	LeaderElectionID     string
	LeaseDuration        time.Duration
	RenewDeadline        time.Duration
	RetryPeriod          time.Duration
	PodName              string
	// Bot is the daemon in Git: the committer of every commit, and the author of changes nobody
	// can be credited with.
	Bot gitops.Signature
	// InCluster is not a setting: it says whether the daemon runs in a Pod, where the apiserver
	// can reach the webhook through its Service.
	InCluster bool
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

// configFrom reads the parsed flags into a Config and checks every value, naming the key at fault.
func configFrom(c *cli.Context) (Config, error) {
	cfg := Config{
		Kubeconfig:           c.String(keyKubeconfig),
		InstallCRDs:          c.Bool(keyInstallCRDs),
		EnableWatchIngestion: c.Bool(keyEnableWatchIngestion),
		DiscoveryRefresh:     c.Duration(keyDiscoveryRefresh),
		WatchAll:             c.Bool(keyWatchAll),
		DiscoveryExclude:     c.StringSlice(keyDiscoveryExclude),
		BatchMaxFiles:        c.Int(keyBatchMaxFiles),
		BatchMaxBytes:        int64(c.Int(keyBatchMaxBytesMiB)) << 20,
		BatchMaxWait:         time.Duration(c.Int(keyBatchMaxWaitSec)) * time.Second,
		BatchQuiet:           time.Duration(c.Int(keyBatchQuietMs)) * time.Millisecond,
		WorkersMaxGlobal:     c.Int(keyWorkersMaxGlobal),
		WorkersMaxPerRepo:    c.Int(keyWorkersMaxPerRepo),
		WorkDir:              c.String(keyWorkDir),
		Namespace:            c.String(keyNamespace),
		EnableWebhook:        c.Bool(keyEnableWebhook),
		WebhookBindAddress:   c.String(keyWebhookBindAddress),
		WebhookCertDir:       c.String(keyWebhookCertDir),
		WebhookURL:           strings.TrimSuffix(c.String(keyWebhookURL), "/"),
		WebhookServiceName:   c.String(keyWebhookServiceName),
		WebhookClientCAFile:  c.String(keyWebhookClientCAFile),
		CorrelationTTL:       c.Duration(keyCorrelationTTL),
		CorrelationCapacity:  c.Int(keyCorrelationCapacity),
		MetricsBindAddress:   c.String(keyMetricsBindAddress),
		HealthBindAddress:    c.String(keyHealthBindAddress),
		LogFormat:            c.String(keyLogFormat),
		HaltWriteBack:        c.Bool(keyHaltWriteBack),
		WriteBackInterval:    c.Duration(keyWriteBackInterval),
		MaxProposalsPerTick:  c.Int(keyMaxProposalsPerTick),
		SyncRunRetention:     c.Duration(keySyncRunRetention),
		SyncRunRetentionFail: c.Duration(keySyncRunRetentionFail),
		ReceiverBindAddress:  c.String(keyReceiverBindAddress),
		ReceiverCertDir:      c.String(keyReceiverCertDir),
		UIBindAddress:        c.String(keyUIBindAddress),
		UIAuth:               c.String(keyUIAuth),
		UICertDir:            c.String(keyUICertDir),
		LeaderElect:          c.Bool(keyLeaderElect),
		LeaderElectionNS:     c.String(keyLeaderElectionNS),
		LeaderElectionID:     c.String(keyLeaderElectionID),
		LeaseDuration:        c.Duration(keyLeaseDuration),
		RenewDeadline:        c.Duration(keyRenewDeadline),
		RetryPeriod:          c.Duration(keyRetryPeriod),
		PodName:              c.String(keyPodName),
		Bot:                  gitops.Signature{Name: strings.TrimSpace(c.String(keyGitCommitterName)), Email: strings.TrimSpace(c.String(keyGitCommitterEmail))},
		InCluster:            inCluster(),
	}
	var errs []error
	check := func(ok bool, key, format string, args ...any) {
		if !ok {
			errs = append(errs, fmt.Errorf("%s: %s", key, fmt.Sprintf(format, args...)))
		}
	}
	check(cfg.DiscoveryRefresh >= 10*time.Second, keyDiscoveryRefresh, "must be at least 10s, got %s", cfg.DiscoveryRefresh)
	check(cfg.BatchMaxFiles >= 1, keyBatchMaxFiles, "must be at least 1, got %d", cfg.BatchMaxFiles)
	check(c.Int(keyBatchMaxBytesMiB) >= 1 && c.Int(keyBatchMaxBytesMiB) <= 1024, keyBatchMaxBytesMiB,
		"must be between 1 and 1024, got %d", c.Int(keyBatchMaxBytesMiB))
	check(c.Int(keyBatchMaxWaitSec) >= 1, keyBatchMaxWaitSec, "must be at least 1, got %d", c.Int(keyBatchMaxWaitSec))
	check(cfg.BatchQuiet >= 10*time.Millisecond && cfg.BatchQuiet <= cfg.BatchMaxWait, keyBatchQuietMs,
		"must be between 10 and %s in milliseconds, got %d", keyBatchMaxWaitSec, c.Int(keyBatchQuietMs))
	check(cfg.WorkersMaxGlobal >= 1, keyWorkersMaxGlobal, "must be at least 1, got %d", cfg.WorkersMaxGlobal)
	check(cfg.WorkersMaxPerRepo >= 1 && cfg.WorkersMaxPerRepo <= cfg.WorkersMaxGlobal, keyWorkersMaxPerRepo,
		"must be between 1 and %s (%d), got %d", keyWorkersMaxGlobal, cfg.WorkersMaxGlobal, cfg.WorkersMaxPerRepo)
	check(cfg.WorkDir != "", keyWorkDir, "must not be empty")
	check(cfg.Namespace != "", keyNamespace, "must not be empty")
	check(cfg.CorrelationTTL >= time.Second, keyCorrelationTTL, "must be at least 1s, got %s", cfg.CorrelationTTL)
	check(cfg.CorrelationCapacity >= 100, keyCorrelationCapacity, "must be at least 100, got %d", cfg.CorrelationCapacity)
	check(cfg.WriteBackInterval >= 10*time.Second, keyWriteBackInterval, "must be at least 10s, got %s", cfg.WriteBackInterval)
	check(cfg.MaxProposalsPerTick >= 1, keyMaxProposalsPerTick, "must be at least 1, got %d", cfg.MaxProposalsPerTick)
	check(cfg.SyncRunRetention >= time.Hour, keySyncRunRetention, "must be at least 1h, got %s", cfg.SyncRunRetention)
	check(cfg.SyncRunRetentionFail >= time.Hour, keySyncRunRetentionFail, "must be at least 1h, got %s", cfg.SyncRunRetentionFail)
	if cfg.ReceiverBindAddress != "" {
		_, port, err := net.SplitHostPort(cfg.ReceiverBindAddress)
		check(err == nil && port != "", keyReceiverBindAddress, "must be host:port or :port, got %q", cfg.ReceiverBindAddress)
	}
	check(cfg.ReceiverCertDir == "" || cfg.ReceiverBindAddress != "", keyReceiverCertDir, "has no effect without %s", keyReceiverBindAddress)
	checkUI(cfg, check)
	check(cfg.Bot.Name != "" && !strings.ContainsAny(cfg.Bot.Name, "<>\n"), keyGitCommitterName, "must be a name without <, > or newlines, got %q", cfg.Bot.Name)
	check(strings.Count(cfg.Bot.Email, "@") == 1 && !strings.ContainsAny(cfg.Bot.Email, "<> \n"), keyGitCommitterEmail, "must be an email address, got %q", cfg.Bot.Email)
	if cfg.LeaderElectionNS == "" {
		cfg.LeaderElectionNS = cfg.Namespace
	}
	checkLeaderElection(cfg, check)
	check(cfg.WebhookServiceName != "", keyWebhookServiceName, "must not be empty")
	if cfg.WebhookURL != "" {
		u, err := url.Parse(cfg.WebhookURL)
		check(err == nil && u.Scheme == "https" && u.Host != "" && u.Path == "" && u.User == nil, keyWebhookURL,
			"must be a base URL like https://host:port (no path, no credentials), got %q", cfg.WebhookURL)
	}
	check(slices.Contains([]string{"text", "json"}, cfg.LogFormat), keyLogFormat, "must be text or json, got %q", cfg.LogFormat)
	for _, ex := range cfg.DiscoveryExclude {
		check(ex != "" && ex[0] != '.', keyDiscoveryExclude, "%q is not resource or resource.group", ex)
	}
	if err := cfg.LogLevel.UnmarshalText([]byte(c.String(keyLogLevel))); err != nil {
		errs = append(errs, fmt.Errorf("%s: must be debug, info, warn or error, got %q", keyLogLevel, c.String(keyLogLevel)))
	}
	return cfg, errors.Join(errs...)
}

// checkLeaderElection checks the Lease's name and timing: the leader must give up (renew deadline)
// well before a standby may take over (lease duration), and retry several times within the
// deadline. Lease durations are whole seconds in the Lease object.
func checkLeaderElection(cfg Config, check func(ok bool, key, format string, args ...any)) {
	check(len(validation.IsDNS1123Subdomain(cfg.LeaderElectionID)) == 0, keyLeaderElectionID,
		"must be a valid object name (lowercase letters, digits, '-' and '.'), got %q", cfg.LeaderElectionID)
	check(cfg.LeaseDuration >= 2*time.Second && cfg.LeaseDuration%time.Second == 0, keyLeaseDuration,
		"must be whole seconds, at least 2s, got %s", cfg.LeaseDuration)
	check(cfg.RenewDeadline >= time.Second && cfg.RenewDeadline < cfg.LeaseDuration, keyRenewDeadline,
		"must be at least 1s and less than %s (%s), got %s", keyLeaseDuration, cfg.LeaseDuration, cfg.RenewDeadline)
	check(cfg.RetryPeriod >= 100*time.Millisecond && 2*cfg.RetryPeriod <= cfg.RenewDeadline, keyRetryPeriod,
		"must be at least 100ms and at most half of %s (%s), got %s", keyRenewDeadline, cfg.RenewDeadline, cfg.RetryPeriod)
	check(cfg.PodName == "" || len(validation.IsDNS1123Subdomain(cfg.PodName)) == 0, keyPodName,
		"must be a Pod name, got %q", cfg.PodName)
}
