package main

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"go.yaml.in/yaml/v3"

	"github.com/configbutler/gitops-reverser/testenv"
)

// krewVersion is the krew whose validator and installer check the manifest: krew-index's CI runs
// validate-krew-manifest on every plugin manifest submitted to it.
const krewVersion = "v0.4.3"

// krewTools are krew's validate-krew-manifest and a PATH folder holding kubectl and krew as its
// plugin kubectl-krew: the validator installs each platform with `kubectl krew install`.
func krewTools(t *testing.T) (validator, path string) {
	t.Helper()
	validator = testenv.GoTool(t, "validate-krew-manifest", "sigs.k8s.io/krew/cmd/validate-krew-manifest", krewVersion, testenv.Unoptimised...)
	krew := testenv.GoTool(t, "krew", "sigs.k8s.io/krew/cmd/krew", krewVersion, testenv.Unoptimised...)
	bins, err := testenv.EnsureBinaries(context.Background())
	if err != nil {
		t.Fatalf("kubectl: %v", err)
	}
	path = t.TempDir()
	for name, target := range map[string]string{"kubectl": bins.Kubectl, "kubectl-krew": krew} {
		if err := os.Symlink(target, filepath.Join(path, name)); err != nil {
			t.Fatal(err)
		}
	}
	return validator, path
}

// archiveServer serves the files of dir on 127.0.0.1 and returns its URL and the paths asked
// for so far.
func archiveServer(t *testing.T, dir string) (string, func() []string) {
	t.Helper()
	var mu sync.Mutex
	var asked []string
	files := http.FileServer(http.Dir(dir))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		asked = append(asked, r.URL.Path)
		mu.Unlock()
		files.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(asked)
	}
}

