package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"sigs.k8s.io/yaml"

	"github.com/configbutler/gitops-reverser/testenv"
)

// chartSource is the chart the release packages.
var chartSource = filepath.Join("..", "..", "deploy", "helm", "gitops-reverser")

// testImageDigest stands for the image index a release pins.
var testImageDigest = v1.Hash{Algorithm: "sha256", Hex: strings.Repeat("ab", 32)}

// testChartOptions package the chart in dir (the shipped chart if empty) into a new temporary
// folder, at the fixed version and time of the image tests.
func testChartOptions(t testing.TB, dir string) chartOptions {
	t.Helper()
	if dir == "" {
		dir = chartSource
	}
	o := testOptions("")
	return chartOptions{Dir: dir, Out: t.TempDir(), Version: o.Version, ImageDigest: testImageDigest,
		Created: o.Created}
}

// mustPackageChart is packageChart that fails the test on error.
func mustPackageChart(t testing.TB, o chartOptions) *chartResult {
	t.Helper()
	res, err := packageChart(o)
	if err != nil {
		t.Fatalf("package the chart: %v", err)
	}
	return res
}

// copyChart copies the shipped chart into a temporary folder named like it, for a test to change.
func copyChart(t testing.TB) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "gitops-reverser")
	if err := os.CopyFS(dir, os.DirFS(chartSource)); err != nil {
		t.Fatal(err)
	}
	return dir
}

// writeChartFile writes content to name inside the chart at dir, creating folders.
func writeChartFile(t testing.TB, dir, name, content string) {
	t.Helper()
	p := filepath.Join(dir, filepath.FromSlash(name))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// chartArchiveContent is what an archive holds: its gzip header, its tar headers in order, and
// each file's content by name.
type chartArchiveContent struct {
	gzip    gzip.Header
	headers []*tar.Header
	files   map[string][]byte
}

// readChartArchive reads the archive at p.
func readChartArchive(t testing.TB, p string) chartArchiveContent {
	t.Helper()
	raw, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	zr, err := gzip.NewReader(bytes.NewReader(raw))
	if err != nil {
		t.Fatalf("%s: %v", p, err)
	}
	c := chartArchiveContent{gzip: zr.Header, files: map[string][]byte{}}
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return c
		}
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		c.headers = append(c.headers, h)
		c.files[h.Name] = data
	}
}

// names are the archive's entry names in order.
func (c chartArchiveContent) names() []string {
	var names []string
	for _, h := range c.headers {
		names = append(names, h.Name)
	}
	return names
}

// TestChartPackagingIsReproducible packages the chart twice into two folders: the same bytes and
// digests; another time gives another archive and manifest.
func TestChartPackagingIsReproducible(t *testing.T) {
	a := mustPackageChart(t, testChartOptions(t, ""))
	b := mustPackageChart(t, testChartOptions(t, ""))
	for _, name := range []string{filepath.Base(a.Archive), filepath.Join(chartLayoutDir, "index.json")} {
		x, errA := os.ReadFile(filepath.Join(filepath.Dir(a.Archive), name))
		y, errB := os.ReadFile(filepath.Join(filepath.Dir(b.Archive), name))
		if errA != nil || errB != nil || !bytes.Equal(x, y) {
			t.Errorf("%s differs between two packagings (%v, %v)", name, errA, errB)
		}
	}
	if a.ArchiveDigest != b.ArchiveDigest || a.Digest != b.Digest {
		t.Errorf("digests differ: archive %s and %s, manifest %s and %s", a.ArchiveDigest, b.ArchiveDigest, a.Digest, b.Digest)
	}
	if a.Name != "gitops-reverser" || a.Version != "1.2.3-test" || filepath.Base(a.Archive) != "gitops-reverser-1.2.3-test.tgz" {
		t.Errorf("result names %s %s %s", a.Name, a.Version, a.Archive)
	}

	later := testChartOptions(t, "")
	later.Created = later.Created.Add(time.Hour)
	c := mustPackageChart(t, later)
	if c.ArchiveDigest == a.ArchiveDigest || c.Digest == a.Digest {
		t.Errorf("packaged an hour later, the same archive %s or manifest %s", c.ArchiveDigest, c.Digest)
	}
}

