package install

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/urfave/cli/v2"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/configbutler/gitops-reverser/crds"
	"github.com/configbutler/gitops-reverser/daemon"
)

// fromEnv are the flags the chart sets through the container's environment, from the Pod itself
// (the downward API), rather than as an argument.
var fromEnv = []string{"pod-name"}

// TestChartWiresEveryFlag makes a new daemon flag impossible to forget in the chart: each one is a
// key of the config file, an argument of the container or (fromEnv) its environment variable, never
// two of them (the argument or variable would silently win), the config keys are exactly those
// values.schema.json allows, the chart refuses config keys it sets otherwise, and the daemon's own
// loader accepts what the chart renders.
func TestChartWiresEveryFlag(t *testing.T) {
	r := renderChart(t)
	flags := map[string]bool{}
	for _, f := range daemon.Flags() {
		name := f.Names()[0]
		flags[name] = true
		_, inFile := r.settings[name]
		_, inArgs := r.args[name]
		_, inEnv := r.env[daemon.EnvVar(name)]
		switch {
		case name == "kubeconfig": // in-cluster config
		case name == "config":
			if !inArgs || inFile {
				t.Errorf("--config must be an argument only")
			}
		case slices.Contains(fromEnv, name):
			if !inEnv || inFile || inArgs {
				t.Errorf("flag --%s must be set by the environment variable %s only (in the file %t, an argument %t, in the environment %t)",
					name, daemon.EnvVar(name), inFile, inArgs, inEnv)
			}
		case inEnv:
			t.Errorf("flag --%s is set by the environment variable %s: add it to fromEnv if that is deliberate", name, daemon.EnvVar(name))
		case !inFile && !inArgs:
			t.Errorf("flag --%s is neither a key of the chart's config file nor an argument: add it to values.yaml's config (and values.schema.json) or to the Deployment's args", name)
		case inFile && inArgs:
			t.Errorf("flag --%s is both a config key and an argument; the argument silently wins", name)
		}
	}
	for key := range r.settings {
		if !flags[key] {
			t.Errorf("the chart's config file sets %q, which is not a flag of the daemon", key)
		}
	}
	for name := range r.args {
		if !flags[name] {
			t.Errorf("the chart passes --%s, which is not a flag of the daemon", name)
		}
	}

	// values.schema.json refuses every other key, so a typo fails at install, not at start.
	raw, err := os.ReadFile(chartPath("values.schema.json"))
	if err != nil {
		t.Fatal(err)
	}
	var schema struct {
		Properties struct {
			Config struct {
				Properties map[string]any `json:"properties"`
			} `json:"config"`
		} `json:"properties"`
	}
	if err := json.Unmarshal(raw, &schema); err != nil {
		t.Fatalf("values.schema.json: %v", err)
	}
	var fileKeys, schemaKeys []string
	for k := range r.settings {
		fileKeys = append(fileKeys, k)
	}
	for k := range schema.Properties.Config.Properties {
		schemaKeys = append(schemaKeys, k)
	}
	slices.Sort(fileKeys)
	slices.Sort(schemaKeys)
	if diff := cmp.Diff(fileKeys, schemaKeys); diff != "" {
		t.Errorf("config keys of values.yaml (-) and of values.schema.json (+) differ:\n%s", diff)
	}

	// A flag overrides the file, so a config key the chart passes as an argument is refused.
	for name := range r.args {
		if name == "config" {
			continue
		}
		_, err := runHelmTemplate(t, systemNamespace, "--skip-schema-validation", "--set-string", "config."+name+"=x")
		if err == nil || !strings.Contains(err.Error(), "config."+name+" is passed as an argument") {
			t.Errorf("config.%s (passed as --%s) is not refused: %v", name, name, err)
		}
	}
	for _, name := range fromEnv {
		_, err := runHelmTemplate(t, systemNamespace, "--skip-schema-validation", "--set-string", "config."+name+"=x")
		if err == nil || !strings.Contains(err.Error(), "config."+name+" is set by the chart") {
			t.Errorf("config.%s (set as %s) is not refused: %v", name, daemon.EnvVar(name), err)
		}
	}

	t.Run("daemon accepts the default values", func(t *testing.T) { mustDaemonAccept(t, r) })
	t.Run("daemon accepts all options", func(t *testing.T) {
		mustDaemonAccept(t, renderChart(t, "--values", chartPath(allOptionsValues)))
	})
}

