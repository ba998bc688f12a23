package install

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

const (
	// chartRelease gives the chart's resources the names of deploy/.
	chartRelease = "gitops-reverser"
	// chartDryRunNamespace keeps the chart's server dry runs apart from the kustomize tests.
	chartDryRunNamespace = "gitops-reverser-helm"
	// allOptionsValues switches every option of the chart on (helm lint's ci/ convention).
	allOptionsValues = "ci/all-options-values.yaml"
)

// chartPath is a path under the chart's directory.
func chartPath(elem ...string) string {
	return filepath.Join(append([]string{"..", "deploy", "helm", "gitops-reverser"}, elem...)...)
}

// runHelmTemplate renders the chart as release chartRelease in namespace with extra helm args.
// helm's own directories are temporary, so nothing of the user's helm setup leaks in.
func runHelmTemplate(t testing.TB, namespace string, args ...string) (string, error) {
	t.Helper()
	home := t.TempDir()
	full := append([]string{"template", chartRelease, chartPath(), "--namespace", namespace}, args...)
	cmd := exec.Command(helmBin, full...)
	cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+filepath.Join(home, "cache"),
		"HELM_CONFIG_HOME="+filepath.Join(home, "config"), "HELM_DATA_HOME="+filepath.Join(home, "data"))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("helm %s: %w\n%s", strings.Join(full, " "), err, stderr.String())
	}
	return stdout.String(), nil
}