// TestChartArchiveHasFixedHeaders: every entry is a regular file under gitops-reverser/, 0644,
// owned by 0:0 without names, dated Created; the gzip header holds no name and no time.
func TestChartArchiveHasFixedHeaders(t *testing.T) {
	o := testChartOptions(t, "")
	c := readChartArchive(t, mustPackageChart(t, o).Archive)
	if c.gzip.Name != "" || !c.gzip.ModTime.IsZero() {
		t.Errorf("gzip header names %q at %v, want neither", c.gzip.Name, c.gzip.ModTime)
	}
	for _, h := range c.headers {
		if !strings.HasPrefix(h.Name, "gitops-reverser/") || h.Typeflag != tar.TypeReg || h.Mode != 0o644 ||
			h.Uid != 0 || h.Gid != 0 || h.Uname != "" || h.Gname != "" || !h.ModTime.Equal(o.Created) {
			t.Errorf("entry %s: type %c mode %o owner %d:%d (%q:%q) mtime %v", h.Name, h.Typeflag, h.Mode,
				h.Uid, h.Gid, h.Uname, h.Gname, h.ModTime)
		}
	}
	if len(c.headers) < 20 {
		t.Errorf("only %d entries: %v", len(c.headers), c.names())
	}
}

// changedLines are the lines of after that differ from the lines of before, which must have as
// many lines.
func changedLines(t testing.TB, what string, before, after []byte) []string {
	t.Helper()
	b, a := strings.Split(string(before), "\n"), strings.Split(string(after), "\n")
	if len(a) != len(b) {
		t.Fatalf("%s: %d lines packaged, %d in the source", what, len(a), len(b))
	}
	var changed []string
	for i := range a {
		if a[i] != b[i] {
			changed = append(changed, a[i])
		}
	}
	return changed
}

// TestChartPinsVersionAndImage: in the archive, Chart.yaml says the release's version twice and
// values.yaml's image.tag names the image by version and digest; no other line changes, so
// every comment stays.
func TestChartPinsVersionAndImage(t *testing.T) {
	c := readChartArchive(t, mustPackageChart(t, testChartOptions(t, "")).Archive)
	for file, want := range map[string][]string{
		"Chart.yaml":  {"version: 1.2.3-test", `appVersion: "1.2.3-test"`},
		"values.yaml": {`  tag: "1.2.3-test@sha256:` + strings.Repeat("ab", 32) + `"`},
	} {
		src, err := os.ReadFile(filepath.Join(chartSource, file))
		if err != nil {
			t.Fatal(err)
		}
		if got := changedLines(t, file, src, c.files["gitops-reverser/"+file]); !reflect.DeepEqual(got, want) {
			t.Errorf("%s: changed lines %q, want %q", file, got, want)
		}
	}
}

// TestChartHasTheFilesHelmPackageWrites packages a copy of the chart with files .helmignore and
// helm's own default rule ignore, and compares with what helm package makes of the same folder:
// the same entries in the same order, the same bytes but for the two pinned files.
func TestChartHasTheFilesHelmPackageWrites(t *testing.T) {
	dir := copyChart(t)
	ignore, err := os.ReadFile(filepath.Join(dir, ".helmignore"))
	if err != nil {
		t.Fatal(err)
	}
	writeChartFile(t, dir, ".helmignore", string(ignore)+"/scratch/\ndocs/drafts/*\n")
	for _, name := range []string{"README.md", "notes.bak", "templates/.draft.yaml", "files/x.swp",
		"docs/a.txt", "docs/b.tmp", "docs/drafts/c.md", "scratch/d.txt", "docs/scratch/e.txt"} {
		writeChartFile(t, dir, name, name+"\n")
	}
	o := testChartOptions(t, dir)
	ours := readChartArchive(t, mustPackageChart(t, o).Archive)

	h := newHelmCLI(t)
	out := t.TempDir()
	h.must(t, "package", dir, "--version", o.Version, "--app-version", o.Version, "-d", out)
	helms := readChartArchive(t, filepath.Join(out, "gitops-reverser-"+o.Version+".tgz"))
	if !reflect.DeepEqual(ours.names(), helms.names()) {
		t.Fatalf("entries:\n ours %v\n helm %v", ours.names(), helms.names())
	}
	for _, want := range []string{"gitops-reverser/ci/all-options-values.yaml", "gitops-reverser/.helmignore",
		"gitops-reverser/docs/scratch/e.txt", "gitops-reverser/crds/watchrules.yaml", "gitops-reverser/files/grafana-dashboard.json"} {
		if ours.files[want] == nil {
			t.Errorf("the archive lacks %s", want)
		}
	}
	for n, data := range helms.files {
		if n != "gitops-reverser/Chart.yaml" && n != "gitops-reverser/values.yaml" && !bytes.Equal(data, ours.files[n]) {
			t.Errorf("%s differs from helm package's", n)
		}
	}
	// helm package writes Chart.yaml anew from what it read; ours keeps the source's layout.
	var oursMeta, helmsMeta map[string]any
	if yaml.Unmarshal(ours.files["gitops-reverser/Chart.yaml"], &oursMeta) != nil ||
		yaml.Unmarshal(helms.files["gitops-reverser/Chart.yaml"], &helmsMeta) != nil || !reflect.DeepEqual(oursMeta, helmsMeta) {
		t.Errorf("Chart.yaml: ours %v, helm's %v", oursMeta, helmsMeta)
	}
}

