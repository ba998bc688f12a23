package placement

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	syncatomic "sync/atomic"
	"testing"
)

// TestBuildRefuses: what kustomize must not be given is refused before it runs, with an error
// that names the kustomization, the field and the entry.
func TestBuildRefuses(t *testing.T) {
	const deployment = "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: podinfo\n"
	cases := []struct {
		name  string
		dir   string
		extra map[string]string
		want  error
		says  []string
	}{
		{"remote https base", "apps/remote", map[string]string{
			"apps/remote/kustomization.yaml": "resources:\n  - https://github.com/stefanprodan/podinfo//kustomize?ref=6.5.4\n",
		}, ErrRemote, []string{"apps/remote/kustomization.yaml", "resources", "https://github.com/stefanprodan/podinfo//kustomize"}},
		{"git:: base", "apps/remote", map[string]string{
			"apps/remote/kustomization.yaml": "resources: [\"git::https://example.com/team/repo.git//deploy\"]\n",
		}, ErrRemote, []string{"git::https://example.com/team/repo.git//deploy"}},
		{"github.com base without scheme", "apps/remote", map[string]string{
			"apps/remote/kustomization.yaml": "bases: [github.com/fluxcd/flux2/manifests/install]\n",
		}, ErrRemote, []string{"github.com/fluxcd/flux2/manifests/install"}},
		{"scp-style base", "apps/remote", map[string]string{
			"apps/remote/kustomization.yaml": "resources: [\"git@gitlab.example.com:team/repo.git\"]\n",
		}, ErrRemote, []string{"git@gitlab.example.com:team/repo.git"}},
		{"remote patch file", "apps/remote", map[string]string{
			"apps/remote/kustomization.yaml": "resources: [../base/podinfo]\npatches:\n  - path: https://example.com/patch.yaml\n",
		}, ErrRemote, []string{"patches", "https://example.com/patch.yaml"}},
		{"remote base of a base", "apps/production", map[string]string{
			"apps/base/podinfo/kustomization.yaml": "resources: [deployment.yaml, \"https://example.com/extra.yaml\"]\n",
		}, ErrRemote, []string{"resources: ../base/podinfo: apps/base/podinfo/kustomization.yaml: resources: https://example.com/extra.yaml"}},
		{"helmCharts", "apps/helm", map[string]string{
			"apps/helm/kustomization.yaml": "helmCharts:\n  - name: podinfo\n    repo: https://stefanprodan.github.io/podinfo\n    version: 6.5.4\n",
		}, ErrHelm, []string{"apps/helm/kustomization.yaml", "helmCharts"}},
		{"helmChartInflationGenerator", "apps/helm", map[string]string{
			"apps/helm/kustomization.yaml": "helmChartInflationGenerator:\n  - chartName: podinfo\n    chartRepoUrl: https://stefanprodan.github.io/podinfo\n",
		}, ErrHelm, []string{"helmCharts"}},
		{"path escaping the folder", "apps/production", map[string]string{
			"apps/production/kustomization.yaml": "resources: [../base/podinfo, ../../x]\n",
		}, ErrOutside, []string{"apps/production/kustomization.yaml", "../../x", "outside the folder apps"}},
		{"path above the repository", "apps/production", map[string]string{
			"apps/production/kustomization.yaml": "resources: [../../../../etc/passwd]\n",
		}, ErrOutside, []string{"../../../../etc/passwd"}},
		{"absolute path", "apps/production", map[string]string{
			"apps/production/kustomization.yaml": "resources: [/etc/passwd]\n",
		}, ErrOutside, []string{"/etc/passwd", "absolute"}},
		{"missing file", "apps/production", map[string]string{
			"apps/production/kustomization.yaml": "resources: [../base/podinfo, hpa.yaml]\n",
		}, ErrMissing, []string{"apps/production/kustomization.yaml", "resources: hpa.yaml: not among the folder's files (apps)"}},
		{"missing patch", "apps/production", map[string]string{
			"apps/production/kustomization.yaml": "resources: [../base/podinfo]\npatches:\n  - path: gone.yaml\n",
		}, ErrMissing, []string{"patches: gone.yaml"}},
		{"missing generator file", "apps/generated", map[string]string{
			"apps/generated/kustomization.yaml": "configMapGenerator:\n  - name: c\n    files: [conf=absent.ini]\n",
		}, ErrMissing, []string{"configMapGenerator: absent.ini"}},
		{"base folder without a kustomization", "apps/production", map[string]string{
			"apps/production/kustomization.yaml": "resources: [../loose]\n",
			"apps/loose/deployment.yaml":         deployment,
		}, ErrMissing, []string{"resources: ../loose: apps/loose: kustomization.yaml, kustomization.yml or Kustomization: not among"}},
		{"no kustomization in dir", "apps/nowhere", nil, ErrMissing, []string{"apps/nowhere: kustomization.yaml"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Build(withFiles(kustomizeFiles(t), c.extra), c.dir)
			if !errors.Is(err, c.want) {
				t.Fatalf("Build: %v, want %v", err, c.want)
			}
			for _, s := range append(c.says, "render the kustomization in "+c.dir) {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not say %q", err, s)
				}
			}
		})
	}
}