// helmTemplate is runHelmTemplate that fails the test when helm fails.
func helmTemplate(t testing.TB, namespace string, args ...string) string {
	t.Helper()
	out, err := runHelmTemplate(t, namespace, args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// renderedChart is the chart rendered into the daemon's usual namespace.
type renderedChart struct {
	objs       []*unstructured.Unstructured
	deployment appsv1.Deployment
	configFile string            // the config file as the daemon reads it
	settings   map[string]any    // its keys
	args       map[string]string // the container's --flag=value arguments
	env        map[string]corev1.EnvVar
}

func renderChart(t testing.TB, args ...string) renderedChart {
	t.Helper()
	r := renderedChart{objs: decodeObjects(t, []byte(helmTemplate(t, systemNamespace, args...)))}
	var config corev1.ConfigMap
	object(t, r.objs, "ConfigMap", chartRelease+"-config", &config)
	r.configFile = config.Data["config.yaml"]
	if err := yaml.Unmarshal([]byte(r.configFile), &r.settings); err != nil {
		t.Fatalf("config.yaml in the chart's ConfigMap: %v", err)
	}
	object(t, r.objs, "Deployment", chartRelease, &r.deployment)
	r.args = map[string]string{}
	for _, a := range r.deployment.Spec.Template.Spec.Containers[0].Args {
		name, value, ok := strings.Cut(strings.TrimPrefix(a, "--"), "=")
		if !ok || !strings.HasPrefix(a, "--") {
			t.Fatalf("argument %q is not --flag=value", a)
		}
		if _, dup := r.args[name]; dup {
			t.Errorf("argument --%s is passed twice", name)
		}
		r.args[name] = value
	}
	r.env = map[string]corev1.EnvVar{}
	for _, e := range r.deployment.Spec.Template.Spec.Containers[0].Env {
		if _, dup := r.env[e.Name]; dup {
			t.Errorf("environment variable %s is set twice", e.Name)
		}
		r.env[e.Name] = e
	}
	return r
}

// TestChartCRDsMatchEmbedded keeps the chart's crds/ (Helm installs them) byte-identical to the
// CRDs the binary embeds and installs.
func TestChartCRDsMatchEmbedded(t *testing.T) {
	embedded := yamlFileNames(t, filepath.Join("..", "crds", "yaml"))
	copies := yamlFileNames(t, chartPath("crds"))
	fix := "run `cp crds/yaml/*.yaml deploy/helm/gitops-reverser/crds/`"
	if len(embedded) == 0 || !slices.Equal(embedded, copies) {
		t.Fatalf("the chart's crds/ holds %v, crds/yaml holds %v: %s", copies, embedded, fix)
	}
	for _, name := range embedded {
		want, err := os.ReadFile(filepath.Join("..", "crds", "yaml", name))
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(chartPath("crds", name))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("the chart's crds/%s differs from crds/yaml/%s: %s", name, name, fix)
		}
	}
}

// standInCRD stands in for a prometheus-operator or cert-manager CRD, whose operators cannot run
// here: it accepts any spec, so the dry run below checks only that the chart's kinds exist with
// this group, version and scope (the chart's own objects are checked strictly).
func standInCRD(group, kind string) string {
	plural := strings.ToLower(kind) + "s"
	return fmt.Sprintf(`apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: %[2]s.%[1]s}
spec:
  group: %[1]s
  scope: Namespaced
  names: {kind: %[3]s, plural: %[2]s, singular: %[4]s, listKind: %[3]sList}
  versions:
    - name: v1
      served: true
      storage: true
      schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}
`, group, plural, kind, strings.ToLower(kind))
}

// The chart's namespace enforces the "restricted" Pod Security Standard, as deploy/ does.
const chartNamespace = `
apiVersion: v1
kind: Namespace
metadata:
  name: ` + chartDryRunNamespace + `
  labels:
    pod-security.kubernetes.io/enforce: restricted
    pod-security.kubernetes.io/warn: restricted
`

// TestChartRendersAndPassesServerDryRun renders the chart with its default values and with every
// option on, and has the apiserver validate and admit every object (strict field validation, Pod
// Security "restricted") without persisting them.
func TestChartRendersAndPassesServerDryRun(t *testing.T) {
	kubeconfig := adminKubeconfig(t)
	cache := "--cache-dir=" + t.TempDir() // discovery must see the CRDs applied below
	kubectl(t, kubeconfig, strings.NewReader(chartNamespace), cache, "apply", "-f", "-")
	// What `helm install` puts in first: the CRDs of crds/.
	kubectl(t, kubeconfig, nil, cache, "apply", "--server-side", "--force-conflicts", "-f", chartPath("crds"))
	standIns := strings.Join([]string{standInCRD("monitoring.coreos.com", "ServiceMonitor"),
		standInCRD("monitoring.coreos.com", "PrometheusRule"),
		standInCRD("cert-manager.io", "Issuer"), standInCRD("cert-manager.io", "Certificate")}, "---\n")
	kubectl(t, kubeconfig, strings.NewReader(standIns), cache, "apply", "-f", "-")
	wait := []string{"wait", "--for=condition=Established", "--timeout=60s",
		"crd/servicemonitors.monitoring.coreos.com", "crd/prometheusrules.monitoring.coreos.com", "crd/issuers.cert-manager.io", "crd/certificates.cert-manager.io"}
	for _, name := range yamlFileNames(t, chartPath("crds")) {
		wait = append(wait, "crd/"+strings.TrimSuffix(name, ".yaml")+".configbutler.ai")
	}
	kubectl(t, kubeconfig, nil, append([]string{cache}, wait...)...)

	base := []string{"ClusterRole/gitops-reverser", "ClusterRole/gitops-reverser-proposal-reviewer", "ClusterRole/gitops-reverser-destination-operator",
		"ClusterRoleBinding/gitops-reverser", "ConfigMap/gitops-reverser-config",
		"Deployment/gitops-reverser", "Role/gitops-reverser", "RoleBinding/gitops-reverser",
		"Role/gitops-reverser-leader-election", "RoleBinding/gitops-reverser-leader-election",
		"Service/gitops-reverser", "Service/gitops-reverser-metrics", "ServiceAccount/gitops-reverser"}
	cases := []struct {
		name string
		args []string
		want []string
	}{
		{"default values", nil, base},
		{"all options", []string{"--values", chartPath(allOptionsValues)}, append(slices.Clone(base),
			"ClusterRole/gitops-reverser-write-back", "ClusterRoleBinding/gitops-reverser-write-back",
			"Certificate/gitops-reverser-webhook", "Certificate/gitops-reverser-webhook-ca",
			"Issuer/gitops-reverser-selfsigned", "Issuer/gitops-reverser-webhook-ca", "NetworkPolicy/gitops-reverser-webhook",
			"ServiceMonitor/gitops-reverser", "Service/gitops-reverser-receiver", "Ingress/gitops-reverser-receiver",
			"Service/gitops-reverser-ui", "Ingress/gitops-reverser-ui",
			"ConfigMap/gitops-reverser-dashboard", "PrometheusRule/gitops-reverser",
			"PodDisruptionBudget/gitops-reverser")},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rendered := helmTemplate(t, chartDryRunNamespace, tc.args...)
			objs := decodeObjects(t, []byte(rendered))
			var got []string
			for _, o := range objs {
				got = append(got, o.GetKind()+"/"+o.GetName())
			}
			slices.Sort(got)
			slices.Sort(tc.want)
			if !slices.Equal(got, tc.want) {
				t.Fatalf("the chart renders\n%v\nwant\n%v", got, tc.want)
			}
			stdout, stderr := kubectl(t, kubeconfig, strings.NewReader(rendered), cache, "apply", "--dry-run=server", "-f", "-")
			checkDryRun(t, objs, stdout, stderr)
		})
	}
}