// helmCLI runs the helm binary of testenv with its home, cache, config and registry
// credentials in a temporary folder, and in UTC (helm push dates a chart by its file's mtime).
type helmCLI struct {
	bin string
	env []string
}

// newHelmCLI is a helm with a home of its own.
func newHelmCLI(t testing.TB) *helmCLI {
	t.Helper()
	bins, err := testenv.EnsureBinaries(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	home := t.TempDir()
	return &helmCLI{bin: bins.Helm, env: append(os.Environ(), "HOME="+home, "TZ=UTC",
		"HELM_CACHE_HOME="+filepath.Join(home, "cache"), "HELM_CONFIG_HOME="+filepath.Join(home, "config"),
		"HELM_DATA_HOME="+filepath.Join(home, "data"), "HELM_REGISTRY_CONFIG="+filepath.Join(home, "registry.json"))}
}

// run runs helm with args and returns its standard output.
func (h *helmCLI) run(t testing.TB, args ...string) (string, error) {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), h.bin, args...)
	cmd.Env = h.env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("helm %s: %w\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return stdout.String(), nil
}

// must is run that fails the test when helm fails.
func (h *helmCLI) must(t testing.TB, args ...string) string {
	t.Helper()
	out, err := h.run(t, args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestChartIsAcceptedByHelm: helm reads the archive's metadata, renders the Deployment with the
// pinned image, and lints it strictly.
func TestChartIsAcceptedByHelm(t *testing.T) {
	o := testChartOptions(t, "")
	res := mustPackageChart(t, o)
	h := newHelmCLI(t)
	checkShownChart(t, h.must(t, "show", "chart", res.Archive), o.Version)

	rendered := h.must(t, "template", "gr", res.Archive, "--namespace", "gitops-reverser-system")
	want := `image: "` + defaultRepository + ":" + o.Version + "@" + testImageDigest.String() + `"`
	if !strings.Contains(rendered, "kind: Deployment") || !strings.Contains(rendered, want) {
		t.Errorf("helm template renders no Deployment with %s", want)
	}
	h.must(t, "lint", "--strict", res.Archive)
}

// checkShownChart checks what helm show chart printed names the chart at version.
func checkShownChart(t testing.TB, shown, version string) {
	t.Helper()
	var meta chartMetadata
	if err := yaml.Unmarshal([]byte(shown), &meta); err != nil {
		t.Fatalf("helm show chart: %v\n%s", err, shown)
	}
	if meta.Name != "gitops-reverser" || meta.Version != version || meta.AppVersion != version {
		t.Errorf("helm show chart: %s %s app %s, want gitops-reverser %s app %[2]s", meta.Name, meta.Version, meta.AppVersion, version)
	}
}

// TestChartFromRegistry pushes the chart's layout to a registry on loopback as publish would,
// then helm pulls it by tag and by digest and gets the archive byte for byte; helm push of the
// same archive, dated Created, makes the very manifest packageChart made.
func TestChartFromRegistry(t *testing.T) {
	o := testChartOptions(t, "")
	res := mustPackageChart(t, o)
	archive, err := os.ReadFile(res.Archive)
	if err != nil {
		t.Fatal(err)
	}
	crane := testenv.CLI(t).Crane
	reg := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer reg.Close()
	host := strings.TrimPrefix(reg.URL, "http://")
	repo := host + "/charts/gitops-reverser"
	pushed := runCrane(t, crane, "push", res.Layout, repo+":"+res.Version)
	if want := repo + "@" + res.Digest.String(); pushed != want {
		t.Errorf("crane push printed %s, want %s", pushed, want)
	}
	checkChartManifest(t, []byte(runCrane(t, crane, "manifest", repo+":"+res.Version)), res, o.Created)

	h := newHelmCLI(t)
	for _, ref := range []string{"oci://" + repo + " --version " + res.Version, "oci://" + repo + "@" + res.Digest.String()} {
		dir := t.TempDir()
		h.must(t, append([]string{"pull"}, append(strings.Fields(ref), "--plain-http", "-d", dir)...)...)
		// (By digest helm names the file gitops-reverser@sha256-<hex>.tgz.)
		files, err := filepath.Glob(filepath.Join(dir, "*.tgz"))
		if err != nil || len(files) != 1 {
			t.Fatalf("helm pull %s wrote %v, want one archive (%v)", ref, files, err)
		}
		if pulled, err := os.ReadFile(files[0]); err != nil || !bytes.Equal(pulled, archive) {
			t.Errorf("helm pull %s: %s is not the archive packaged (%v)", ref, files[0], err)
		}
	}
	checkShownChart(t, h.must(t, "show", "chart", "oci://"+repo, "--version", res.Version, "--plain-http"), res.Version)

	checkHelmPushAgrees(t, h, crane, host+"/by-helm", res, o.Created)
}

// TestChartManifestIsHelmPushs packages a chart whose metadata exercises every annotation helm
// push derives (maintainers, chart annotations, a description helm sanitizes): helm push of the
// archive makes the manifest packageChart made.
func TestChartManifestIsHelmPushs(t *testing.T) {
	dir := copyChart(t)
	editChartFile(t, dir, "Chart.yaml", "description: >-\n", "description: |-\n")
	editChartFile(t, dir, "Chart.yaml", "keywords:\n", "maintainers:\n  - name: Ada\n    email: ada@example.com\n"+
		"  - name: Bob\n    url: https://example.com/bob\nannotations:\n  artifacthub.io/license: Apache-2.0\n"+
		"  org.opencontainers.image.title: not the name\n  org.opencontainers.image.created: \"2001-01-01T00:00:00Z\"\nkeywords:\n")
	o := testChartOptions(t, dir)
	res := mustPackageChart(t, o)
	crane := testenv.CLI(t).Crane
	reg := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer reg.Close()
	repo := strings.TrimPrefix(reg.URL, "http://") + "/by-helm"
	checkHelmPushAgrees(t, newHelmCLI(t), crane, repo, res, o.Created)

	var m v1.Manifest
	if err := json.Unmarshal([]byte(runCrane(t, crane, "manifest", repo+"/gitops-reverser@"+res.Digest.String())), &m); err != nil {
		t.Fatal(err)
	}
	for k, v := range map[string]string{
		"org.opencontainers.image.authors": "Ada (ada@example.com), Bob",
		"org.opencontainers.image.title":   "gitops-reverser",
		"org.opencontainers.image.created": "2001-01-01T00:00:00Z", // the chart's own annotation wins
		"artifacthub.io/license":           "Apache-2.0",
	} {
		if m.Annotations[k] != v {
			t.Errorf("annotation %s = %q, want %q", k, m.Annotations[k], v)
		}
	}
}

// checkHelmPushAgrees runs helm push of res's archive, dated created, into repo and checks the
// registry holds the manifest packageChart made: anyone can check the digest with helm alone.
func checkHelmPushAgrees(t testing.TB, h *helmCLI, crane, repo string, res *chartResult, created time.Time) {
	t.Helper()
	// helm push dates the manifest by the archive's mtime, written in the local zone (UTC here).
	if err := os.Chtimes(res.Archive, created, created); err != nil {
		t.Fatal(err)
	}
	h.must(t, "push", res.Archive, "oci://"+repo, "--plain-http")
	if got := runCrane(t, crane, "digest", repo+"/"+res.Name+":"+res.Version); got != res.Digest.String() {
		t.Errorf("helm push made the manifest %s, packageChart %s", got, res.Digest)
	}
}

// runCrane runs crane with args and returns its trimmed standard output.
func runCrane(t testing.TB, crane string, args ...string) string {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), crane, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("crane %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return strings.TrimSpace(string(out))
}

// checkChartManifest checks the manifest the registry serves is helm's: its config, its one
// layer the archive, the annotations helm push sets dated created; and the layout lists it alone.
func checkChartManifest(t testing.TB, raw []byte, res *chartResult, created time.Time) {
	t.Helper()
	var m v1.Manifest
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	if m.Config.MediaType != "application/vnd.cncf.helm.config.v1+json" || len(m.Layers) != 1 ||
		m.Layers[0].MediaType != "application/vnd.cncf.helm.chart.content.v1.tar+gzip" || m.Layers[0].Digest != res.ArchiveDigest {
		t.Errorf("manifest: config %s, layers %+v, want the archive %s", m.Config.MediaType, m.Layers, res.ArchiveDigest)
	}
	want := map[string]string{
		"org.opencontainers.image.title":   "gitops-reverser",
		"org.opencontainers.image.version": res.Version,
		"org.opencontainers.image.created": created.UTC().Format(time.RFC3339),
		"org.opencontainers.image.url":     defaultSource,
		"org.opencontainers.image.source":  defaultSource,
	}
	for k, v := range want {
		if m.Annotations[k] != v {
			t.Errorf("annotation %s = %q, want %q", k, m.Annotations[k], v)
		}
	}
	if !strings.HasPrefix(m.Annotations["org.opencontainers.image.description"], "Mirrors a live Kubernetes cluster into Git") {
		t.Errorf("description %q", m.Annotations["org.opencontainers.image.description"])
	}
	idx, err := layout.ImageIndexFromPath(res.Layout)
	if err != nil {
		t.Fatal(err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(im.Manifests) != 1 || im.Manifests[0].Digest != res.Digest || im.Manifests[0].MediaType != types.OCIManifestSchema1 ||
		im.Manifests[0].Annotations["org.opencontainers.image.ref.name"] != res.Version {
		t.Errorf("the layout's index lists %+v, want the manifest %s alone, named %s", im.Manifests, res.Digest, res.Version)
	}
}

// TestChartRefusesBadInput: a version helm or a registry would refuse, and charts this packager
// cannot pin or package faithfully, fail with an error that says why.
func TestChartRefusesBadInput(t *testing.T) {
	for _, tc := range []struct {
		name, version string
		change        func(t testing.TB, dir string) // of a copy of the chart
		want          string
	}{
		{name: "leading v", version: "v1.2.3", want: "without the leading v"},
		{name: "no patch", version: "1.2", want: "is not a semantic version"},
		{name: "build metadata", version: "1.2.3+abc", want: "is not a semantic version"},
		{name: "empty", version: "", want: "is not a semantic version"},
		{name: "values without image.tag", version: "1.2.3", want: "values.yaml: no key image.tag",
			change: func(t testing.TB, dir string) { editChartFile(t, dir, "values.yaml", `  tag: ""`+"\n", "") }},
		{name: "image.tag a block scalar", version: "1.2.3", want: "image.tag is not a one-line string",
			change: func(t testing.TB, dir string) { editChartFile(t, dir, "values.yaml", `tag: ""`, "tag: |\n    x") }},
		{name: "negated helmignore pattern", version: "1.2.3", want: `pattern "!keep.bak" is not supported`,
			change: func(t testing.TB, dir string) { editChartFile(t, dir, ".helmignore", "*~\n", "*~\n!keep.bak\n") }},
		{name: "dependencies", version: "1.2.3", want: "chart dependencies are not supported",
			change: func(t testing.TB, dir string) { writeChartFile(t, dir, "charts/sub/Chart.yaml", "name: sub\n") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := testChartOptions(t, "")
			o.Version = tc.version
			if tc.change != nil {
				o.Dir = copyChart(t)
				tc.change(t, o.Dir)
			}
			_, err := packageChart(o)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("packageChart: %v, want an error saying %q", err, tc.want)
			}
			if entries, _ := os.ReadDir(o.Out); len(entries) != 0 {
				t.Errorf("refused, yet wrote %v", entries)
			}
		})
	}
}

// editChartFile replaces the one occurrence of old in the chart's file name with new.
func editChartFile(t testing.TB, dir, name, old, new string) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Count(string(data), old) != 1 {
		t.Fatalf("%s holds %q %d times, want once", name, old, strings.Count(string(data), old))
	}
	writeChartFile(t, dir, name, strings.Replace(string(data), old, new, 1))
}