// mustDaemonAccept runs the daemon's own flag, environment and config-file handling on the
// rendered arguments and file. The kubeconfig points nowhere, so a configuration that passes
// every check stops right after, at loading the Kubernetes client config, before any side effect.
func mustDaemonAccept(t *testing.T, r renderedChart) {
	t.Helper()
	dir := t.TempDir()
	configFile := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(configFile, []byte(r.configFile), 0o600); err != nil {
		t.Fatal(err)
	}
	args := []string{"gitops-reverser"}
	for _, a := range r.deployment.Spec.Template.Spec.Containers[0].Args {
		if strings.HasPrefix(a, "--config=") {
			a = "--config=" + configFile
		}
		args = append(args, a)
	}
	args = append(args, "--kubeconfig="+filepath.Join(dir, "no-such-kubeconfig"))
	for _, f := range daemon.Flags() { // only what the chart sets may count
		env := daemon.EnvVar(f.Names()[0])
		t.Setenv(env, "") // restores the variable after the test
		if err := os.Unsetenv(env); err != nil {
			t.Fatal(err)
		}
	}
	// The variables the chart sets from the Pod (the downward API), as the kubelet would.
	for _, e := range r.deployment.Spec.Template.Spec.Containers[0].Env {
		if e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.name" {
			t.Setenv(e.Name, "gitops-reverser-7d4b9c8f6d-x2x9q")
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := daemon.Run(ctx, args, io.Discard, io.Discard)
	if err == nil || !strings.HasPrefix(err.Error(), "kubeconfig: ") {
		t.Errorf("the daemon refuses the chart's configuration %v with\n%s\nerror: %v\n(want only the missing kubeconfig)", args, r.configFile, err)
	}
}

// TestChartConfigDefaultsMatchDaemon keeps values.yaml's config, documented as the daemon's
// defaults, equal to them, except where the chart deliberately differs.
func TestChartConfigDefaultsMatchDaemon(t *testing.T) {
	deliberate := map[string]string{
		"log-format": "json", // for log collectors in a cluster
		// The daemon's default in a cluster; this test runs outside one, where the default is the
		// user's cache directory.
		"work-dir": "/var/cache/gitops-reverser",
	}
	r := renderChart(t)
	for _, f := range daemon.Flags() {
		name := f.Names()[0]
		value, ok := r.settings[name]
		if !ok {
			continue
		}
		want, ok := deliberate[name]
		if !ok {
			want = flagDefault(t, f)
		}
		if got := settingText(t, f, value); got != want {
			t.Errorf("values.yaml config.%s = %s, the daemon's default is %s", name, got, want)
		}
	}
}

// flagDefault is the default of f in the form settingText gives.
func flagDefault(t testing.TB, f cli.Flag) string {
	t.Helper()
	switch f := f.(type) {
	case *cli.StringFlag:
		return f.Value
	case *cli.BoolFlag:
		return fmt.Sprint(f.Value)
	case *cli.IntFlag:
		return fmt.Sprint(f.Value)
	case *cli.DurationFlag:
		return f.Value.String()
	case *cli.StringSliceFlag:
		if f.Value == nil {
			return "[]"
		}
		return fmt.Sprint(f.Value.Value())
	}
	t.Fatalf("flag %s: unhandled type %T", f.Names()[0], f)
	return ""
}

// settingText is a config-file value (as sigs.k8s.io/yaml decodes it) in the form flagDefault gives.
func settingText(t testing.TB, f cli.Flag, v any) string {
	t.Helper()
	switch v := v.(type) {
	case float64:
		return fmt.Sprint(int64(v))
	case []any:
		if len(v) == 0 {
			return "[]"
		}
		return fmt.Sprint(v)
	case string:
		if _, isDuration := f.(*cli.DurationFlag); isDuration {
			d, err := time.ParseDuration(v)
			if err != nil {
				t.Fatalf("config.%s: %v", f.Names()[0], err)
			}
			return d.String()
		}
		return v
	}
	return fmt.Sprint(v)
}

// TestChartSelectedRBACMatchesDeploy keeps the chart's least-privilege RBAC (rbac.scope selected,
// the default) equal to deploy/rbac.yaml, and checks that rbac.scope all only replaces the
// per-resource read rules.
func TestChartSelectedRBACMatchesDeploy(t *testing.T) {
	deploy := readObjects(t, "rbac.yaml")
	var wantCluster rbacv1.ClusterRole
	var wantRole, wantLeaderRole rbacv1.Role
	object(t, deploy, "ClusterRole", "gitops-reverser", &wantCluster)
	object(t, deploy, "Role", "gitops-reverser", &wantRole)
	object(t, deploy, "Role", "gitops-reverser-leader-election", &wantLeaderRole)

	selected := renderChart(t)
	var gotCluster rbacv1.ClusterRole
	var gotRole, gotLeaderRole rbacv1.Role
	object(t, selected.objs, "ClusterRole", chartRelease, &gotCluster)
	object(t, selected.objs, "Role", chartRelease, &gotRole)
	object(t, selected.objs, "Role", chartRelease+"-leader-election", &gotLeaderRole)
	if diff := cmp.Diff(wantCluster.Rules, gotCluster.Rules); diff != "" {
		t.Errorf("ClusterRole rules of deploy/rbac.yaml (-) and of the chart (+) differ:\n%s", diff)
	}
	if diff := cmp.Diff(wantRole.Rules, gotRole.Rules); diff != "" {
		t.Errorf("Role rules of deploy/rbac.yaml (-) and of the chart (+) differ:\n%s", diff)
	}
	if diff := cmp.Diff(wantLeaderRole.Rules, gotLeaderRole.Rules); diff != "" {
		t.Errorf("leader election Role rules of deploy/rbac.yaml (-) and of the chart (+) differ:\n%s", diff)
	}

	// rbac.scope all: one wildcard read rule instead of the read-only rules, every other rule
	// kept, extraRules appended.
	extra := rbacv1.PolicyRule{APIGroups: []string{"example.com"}, Resources: []string{"widgets"}, Verbs: []string{"get", "list", "watch"}}
	all := renderChart(t, "--set", "rbac.scope=all", "--set-json", `rbac.extraRules=[{"apiGroups":["example.com"],"resources":["widgets"],"verbs":["get","list","watch"]}]`)
	var allCluster rbacv1.ClusterRole
	var allRole rbacv1.Role
	object(t, all.objs, "ClusterRole", chartRelease, &allCluster)
	object(t, all.objs, "Role", chartRelease, &allRole)
	read := []string{"get", "list", "watch"}
	want := []rbacv1.PolicyRule{{APIGroups: []string{"*"}, Resources: []string{"*"}, Verbs: read}}
	for _, rule := range wantCluster.Rules {
		// The read-only rules of the mirrored resources go; those of the daemon's own kinds
		// (e.g. receivers) stay.
		if !slices.Equal(rule.Verbs, read) || slices.Equal(rule.APIGroups, []string{crds.Group}) {
			want = append(want, rule)
		}
	}
	want = append(want, extra)
	if diff := cmp.Diff(want, allCluster.Rules); diff != "" {
		t.Errorf("ClusterRole rules with rbac.scope=all (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(wantRole.Rules, allRole.Rules); diff != "" {
		t.Errorf("Role rules with rbac.scope=all (-want +got):\n%s", diff)
	}
}

// TestChartCertificateModes checks how each webhook certificate mode reaches the daemon: the
// Secret the Pod mounts with all three keys, and --webhook-cert-dir pointing at it.
func TestChartCertificateModes(t *testing.T) {
	cases := []struct {
		name   string
		args   []string
		secret string // empty: nothing mounted, the daemon manages its certificate
	}{
		{"self-managed", nil, ""},
		{"cert-manager", []string{"--set", "webhook.certificate.mode=cert-manager"}, "gitops-reverser-webhook-cert"},
		{"existing-secret", []string{"--set", "webhook.certificate.mode=existing-secret", "--set", "webhook.certificate.secretName=my-tls"}, "my-tls"},
		{"webhook disabled", []string{"--set", "webhook.enabled=false", "--set", "webhook.certificate.mode=cert-manager"}, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := renderChart(t, tc.args...)
			pod := r.deployment.Spec.Template.Spec
			var mounted *corev1.Volume
			for i, v := range pod.Volumes {
				if v.Secret != nil {
					mounted = &pod.Volumes[i]
				}
			}
			certDir := r.args["webhook-cert-dir"]
			if tc.secret == "" {
				if mounted != nil || certDir != "" {
					t.Errorf("mounts Secret volume %+v and passes --webhook-cert-dir=%q; want neither", mounted, certDir)
				}
				return
			}
			if mounted == nil || mounted.Secret.SecretName != tc.secret {
				t.Fatalf("mounts %+v, want Secret %s", mounted, tc.secret)
			}
			var keys []string
			for _, item := range mounted.Secret.Items {
				keys = append(keys, item.Key)
			}
			if !slices.Equal(keys, []string{"tls.crt", "tls.key", "ca.crt"}) || mounted.Secret.Optional != nil {
				t.Errorf("Secret %s mounts keys %v (optional %v), want tls.crt, tls.key and ca.crt, required", tc.secret, keys, mounted.Secret.Optional)
			}
			mountPath := ""
			for _, m := range pod.Containers[0].VolumeMounts {
				if m.Name == mounted.Name {
					mountPath = m.MountPath
				}
			}
			if certDir == "" || certDir != mountPath {
				t.Errorf("--webhook-cert-dir=%q, the Secret is mounted at %q", certDir, mountPath)
			}
			if tc.name == "cert-manager" {
				var cert unstructured.Unstructured
				object(t, r.objs, "Certificate", "gitops-reverser-webhook", &cert.Object)
				dnsNames, _, _ := unstructured.NestedStringSlice(cert.Object, "spec", "dnsNames")
				secretName, _, _ := unstructured.NestedString(cert.Object, "spec", "secretName")
				wantDNS := []string{"gitops-reverser.gitops-reverser-system.svc", "gitops-reverser.gitops-reverser-system.svc.cluster.local"}
				if !slices.Equal(dnsNames, wantDNS) || secretName != tc.secret {
					t.Errorf("Certificate dnsNames %v into %s, want %v into %s", dnsNames, secretName, wantDNS, tc.secret)
				}
			}
		})
	}
	// A hub's remote apiservers call config.webhook-url: cert-manager's certificate names its host.
	for url, want := range map[string][2]string{"https://hub.example.com:9443": {"dnsNames", "hub.example.com"}, "https://10.1.2.3:9443": {"ipAddresses", "10.1.2.3"}} {
		r := renderChart(t, "--set", "webhook.certificate.mode=cert-manager", "--set-string", "config.webhook-url="+url)
		var cert unstructured.Unstructured
		object(t, r.objs, "Certificate", "gitops-reverser-webhook", &cert.Object)
		if names, _, _ := unstructured.NestedStringSlice(cert.Object, "spec", want[0]); !slices.Contains(names, want[1]) {
			t.Errorf("webhook-url %s: the Certificate's %s %v lack %s", url, want[0], names, want[1])
		}
	}
	if _, err := runHelmTemplate(t, systemNamespace, "--set", "webhook.certificate.mode=existing-secret"); err == nil {
		t.Error("existing-secret without secretName renders")
	}
}