// TestBuildRefusesRemoteBeforeTheNetwork: an overlay that names a URL is refused and the URL is
// never asked for; kustomize alone would fetch it over HTTP.
func TestBuildRefusesRemoteBeforeTheNetwork(t *testing.T) {
	var asked syncatomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		asked.Add(1)
		_, _ = w.Write([]byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: fetched\n"))
	}))
	defer srv.Close()
	for _, k := range []string{
		"resources: [" + srv.URL + "/cm.yaml]\n",
		"resources: [../base/podinfo]\npatches:\n  - path: " + srv.URL + "/patch.yaml\n",
		"configMapGenerator:\n  - name: c\n    files: [conf=" + srv.URL + "/conf.ini]\n",
		"resources: [../base/podinfo]\ntransformers: [" + srv.URL + "/t.yaml]\n",
	} {
		files := withFiles(kustomizeFiles(t), map[string]string{"apps/production/kustomization.yaml": k})
		if _, err := Build(files, "apps/production"); !errors.Is(err, ErrRemote) {
			t.Errorf("Build of %q: %v, want ErrRemote", k, err)
		}
	}
	if n := asked.Load(); n != 0 {
		t.Errorf("the server was asked %d times, want never", n)
	}
}

// TestBuildRunsNoPlugin: a transformer of a kind kustomize does not build in would be an exec
// or a container function; plugins are off, so the build fails and says so.
func TestBuildRunsNoPlugin(t *testing.T) {
	files := withFiles(kustomizeFiles(t), map[string]string{
		"apps/production/kustomization.yaml": "resources: [../base/podinfo]\ntransformers: [stamp.yaml]\n",
		"apps/production/stamp.yaml": `apiVersion: team.example.com/v1
kind: Stamp
metadata:
  name: stamp
  annotations:
    config.kubernetes.io/function: |
      exec:
        path: /bin/touch
argsOneLiner: /tmp/kbuild-plugin-ran
`,
	})
	_, err := Build(files, "apps/production")
	if err == nil || !strings.Contains(err.Error(), "plugin") {
		t.Fatalf("Build: %v, want a refusal of the plugin", err)
	}
	if !strings.Contains(err.Error(), "render the kustomization in apps/production") {
		t.Errorf("error %q does not name the kustomization", err)
	}
}

// TestBuildWrapsKustomizeErrors: what kustomize itself refuses comes back naming the
// kustomization.
func TestBuildWrapsKustomizeErrors(t *testing.T) {
	cases := map[string]string{
		"unknown field": "resources: [../base/podinfo]\nnamespaec: typo\n",
		"bad patch":     "resources: [../base/podinfo]\npatches:\n  - path: broken.yaml\n",
	}
	for name, k := range cases {
		t.Run(name, func(t *testing.T) {
			files := withFiles(kustomizeFiles(t), map[string]string{
				"apps/production/kustomization.yaml": k,
				"apps/production/broken.yaml":        "apiVersion: apps/v1\nkind: Deployment\nmetadata: [not, a, mapping]\n",
			})
			_, err := Build(files, "apps/production")
			if err == nil || !strings.Contains(err.Error(), "render the kustomization in apps/production") {
				t.Fatalf("Build: %v, want an error naming the kustomization", err)
			}
		})
	}
}

// TestBuildChecksDeprecatedFields: the fields kustomize still reads though deprecated are
// checked as their successors are.
func TestBuildChecksDeprecatedFields(t *testing.T) {
	cases := map[string]struct {
		kustomization string
		want          error
	}{
		"patchesStrategicMerge remote":  {"resources: [../base/podinfo]\npatchesStrategicMerge: [\"https://example.com/p.yaml\"]\n", ErrRemote},
		"patchesStrategicMerge missing": {"resources: [../base/podinfo]\npatchesStrategicMerge: [gone.yaml]\n", ErrMissing},
		"patchesJson6902 outside":       {"resources: [../base/podinfo]\npatchesJson6902:\n  - path: ../../p.yaml\n    target: {kind: Deployment, name: podinfo}\n", ErrOutside},
		"secretGenerator env remote":    {"secretGenerator:\n  - name: s\n    env: https://example.com/.env\n", ErrRemote},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			files := withFiles(kustomizeFiles(t), map[string]string{"apps/production/kustomization.yaml": c.kustomization})
			if _, err := Build(files, "apps/production"); !errors.Is(err, c.want) {
				t.Fatalf("Build: %v, want %v", err, c.want)
			}
		})
	}
	inline := withFiles(kustomizeFiles(t), map[string]string{"apps/production/kustomization.yaml": `resources: [../base/podinfo]
patchesStrategicMerge:
  - |-
    apiVersion: apps/v1
    kind: Deployment
    metadata: {name: podinfo, namespace: podinfo, annotations: {docs: "https://example.com/podinfo"}}
`})
	deploy := rendered(t, MustBuild(t, inline, "apps/production"), Key{Group: "apps", Kind: "Deployment", Namespace: "podinfo", Name: "podinfo"})
	expect(t, deploy, map[string]any{"metadata.annotations.docs": "https://example.com/podinfo"})
}
