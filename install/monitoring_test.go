package install

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

var update = flag.Bool("update", false, "rewrite deploy/monitoring/ from the chart's files/")

// The sources of the dashboard and the alerts: the chart reads them with .Files.Get, and
// deploy/monitoring/ holds copies made from them (go test ./install/ -run TestDeployMonitoring -update).
var (
	dashboardFile = chartPath("files", "grafana-dashboard.json")
	rulesFile     = chartPath("files", "prometheus-rules.yaml")
	rulesTestFile = filepath.Join("testdata", "prometheus-rules-test.yaml")
)

// The names of the copies in deploy/monitoring/, and of the objects in them and in the chart
// rendered as release chartRelease.
const (
	deployDashboard      = "dashboard-configmap.yaml"
	deployRule           = "prometheusrule.yaml"
	dashboardConfigMap   = chartRelease + "-dashboard"
	dashboardKey         = "gitops-reverser.json"
	dashboardSidecarKey  = "grafana_dashboard"
	prometheusRuleObject = chartRelease
)

// promtool runs the pinned promtool and returns its output; it fails the test when promtool fails.
func promtool(t testing.TB, args ...string) string {
	t.Helper()
	out, err := exec.Command(promtoolBin, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

func readFile(t testing.TB, path string) []byte {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// ruleFile is the part of a Prometheus rule file the tests read.
type ruleFile struct {
	Groups []struct {
		Name  string `json:"name"`
		Rules []struct {
			Alert       string            `json:"alert"`
			Expr        string            `json:"expr"`
			For         string            `json:"for"`
			Labels      map[string]string `json:"labels"`
			Annotations map[string]string `json:"annotations"`
		} `json:"rules"`
	} `json:"groups"`
}

// ruleTests is the part of a promtool unit test file the tests read.
type ruleTests struct {
	Tests []struct {
		AlertRuleTest []struct {
			Alertname string `json:"alertname"`
			ExpAlerts []any  `json:"exp_alerts"`
		} `json:"alert_rule_test"`
	} `json:"tests"`
}

// TestAlertRulesPassPromtool: promtool finds the rule file valid and every unit test passes; every
// alert has a for, a severity, a summary and a description, and is tested both firing and not.
func TestAlertRulesPassPromtool(t *testing.T) {
	out := promtool(t, "check", "rules", "--lint=all", "--lint-fatal", rulesFile)
	var rules ruleFile
	if err := yaml.UnmarshalStrict(readFile(t, rulesFile), &rules); err != nil {
		t.Fatalf("%s: %v", rulesFile, err)
	}
	var alerts []string
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			alerts = append(alerts, r.Alert)
			if r.For == "" || !slices.Contains([]string{"critical", "warning", "info"}, r.Labels["severity"]) ||
				r.Annotations["summary"] == "" || r.Annotations["description"] == "" {
				t.Errorf("alert %s: for %q, labels %v, annotations %v; want a for, a severity (critical, warning or info), a summary and a description",
					r.Alert, r.For, r.Labels, r.Annotations)
			}
		}
	}
	if want := fmt.Sprintf("SUCCESS: %d rules found", len(alerts)); !strings.Contains(out, want) {
		t.Errorf("promtool check rules says\n%s\nwant %q", out, want)
	}

	promtool(t, "test", "rules", rulesTestFile)
	var tests ruleTests
	if err := yaml.Unmarshal(readFile(t, rulesTestFile), &tests); err != nil {
		t.Fatalf("%s: %v", rulesTestFile, err)
	}
	fires, silent := map[string]bool{}, map[string]bool{}
	for _, tc := range tests.Tests {
		for _, a := range tc.AlertRuleTest {
			if len(a.ExpAlerts) > 0 {
				fires[a.Alertname] = true
			} else {
				silent[a.Alertname] = true
			}
		}
	}
	for _, a := range alerts {
		if !fires[a] || !silent[a] {
			t.Errorf("alert %s: %s has a firing case %v and a silent case %v, want both", a, rulesTestFile, fires[a], silent[a])
		}
	}
}

// dashboard is the part of a Grafana dashboard the tests read.
type dashboard struct {
	UID    string `json:"uid"`
	Panels []struct {
		ID      int    `json:"id"`
		Type    string `json:"type"`
		Title   string `json:"title"`
		Targets []struct {
			Expr string `json:"expr"`
		} `json:"targets"`
	} `json:"panels"`
}

// TestDashboardQueriesAreValidPromQL: every panel has its own id, and each query, with Grafana's
// variables filled in, is a PromQL expression promtool accepts (as a recording rule).
func TestDashboardQueriesAreValidPromQL(t *testing.T) {
	var d dashboard
	if err := json.Unmarshal(readFile(t, dashboardFile), &d); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	vars := strings.NewReplacer("$__rate_interval", "5m", "$namespace", ".*")
	var rules strings.Builder
	rules.WriteString("groups:\n  - name: dashboard\n    rules:\n")
	ids := map[int]string{}
	queries := 0
	for _, p := range d.Panels {
		if other, dup := ids[p.ID]; dup {
			t.Errorf("panels %q and %q have the same id %d", other, p.Title, p.ID)
		}
		ids[p.ID] = p.Title
		if p.Type != "row" && len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, target := range p.Targets {
			queries++
			expr, err := json.Marshal(vars.Replace(target.Expr))
			if err != nil {
				t.Fatal(err)
			}
			fmt.Fprintf(&rules, "      - record: dashboard_query_%d\n        expr: %s\n", queries, expr)
		}
	}
	path := filepath.Join(t.TempDir(), "dashboard-queries.yaml")
	if err := os.WriteFile(path, []byte(rules.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	out := promtool(t, "check", "rules", path)
	if want := fmt.Sprintf("SUCCESS: %d rules found", queries); queries == 0 || !strings.Contains(out, want) {
		t.Errorf("promtool check rules of the dashboard's %d queries says\n%s", queries, out)
	}
}

// findObject returns the object of kind and name, or nil.
func findObject(objs []*unstructured.Unstructured, kind, name string) *unstructured.Unstructured {
	for _, o := range objs {
		if o.GetKind() == kind && o.GetName() == name {
			return o
		}
	}
	return nil
}

// checkRuleSpec checks that a PrometheusRule's spec is the rule file.
func checkRuleSpec(t testing.TB, where string, rule *unstructured.Unstructured) {
	t.Helper()
	var want map[string]any
	if err := yaml.Unmarshal(readFile(t, rulesFile), &want); err != nil {
		t.Fatal(err)
	}
	if got := rule.Object["spec"]; !reflect.DeepEqual(got, want) {
		t.Errorf("the spec of the PrometheusRule in %s is not %s", where, rulesFile)
	}
}

// TestChartMonitoringOnlyWhenEnabled: by default the chart renders neither the dashboard nor the
// alerts; enabled, the dashboard ConfigMap carries the sidecar's label and the dashboard file as
// it is, and the PrometheusRule carries the rule file, each with the labels, namespace and
// annotations asked for.
func TestChartMonitoringOnlyWhenEnabled(t *testing.T) {
	objs := decodeObjects(t, []byte(helmTemplate(t, systemNamespace)))
	if o := findObject(objs, "ConfigMap", dashboardConfigMap); o != nil {
		t.Errorf("the chart renders the dashboard by default")
	}
	if slices.ContainsFunc(objs, func(o *unstructured.Unstructured) bool { return o.GetKind() == "PrometheusRule" }) {
		t.Errorf("the chart renders a PrometheusRule by default")
	}

	objs = decodeObjects(t, []byte(helmTemplate(t, systemNamespace,
		"--set", "monitoring.dashboard.enabled=true", "--set", "monitoring.prometheusRule.enabled=true")))
	var cm corev1.ConfigMap
	object(t, objs, "ConfigMap", dashboardConfigMap, &cm)
	if cm.Namespace != systemNamespace || cm.Labels[dashboardSidecarKey] != "1" {
		t.Errorf("dashboard ConfigMap in namespace %q with labels %v, want %s and %s: \"1\"", cm.Namespace, cm.Labels, systemNamespace, dashboardSidecarKey)
	}
	if got, want := cm.Data[dashboardKey], string(readFile(t, dashboardFile)); got != want || len(cm.Data) != 1 {
		t.Errorf("the dashboard ConfigMap's %s is not %s (keys %d)", dashboardKey, dashboardFile, len(cm.Data))
	}
	rule := findObject(objs, "PrometheusRule", prometheusRuleObject)
	if rule == nil {
		t.Fatal("no PrometheusRule " + prometheusRuleObject)
	}
	if rule.GetAPIVersion() != "monitoring.coreos.com/v1" || rule.GetNamespace() != systemNamespace {
		t.Errorf("PrometheusRule %s in %s", rule.GetAPIVersion(), rule.GetNamespace())
	}
	checkRuleSpec(t, "the chart", rule)

	values := filepath.Join(t.TempDir(), "values.yaml")
	if err := os.WriteFile(values, []byte(`monitoring:
  dashboard:
    enabled: true
    namespace: grafana
    labels: {grafana_dashboard: null, team-dashboards: "yes"}
    annotations: {grafana_folder: GitOps}
  prometheusRule:
    enabled: true
    labels: {release: prometheus}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	objs = decodeObjects(t, []byte(helmTemplate(t, systemNamespace, "--values", values)))
	cm = corev1.ConfigMap{}
	object(t, objs, "ConfigMap", dashboardConfigMap, &cm)
	_, hasDefault := cm.Labels[dashboardSidecarKey]
	if cm.Namespace != "grafana" || cm.Labels["team-dashboards"] != "yes" || hasDefault || cm.Annotations["grafana_folder"] != "GitOps" {
		t.Errorf("dashboard ConfigMap in %q, labels %v, annotations %v; want namespace grafana, only the label team-dashboards and the folder annotation",
			cm.Namespace, cm.Labels, cm.Annotations)
	}
	if rule := findObject(objs, "PrometheusRule", prometheusRuleObject); rule == nil || rule.GetLabels()["release"] != "prometheus" {
		t.Errorf("PrometheusRule without the label release: prometheus: %v", rule)
	}
}

// deployMonitoringHeader opens each file of deploy/monitoring/.
const deployMonitoringHeader = `# Optional, not in deploy/kustomization.yaml: apply it yourself with
#   kubectl apply -f %s
# Made from deploy/helm/gitops-reverser/%s by
#   go test ./install/ -run TestDeployMonitoringMatchesChart -update
# (do not edit it by hand).
`

// deployMonitoringFiles are the files deploy/monitoring/ should hold, made from the chart's files.
func deployMonitoringFiles(t testing.TB) map[string]string {
	t.Helper()
	indent := func(raw []byte, pad string) string {
		lines := strings.Split(strings.TrimSuffix(string(raw), "\n"), "\n")
		for i, l := range lines {
			if l != "" {
				lines[i] = pad + l
			}
		}
		return strings.Join(lines, "\n") + "\n"
	}
	labels := "  labels:\n    app.kubernetes.io/name: gitops-reverser\n    app.kubernetes.io/part-of: gitops-reverser\n"
	return map[string]string{
		deployDashboard: fmt.Sprintf(deployMonitoringHeader, "deploy/monitoring/"+deployDashboard, "files/grafana-dashboard.json") +
			"# Grafana's dashboard sidecar loads it if it searches this namespace (else change the\n" +
			"# namespace below to one it searches) and selects the label grafana_dashboard.\n" +
			"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: " + dashboardConfigMap + "\n  namespace: " + systemNamespace + "\n" +
			labels + "    " + dashboardSidecarKey + ": \"1\"\ndata:\n  " + dashboardKey + ": |\n" + indent(readFile(t, dashboardFile), "    "),
		deployRule: fmt.Sprintf(deployMonitoringHeader, "deploy/monitoring/"+deployRule, "files/prometheus-rules.yaml") +
			"# Needs prometheus-operator's CRDs; add the label your Prometheus' ruleSelector selects.\n" +
			"apiVersion: monitoring.coreos.com/v1\nkind: PrometheusRule\nmetadata:\n  name: " + prometheusRuleObject + "\n  namespace: " + systemNamespace + "\n" +
			labels + "spec:\n" + indent(readFile(t, rulesFile), "  "),
	}
}

// TestDeployMonitoringMatchesChart keeps deploy/monitoring/ the copies of the chart's dashboard
// and alerts, and has the apiserver validate them (the PrometheusRule against a stand-in CRD).
func TestDeployMonitoringMatchesChart(t *testing.T) {
	want := deployMonitoringFiles(t)
	for name, content := range want {
		path := deployPath("monitoring", name)
		if *update {
			if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if got, err := os.ReadFile(path); err != nil || string(got) != content {
			t.Errorf("%s is not made from the chart's files (%v): run go test ./install/ -run TestDeployMonitoringMatchesChart -update", path, err)
		}
	}
	if got := yamlFileNames(t, deployPath("monitoring")); len(got) != len(want) {
		t.Errorf("deploy/monitoring holds %v, want only %s and %s", got, deployDashboard, deployRule)
	}

	objs := decodeObjects(t, readFile(t, deployPath("monitoring", deployDashboard)))
	var cm corev1.ConfigMap
	object(t, objs, "ConfigMap", dashboardConfigMap, &cm)
	if cm.Data[dashboardKey] != string(readFile(t, dashboardFile)) || cm.Labels[dashboardSidecarKey] != "1" {
		t.Errorf("deploy/monitoring/%s does not hold the dashboard with the sidecar's label", deployDashboard)
	}
	rules := decodeObjects(t, readFile(t, deployPath("monitoring", deployRule)))
	if len(rules) != 1 || rules[0].GetKind() != "PrometheusRule" {
		t.Fatalf("deploy/monitoring/%s holds %d objects, want one PrometheusRule", deployRule, len(rules))
	}
	checkRuleSpec(t, "deploy/monitoring/"+deployRule, rules[0])

	kubeconfig := adminKubeconfig(t)
	cache := "--cache-dir=" + t.TempDir()
	kubectl(t, kubeconfig, nil, cache, "apply", "-f", deployPath("namespace.yaml"))
	kubectl(t, kubeconfig, strings.NewReader(standInCRD("monitoring.coreos.com", "PrometheusRule")), cache, "apply", "-f", "-")
	kubectl(t, kubeconfig, nil, cache, "wait", "--for=condition=Established", "--timeout=60s", "crd/prometheusrules.monitoring.coreos.com")
	stdout, stderr := kubectl(t, kubeconfig, nil, cache, "apply", "--dry-run=server", "-f", deployPath("monitoring"))
	checkDryRun(t, append(objs, rules...), stdout, stderr)
	for _, r := range readKustomization(t).Resources {
		if strings.HasPrefix(r, "monitoring") {
			t.Errorf("deploy/kustomization.yaml lists %s: the files of monitoring/ are optional", r)
		}
	}
}
