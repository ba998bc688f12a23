package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// readYAML reads a file of the repository (one YAML document) into a generic value.
func readYAML(t testing.TB, elem ...string) map[string]any {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(append([]string{"..", ".."}, elem...)...))
	if err != nil {
		t.Fatal(err)
	}
	v := map[string]any{}
	if err := yaml.Unmarshal(raw, &v); err != nil {
		t.Fatal(err)
	}
	return v
}

// field walks nested maps and lists (by index) of a YAML value.
func field(v any, path ...any) any {
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, _ := v.(map[string]any)
			v = m[k]
		case int:
			l, _ := v.([]any)
			if k >= len(l) {
				return nil
			}
			v = l[k]
		}
	}
	return v
}

// TestManifestsNameTheImageAndItsUser: the chart and deploy/ run the image make image names
// (repository, and the chart's appVersion as the tag, which a release tag v<appVersion> gives)
// as the image's uid and gid, so runAsNonRoot holds without a passwd file in the image.
func TestManifestsNameTheImageAndItsUser(t *testing.T) {
	chart := readYAML(t, "deploy", "helm", "gitops-reverser", "Chart.yaml")
	values := readYAML(t, "deploy", "helm", "gitops-reverser", "values.yaml")
	appVersion := fmt.Sprint(chart["appVersion"])
	if !tagPattern.MatchString(appVersion) {
		t.Errorf("the chart's appVersion %q is not an image tag", appVersion)
	}
	if got := field(values, "image", "repository"); got != defaultRepository {
		t.Errorf("chart image.repository %v, want %s", got, defaultRepository)
	}
	uid, gid, _ := strings.Cut(imageUser, ":")
	for _, sc := range []string{"podSecurityContext", "securityContext"} {
		for key, want := range map[string]string{"runAsUser": uid, "runAsGroup": gid} {
			if got := fmt.Sprint(field(values, sc, key)); got != want {
				t.Errorf("chart %s.%s %s, want the image's %s", sc, key, got, want)
			}
		}
	}

	deploy := readYAML(t, "deploy", "deployment.yaml")
	pod := field(deploy, "spec", "template", "spec")
	container := field(pod, "containers", 0)
	if got, want := field(container, "image"), defaultRepository+":"+appVersion; got != want {
		t.Errorf("deploy/deployment.yaml image %v, want %s", got, want)
	}
	for _, sc := range []any{field(pod, "securityContext"), field(container, "securityContext")} {
		for key, want := range map[string]string{"runAsUser": uid, "runAsGroup": gid} {
			if got := fmt.Sprint(field(sc, key)); got != want {
				t.Errorf("deploy/deployment.yaml %s %s, want the image's %s", key, got, want)
			}
		}
	}
}