// licensedArchives are the shared binaries' archives as they would be with a LICENSE beside the
// binary (a placeholder: the repository has none yet), written by the same writer under the
// same names into a folder of their own.
func licensedArchives(t *testing.T) []binaryArchive {
	t.Helper()
	bins, archives := sharedArchives(t)
	dir := t.TempDir()
	license := filepath.Join(t.TempDir(), "LICENSE")
	if err := os.WriteFile(license, []byte("placeholder: the repository has no LICENSE yet\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	created := testOptions("").Created
	licensed := make([]binaryArchive, len(archives))
	for i, a := range archives {
		a.Path = filepath.Join(dir, a.Name)
		var err error
		a.Digest, err = writeArchive(a.Path, created, []archiveFile{
			{Name: cliBinary, Mode: 0o755, Source: bins[a.Platform]},
			{Name: "LICENSE", Mode: 0o644, Source: license},
		})
		if err != nil {
			t.Fatal(err)
		}
		licensed[i] = a
	}
	return licensed
}

// runValidator runs krew's validator on the manifest, with only the krew tools on PATH, and returns
// its output.
func runValidator(t *testing.T, validator, path, manifest string) (string, error) {
	t.Helper()
	cmd := exec.Command(validator, "-manifest", manifest)
	cmd.Env = []string{"PATH=" + path, "HOME=" + t.TempDir(), "TMPDIR=" + t.TempDir()}
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// TestKrewValidatorInstallsEveryPlatform: krew's own validator reads the manifest, and for each
// platform downloads the archive from its uri, checks its sha256 and installs it with krew.
// This takes archives with a LICENSE beside the binary: see TestKrewValidatorWantsALicense.
func TestKrewValidatorInstallsEveryPlatform(t *testing.T) {
	validator, path := krewTools(t)
	archives := licensedArchives(t)
	url, asked := archiveServer(t, filepath.Dir(archives[0].Path))
	manifest, err := writeKrewManifest(t.TempDir(), "1.2.3-test", url, archives)
	if err != nil {
		t.Fatal(err)
	}
	out, err := runValidator(t, validator, path, manifest)
	if err != nil || !strings.Contains(out, fmt.Sprintf("all %d spec.platforms installed fine", len(cliPlatforms))) {
		t.Fatalf("validate-krew-manifest: %v\n%s", err, out)
	}
	for _, a := range archives {
		if !slices.Contains(asked(), "/"+a.Name) {
			t.Errorf("the validator never downloaded %s (asked for %v)", a.Name, asked())
		}
	}
}

// TestKrewValidatorWantsALicense: krew's validator, which krew-index runs on every manifest
// submitted to it, refuses ours today: after installing the first platform fine (downloaded,
// sha256 checked, linked) it finds no LICENSE among the installed files, because the
// repository has none to put in the archives. Adding one flips this test.
func TestKrewValidatorWantsALicense(t *testing.T) {
	validator, path := krewTools(t)
	_, archives := sharedArchives(t)
	url, asked := archiveServer(t, filepath.Dir(archives[0].Path))
	manifest, err := writeKrewManifest(t.TempDir(), "1.2.3-test", url, archives)
	if err != nil {
		t.Fatal(err)
	}
	out, err := runValidator(t, validator, path, manifest)
	if err == nil || !strings.Contains(out, "could not find license file among [gitops-reverser]") {
		t.Fatalf("validate-krew-manifest: %v, want a refusal for the missing LICENSE\n%s", err, out)
	}
	if got := asked(); !slices.Equal(got, []string{"/" + archives[0].Name}) {
		t.Errorf("downloads %v, want the first platform's archive only", got)
	}
}

// TestKrewValidatorRefusesBrokenManifests: the validator refuses a manifest whose sha256 is
// another archive's, one without bin, and one whose bin is not in the archive.
func TestKrewValidatorRefusesBrokenManifests(t *testing.T) {
	validator, path := krewTools(t)
	archives := licensedArchives(t)
	url, _ := archiveServer(t, filepath.Dir(archives[0].Path))
	binLine := regexp.MustCompile(`(?m)^( +)bin: gitops-reverser\n`)
	for _, c := range []struct {
		name     string
		archives func([]binaryArchive) // changes the archives the manifest is written from
		edit     func(string) string   // changes the manifest's text
		want     string
	}{
		{"wrong sha256", func(a []binaryArchive) { a[1].Digest = a[2].Digest }, nil, "checksum does not match"},
		{"no bin", nil, func(m string) string { return binLine.ReplaceAllString(m, "") }, "`bin` has to be set"},
		{"bin not in the archive", nil, func(m string) string {
			return binLine.ReplaceAllString(m, "${1}bin: kubectl-gitops_reverser\n")
		}, "cannot be found in extracted archive"},
	} {
		t.Run(c.name, func(t *testing.T) {
			broken := slices.Clone(archives)
			if c.archives != nil {
				c.archives(broken)
			}
			manifest, err := writeKrewManifest(t.TempDir(), "1.2.3-test", url, broken)
			if err != nil {
				t.Fatal(err)
			}
			if c.edit != nil {
				edited := c.edit(string(mustReadFile(t, manifest)))
				if err := os.WriteFile(manifest, []byte(edited), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			out, err := runValidator(t, validator, path, manifest)
			if err == nil || !strings.Contains(out, c.want) {
				t.Fatalf("validate-krew-manifest: %v, want a refusal saying %q\n%s", err, c.want, out)
			}
		})
	}
}

// TestKrewInstallsThePlugin: `krew install --manifest --archive` with the linux/amd64 archive
// links the binary as kubectl-gitops_reverser, kubectl finds it there and runs it as the
// plugin (its help), and kubectl gitops-reverser --version prints the release's version.
func TestKrewInstallsThePlugin(t *testing.T) {
	_, path := krewTools(t)
	_, archives := sharedArchives(t)
	i := slices.IndexFunc(archives, func(a binaryArchive) bool { return a.Platform == "linux/amd64" })
	manifest, err := writeKrewManifest(t.TempDir(), "1.2.3-test", defaultSource+"/releases/download/v1.2.3-test", archives)
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	env := []string{"PATH=" + filepath.Join(root, "bin") + ":" + path, "HOME=" + t.TempDir(),
		"KREW_ROOT=" + root, "KREW_OS=linux", "KREW_ARCH=amd64", "KREW_NO_UPGRADE_CHECK=1"}
	run := func(name string, args ...string) string {
		t.Helper()
		cmd := exec.Command(name, args...)
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	run(filepath.Join(path, "kubectl"), "krew", "install", "--manifest="+manifest, "--archive="+archives[i].Path)

	link := filepath.Join(root, "bin", "kubectl-gitops_reverser")
	target, err := os.Readlink(link)
	if want := filepath.Join(root, "store", "gitops-reverser", "v1.2.3-test", cliBinary); err != nil || target != want {
		t.Fatalf("%s links to %q (%v), want %s", link, target, err, want)
	}
	if out := run(filepath.Join(path, "kubectl"), "gitops-reverser"); !strings.Contains(out, "kubectl gitops-reverser - see and decide") {
		t.Errorf("kubectl gitops-reverser prints no plugin help:\n%s", out)
	}
	if out := run(filepath.Join(path, "kubectl"), "gitops-reverser", "--version"); strings.TrimSpace(out) != "kubectl gitops-reverser version 1.2.3-test" {
		t.Errorf("kubectl gitops-reverser --version: %q", out)
	}
}

// TestKrewManifestNamesTheArchives: the manifest says v + version, and for each archive, in
// order, its os and arch, downloadURL + "/" + its name, its sha256 and the binary.
func TestKrewManifestNamesTheArchives(t *testing.T) {
	archives := []binaryArchive{
		{Platform: "linux/amd64", Name: "a.tar.gz", Digest: v1.Hash{Algorithm: "sha256", Hex: strings.Repeat("a", 64)}},
		{Platform: "darwin/arm64", Name: "b.tar.gz", Digest: v1.Hash{Algorithm: "sha256", Hex: strings.Repeat("b", 64)}},
	}
	manifest, err := writeKrewManifest(t.TempDir(), "1.2.3", "https://example.com/download/v1.2.3/", archives)
	if err != nil {
		t.Fatal(err)
	}
	if filepath.Base(manifest) != "gitops-reverser.yaml" {
		t.Errorf("manifest at %s, krew wants <plugin name>.yaml", manifest)
	}
	var p krewPlugin
	if err := yaml.Unmarshal(mustReadFile(t, manifest), &p); err != nil {
		t.Fatal(err)
	}
	if p.APIVersion != krewAPIVersion || p.Kind != "Plugin" || p.Metadata.Name != "gitops-reverser" || p.Spec.Version != "v1.2.3" {
		t.Errorf("manifest %s %s %s %s", p.APIVersion, p.Kind, p.Metadata.Name, p.Spec.Version)
	}
	want := []krewPlatform{
		{krewSelector{map[string]string{"os": "linux", "arch": "amd64"}}, "https://example.com/download/v1.2.3/a.tar.gz", strings.Repeat("a", 64), cliBinary},
		{krewSelector{map[string]string{"os": "darwin", "arch": "arm64"}}, "https://example.com/download/v1.2.3/b.tar.gz", strings.Repeat("b", 64), cliBinary},
	}
	if !slices.EqualFunc(p.Spec.Platforms, want, func(a, b krewPlatform) bool {
		return a.URI == b.URI && a.Sha256 == b.Sha256 && a.Bin == b.Bin &&
			a.Selector.MatchLabels["os"] == b.Selector.MatchLabels["os"] && a.Selector.MatchLabels["arch"] == b.Selector.MatchLabels["arch"] &&
			len(a.Selector.MatchLabels) == 2
	}) {
		t.Errorf("platforms %+v, want %+v", p.Spec.Platforms, want)
	}
}

// TestKrewManifestRefusesWhatKrewWould: a version that is not semver (or has its v already),
// no archives, no URL, two archives for one platform and a digest that is not sha256 are
// refused, and no manifest is written.
func TestKrewManifestRefusesWhatKrewWould(t *testing.T) {
	good := binaryArchive{Platform: "linux/amd64", Name: "a.tar.gz", Digest: v1.Hash{Algorithm: "sha256", Hex: strings.Repeat("a", 64)}}
	sha512 := good
	sha512.Digest = v1.Hash{Algorithm: "sha512", Hex: strings.Repeat("a", 128)}
	for _, c := range []struct {
		name, version, url string
		archives           []binaryArchive
		want               string
	}{
		{"leading v", "v1.2.3", "https://x", []binaryArchive{good}, "without the leading v"},
		{"not semver", "latest", "https://x", []binaryArchive{good}, "not a semantic version"},
		{"no archives", "1.2.3", "https://x", nil, "at least one archive"},
		{"no URL", "1.2.3", "", []binaryArchive{good}, "needs the URL"},
		{"twice", "1.2.3", "https://x", []binaryArchive{good, good}, "two archives for platform linux/amd64"},
		{"sha512", "1.2.3", "https://x", []binaryArchive{sha512}, "is not a sha256"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			_, err := writeKrewManifest(dir, c.version, c.url, c.archives)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want one saying %q", err, c.want)
			}
			if _, err := os.Stat(filepath.Join(dir, krewManifestFile)); !os.IsNotExist(err) {
				t.Errorf("a manifest was written: %v", err)
			}
		})
	}
}
