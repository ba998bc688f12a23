package daemon

import (
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/configbutler/gitops-reverser/metrics"
	"github.com/configbutler/gitops-reverser/testenv"
)

// monitoringFiles are the chart's Grafana dashboard and alerts; deploy/monitoring holds copies.
var monitoringFiles = []string{
	filepath.Join("..", "deploy", "helm", "gitops-reverser", "files", "grafana-dashboard.json"),
	filepath.Join("..", "deploy", "helm", "gitops-reverser", "files", "prometheus-rules.yaml"),
}

// metricName finds the daemon's metric names in a query or a text: its own, and those of the Go
// runtime and process collectors. The dashboard and the alerts use no other metric.
var metricName = regexp.MustCompile(`\b(?:gitops_reverser|go|process)_[a-zA-Z0-9_]+`)

// TestDashboardAndAlertsUseExportedMetrics: every metric the dashboard and the alerts name is one
// a running daemon exports. A daemon mirroring a destination is scraped; a vector with no labelled
// child yet (e.g. receiver_requests_total before any delivery) is absent from any exposition, so
// a name the scrape lacks must be a vector family of the daemon's registry (metrics.New).
func TestDashboardAndAlertsUseExportedMetrics(t *testing.T) {
	planes.Lend(t)
	used := map[string][]string{} // metric name → the files that use it
	for _, path := range monitoringFiles {
		raw, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		names := metricName.FindAllString(string(raw), -1)
		if len(names) == 0 {
			t.Fatalf("%s names no metric", path)
		}
		for _, n := range names {
			if !slices.Contains(used[n], filepath.Base(path)) {
				used[n] = append(used[n], filepath.Base(path))
			}
		}
	}

	mirrorSetup(t, "monitoring")
	d := startDaemon(t, t.TempDir())
	testenv.Eventually(t, time.Minute, "the destination's Git worker exported", func() (bool, string) {
		_, ok := scrapeFamilies(t, d)["gitops_reverser_repo_branch_queue_depth"]
		return ok, "no gitops_reverser_repo_branch_queue_depth yet"
	}, d.FailFast())
	scraped := scrapeFamilies(t, d)
	described := describedFamilies(t)
	for name, files := range used {
		if typ, ok := scraped[name]; ok && typ != "histogram" && typ != "summary" {
			continue
		}
		if base, ok := sampleOfHistogram(name); ok && (scraped[base] == "histogram" || scraped[base] == "summary") {
			continue
		}
		if described[name] {
			t.Logf("%s (%s): a vector family of the registry with no labelled child in this run", name, strings.Join(files, ", "))
			continue
		}
		t.Errorf("%s is used by %s but the daemon does not export it", name, strings.Join(files, ", "))
	}
}

// scrapeFamilies reads the daemon's /metrics and returns the type of each family it lists.
func scrapeFamilies(t testing.TB, d *testenv.Daemon) map[string]string {
	t.Helper()
	body := d.WaitForStatus(t, "http://"+d.MetricsAddr()+"/metrics", http.StatusOK)
	out := map[string]string{}
	for _, line := range strings.Split(body, "\n") {
		if rest, ok := strings.CutPrefix(line, "# TYPE "); ok {
			if name, typ, ok := strings.Cut(rest, " "); ok {
				out[name] = typ
			}
		}
	}
	if len(out) == 0 {
		t.Fatalf("/metrics lists no family:\n%s", body)
	}
	return out
}

// sampleOfHistogram returns the family of a histogram's or summary's sample name (name_bucket,
// name_sum, name_count).
func sampleOfHistogram(name string) (string, bool) {
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		if base, ok := strings.CutSuffix(name, suffix); ok {
			return base, true
		}
	}
	return "", false
}

// descPattern reads the name and variable labels out of a prometheus.Desc's String, the only way
// the client library shows them.
var descPattern = regexp.MustCompile(`^Desc\{fqName: ("(?:[^"\\]|\\.)*"), .*variableLabels: \{([^}]*)\}\}$`)

// describedFamilies are the families of the daemon's registry, each with whether it has variable
// labels (a vector).
func describedFamilies(t testing.TB) map[string]bool {
	t.Helper()
	ch := make(chan *prometheus.Desc)
	go func() {
		metrics.New().Describe(ch)
		close(ch)
	}()
	out := map[string]bool{}
	vectors := 0
	for desc := range ch {
		m := descPattern.FindStringSubmatch(desc.String())
		if m == nil {
			t.Fatalf("cannot read the description %s", desc)
		}
		name, err := strconv.Unquote(m[1])
		if err != nil {
			t.Fatalf("description %s: %v", desc, err)
		}
		out[name] = m[2] != ""
		if out[name] {
			vectors++
		}
	}
	if vectors == 0 {
		t.Fatalf("the registry describes %d families, none with labels", len(out))
	}
	return out
}

// TestDocsListEveryMetric: docs/metrics.md has a row for every metric of the daemon's own.
func TestDocsListEveryMetric(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "docs", "metrics.md"))
	if err != nil {
		t.Fatal(err)
	}
	doc := string(raw)
	for name := range describedFamilies(t) {
		short, ours := strings.CutPrefix(name, metrics.Namespace+"_")
		if ours && !strings.Contains(doc, "| `"+short+"`") && !strings.Contains(doc, "| `"+short+"{") &&
			!strings.Contains(doc, ", `"+short+"`") {
			t.Errorf("docs/metrics.md has no row for %s", name)
		}
	}
}
