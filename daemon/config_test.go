package daemon

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/configbutler/gitops-reverser/crds"
	"github.com/configbutler/gitops-reverser/gitops"
	"github.com/configbutler/gitops-reverser/watch"
	"github.com/google/go-cmp/cmp"
)

// parse runs the CLI with args (and whatever env the test set) and returns the Config the daemon
// would start with.
func parse(t *testing.T, args ...string) (Config, error) {
	t.Helper()
	var got Config
	err := runWith(context.Background(), append([]string{"gitops-reverser"}, args...), io.Discard, io.Discard,
		func(_ context.Context, cfg Config) error { got = cfg; return nil })
	return got, err
}

func writeConfigFile(t *testing.T, body string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestDefaultsMatchTheSpec(t *testing.T) {
	cache := outsideCluster(t)
	cfg, err := parse(t)
	if err != nil {
		t.Fatal(err)
	}
	want := Config{
		InstallCRDs: true, ApproverPolicy: crds.ApproverPolicyMutating, WorkDir: filepath.Join(cache, "gitops-reverser"), Namespace: "gitops-reverser-system", Bot: gitops.Bot,
		Log:       LogConfig{Format: "text"},
		Endpoints: EndpointsConfig{MetricsBindAddress: ":8080", HealthBindAddress: ":8081"},
		Mirror: MirrorConfig{CrossNamespace: watch.CrossNamespaceConsent,
			Enabled: true, DiscoveryRefresh: 5 * time.Minute,
			Batch:      gitops.BatchLimits{MaxFiles: 200, MaxBytes: 1 << 20, MaxWait: 20 * time.Second, Quiet: 1500 * time.Millisecond},
			MaxWorkers: 24, MaxWorkersPerRepo: 5, RequestPoll: time.Minute,
		},
		Webhook: WebhookConfig{Enabled: true, BindAddress: ":9443", ServiceName: "gitops-reverser",
			CorrelationTTL: time.Minute, CorrelationCapacity: 10000},
		WriteBack: WriteBackConfig{Interval: 5 * time.Minute, MaxPerTick: 25,
			Retention: 90 * 24 * time.Hour, FailedRetention: 365 * 24 * time.Hour, ProposalRetention: 30 * 24 * time.Hour},
		UI:     UIConfig{Auth: "token"},
		Notify: NotifyConfig{Enabled: true},
		Leader: LeaderConfig{Namespace: "gitops-reverser-system", ID: "gitops-reverser-leader",
			LeaseDuration: 15 * time.Second, RenewDeadline: 10 * time.Second, RetryPeriod: 2 * time.Second},
	}
	if diff := cmp.Diff(want, cfg); diff != "" {
		t.Fatalf("defaults (-want +got):\n%s", diff)
	}
}

func TestPrecedenceFlagOverEnvOverFileOverDefault(t *testing.T) {
	path := writeConfigFile(t, `
git-batch-max-files: 10
git-batch-max-wait-sec: 7
workers-max-global: 30
discovery-refresh: 1m
discovery-exclude: [pods, leases.coordination.k8s.io]
watch-all: true
`)
	t.Setenv(EnvVar(keyBatchMaxFiles), "20")
	t.Setenv(EnvVar(keyBatchMaxWaitSec), "8")
	cfg, err := parse(t, "--config", path, "--git-batch-max-files", "30")
	if err != nil {
		t.Fatal(err)
	}
	checks := []struct {
		key       string
		got, want any
	}{
		{"flag beats env and file", cfg.Mirror.Batch.MaxFiles, 30},
		{"env beats file", cfg.Mirror.Batch.MaxWait, 8 * time.Second},
		{"file beats default", cfg.Mirror.MaxWorkers, 30},
		{"file duration", cfg.Mirror.DiscoveryRefresh, time.Minute},
		{"file list", cfg.Mirror.DiscoveryExclude, []string{"pods", "leases.coordination.k8s.io"}},
		{"file bool", cfg.Mirror.WatchAll, true},
		{"default stays", cfg.Mirror.MaxWorkersPerRepo, 5},
	}
	for _, c := range checks {
		if diff := cmp.Diff(c.want, c.got); diff != "" {
			t.Errorf("%s (-want +got):\n%s", c.key, diff)
		}
	}
}

func TestConfigFileNamedByEnv(t *testing.T) {
	t.Setenv(EnvVar(keyConfig), writeConfigFile(t, "log-format: json\n"))
	cfg, err := parse(t)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Log.Format != "json" {
		t.Fatalf("log format = %q, want json from the file named by %s", cfg.Log.Format, EnvVar(keyConfig))
	}
}

func TestBadConfigIsAConfigErrorNamingTheKey(t *testing.T) {
	cases := []struct {
		name     string
		file     string
		env      map[string]string
		args     []string
		wantText string
	}{
		{name: "unknown key in file", file: "git-batch-max-filez: 3\n", wantText: `unknown key "git-batch-max-filez"`},
		{name: "wrong type in file", file: "git-batch-max-files: many\n", wantText: `key "git-batch-max-files"`},
		{name: "bad duration in file", file: "discovery-refresh: soon\n", wantText: `key "discovery-refresh"`},
		{name: "unparseable file", file: "{not yaml", wantText: "config file"},
		{name: "bad flag value", args: []string{"--workers-max-global", "x"}, wantText: "workers-max-global"},
		{name: "unknown flag", args: []string{"--no-such-flag"}, wantText: "no-such-flag"},
		{name: "bad env value", env: map[string]string{EnvVar(keyBatchMaxFiles): "lots"}, wantText: "git-batch-max-files"},
		{name: "out of range", args: []string{"--git-batch-max-files", "0"}, wantText: "git-batch-max-files: must be at least 1"},
		{name: "per repo above global", args: []string{"--workers-max-global", "2", "--workers-max-per-repo", "3"}, wantText: "workers-max-per-repo"},
		{name: "bad log format", args: []string{"--log-format", "xml"}, wantText: "log-format"},
		{name: "bad log level", file: "log-level: loud\n", wantText: "log-level"},
		{name: "webhook url with a path", args: []string{"--webhook-url", "https://127.0.0.1:9443/hook"}, wantText: "webhook-url"},
		{name: "webhook url over http", args: []string{"--webhook-url", "http://127.0.0.1:9443"}, wantText: "webhook-url"},
		{name: "tiny correlation capacity", args: []string{"--correlation-capacity", "3"}, wantText: "correlation-capacity"},
		{name: "proposal retention under an hour", args: []string{"--proposal-retention", "30m"}, wantText: "proposal-retention: must be at least 1h"},
		{name: "refresh too often", args: []string{"--discovery-refresh", "1s"}, wantText: "discovery-refresh"},
		{name: "renew deadline not below lease", args: []string{"--leader-election-lease-duration", "10s"}, wantText: "leader-election-renew-deadline"},
		{name: "lease in fractions", args: []string{"--leader-election-lease-duration", "15500ms"}, wantText: "leader-election-lease-duration"},
		{name: "retry above half the deadline", args: []string{"--leader-election-retry-period", "6s"}, wantText: "leader-election-retry-period"},
		{name: "lease name", args: []string{"--leader-election-id", "Leader_1"}, wantText: "leader-election-id"},
		{name: "pod name", args: []string{"--pod-name", "-pod"}, wantText: "pod-name"},
		{name: "shards without leader election", args: []string{"--shards", "auto"}, wantText: "shards: auto needs --leader-elect"},
		{name: "unknown shards", args: []string{"--leader-elect", "--shards", "some"}, wantText: "shards: must be off or auto"},
		{name: "peer address without port", args: []string{"--peer-address", "10.0.0.7"}, wantText: "peer-address: must be host:port"},
		{name: "page without sign-in on every interface", args: []string{"--ui-bind-address", ":9090", "--ui-auth", "none"}, wantText: "ui-auth: none shows everything"},
		{name: "page without sign-in on a public address", args: []string{"--ui-bind-address", "10.0.0.1:9090", "--ui-auth", "none"}, wantText: "must be a loopback address"},
		{name: "unknown page auth", args: []string{"--ui-auth", "basic"}, wantText: "ui-auth: must be token or none"},
		{name: "page address without port", args: []string{"--ui-bind-address", "127.0.0.1"}, wantText: "ui-bind-address"},
		{name: "page certificates without the page", args: []string{"--ui-cert-dir", "/certs"}, wantText: "ui-cert-dir: has no effect"},
		{name: "committer email", args: []string{"--git-committer-email", "bot at example.com"}, wantText: "git-committer-email: must be an email address"},
		{name: "committer name", args: []string{"--git-committer-name", "Bot <x>"}, wantText: "git-committer-name"},
		{name: "missing config file", args: []string{"--config", "/nonexistent/config.yaml"}, wantText: "config file"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			args := tc.args
			if tc.file != "" {
				args = append(args, "--config", writeConfigFile(t, tc.file))
			}
			_, err := parse(t, args...)
			var cfgErr *ConfigError
			if !errors.As(err, &cfgErr) {
				t.Fatalf("err = %v, want a *ConfigError", err)
			}
			if ExitCode(err) != 2 {
				t.Errorf("exit code = %d, want 2", ExitCode(err))
			}
			if !strings.Contains(err.Error(), tc.wantText) {
				t.Errorf("error %q does not mention %q", err, tc.wantText)
			}
		})
	}
}
