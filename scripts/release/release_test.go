package main

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"log"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/secure-systems-lab/go-securesystemslib/dsse"

	"github.com/configbutler/gitops-reverser/testenv"
)

// The cosign the tests verify with: the current release, pinned by testenv/clitools, built from
// the module proxy once and cached (Makefile: later-tools builds it beside the tests).
const (
	cosignModule  = "github.com/sigstore/cosign/v3"
	cosignVersion = "v3.1.3"
)

// The releaser's throwaway key's password, and a registry account.
const (
	testPassword = "correct horse battery staple"
	registryUser = "releaser"
	registryPass = "s3cret"
)

// The oldest cosign the docs name: cosign 2's verify-blob reads a Sigstore bundle only with a
// trusted root, which it fetches online, so what is printed and documented must work without one.
const (
	cosign2Module  = "github.com/sigstore/cosign/v2"
	cosign2Version = "v2.6.5"
)

// cosignBinary is the cosign CLI, built once.
func cosignBinary(t testing.TB) string {
	t.Helper()
	return testenv.CLI(t).Cosign
}

// versionedCosign is a cosign CLI and its version.
type versionedCosign struct{ version, bin string }

// everyCosign is each cosign the printed and documented commands must work with: the oldest the
// docs name and the current one.
func everyCosign(t testing.TB) []versionedCosign {
	t.Helper()
	return []versionedCosign{
		{cosign2Version, testenv.CLI(t).Cosign2},
		{cosignVersion, cosignBinary(t)},
	}
}

// offlineEnv is the environment of a tool run as on a machine without the internet: every
// request but to loopback goes to a proxy that answers none (Go's clients never send loopback
// through a proxy, so the test registry is still reached), and nothing is cached from before.
func offlineEnv(t testing.TB) []string {
	t.Helper()
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "offline", http.StatusBadGateway)
	}))
	t.Cleanup(proxy.Close)
	var env []string
	for _, v := range []string{"HTTPS_PROXY", "HTTP_PROXY", "https_proxy", "http_proxy"} {
		env = append(env, v+"="+proxy.URL)
	}
	return append(env, "NO_PROXY=", "no_proxy=", "HOME="+t.TempDir(), "TUF_ROOT="+t.TempDir())
}

// The release the tests share: building one takes a while the first time (the darwin binaries
// are compiled), so a test binary makes it once, from a clean clone of HEAD, with a throwaway key.
var sharedRel struct {
	once sync.Once
	rel  *testRelease
	err  error
}

// testRelease is a release and what it was made from.
type testRelease struct {
	src, out, key string
	result        *releaseResult
}

// sharedRelease is the release the tests share, made on first use; $COSIGN_PASSWORD is set for
// the test.
func sharedRelease(t *testing.T) *testRelease {
	t.Helper()
	t.Setenv(passwordEnv, testPassword)
	sharedRel.once.Do(func() {
		dir := filepath.Join(shared.dir, "release")
		rel := &testRelease{src: filepath.Join(dir, "src"), out: filepath.Join(dir, "out")}
		if out, err := exec.Command("git", "clone", "--quiet", filepath.Join("..", ".."), rel.src).CombinedOutput(); err != nil {
			sharedRel.err = fmt.Errorf("git clone: %w\n%s", err, out)
			return
		}
		if out, err := exec.Command("git", tagArgs(rel.src, testVersion)...).CombinedOutput(); err != nil {
			sharedRel.err = fmt.Errorf("git tag: %w\n%s", err, out)
			return
		}
		if err := run(context.Background(), []string{"keygen", "-out", dir}, io.Discard, io.Discard); err != nil {
			sharedRel.err = err
			return
		}
		rel.key = filepath.Join(dir, "cosign.key")
		var stderr bytes.Buffer
		args := buildArgs(rel.src, rel.out, rel.key)
		if err := run(context.Background(), args, io.Discard, &stderr); err != nil {
			sharedRel.err = fmt.Errorf("release build: %w\n%s", err, stderr.String())
			return
		}
		sharedRel.rel = rel
	})
	if sharedRel.err != nil {
		t.Fatal(sharedRel.err)
	}
	sharedRel.rel.result = readRelease(t, sharedRel.rel.out)
	return sharedRel.rel
}

// cloneSource is a clean clone of this repository's HEAD, not tagged.
func cloneSource(t testing.TB) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "src")
	testenv.MustGit(t, "clone", "--quiet", filepath.Join("..", ".."), dir)
	return dir
}

// taggedSource is what a releaser has checked out: a clean clone of this repository's HEAD,
// tagged v<testVersion>.
func taggedSource(t testing.TB) string {
	t.Helper()
	dir := cloneSource(t)
	testenv.MustGit(t, tagArgs(dir, testVersion)...)
	return dir
}

// tagArgs are the arguments of git that tag the HEAD of dir v<version>, annotated as
// docs/release.md's git tag -s makes it.
func tagArgs(dir, version string) []string {
	return []string{"-C", dir, "-c", "user.name=Releaser", "-c", "user.email=releaser@example.com",
		"tag", "-a", "-m", "gitops-reverser " + version, "v" + version}
}

// authRegistry is an OCI registry on loopback (go-containerregistry's, with the referrers API)
// that wants registryUser's password, and a Docker config file that gives it: publish, cosign
// and helm read their credentials from there as they would for any registry.
func authRegistry(t testing.TB) (host, dockerConfig string) {
	t.Helper()
	reg := registry.New(registry.WithReferrersSupport(true), registry.Logger(log.New(io.Discard, "", 0)))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if u, p, ok := r.BasicAuth(); !ok || u != registryUser || p != registryPass {
			w.Header().Set("WWW-Authenticate", `Basic realm="test"`)
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		reg.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(http.DefaultClient.CloseIdleConnections)
	host = strings.TrimPrefix(srv.URL, "http://")
	dir := t.TempDir()
	auth := base64.StdEncoding.EncodeToString([]byte(registryUser + ":" + registryPass))
	cfg := `{"auths":{"` + host + `":{"auth":"` + auth + `"}}}`
	if err := os.WriteFile(filepath.Join(dir, "config.json"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return host, dir
}

// testVersion is the version of the tests' releases.
const testVersion = "1.2.3"

// buildArgs is release build's command line of the tests: version testVersion of src into out,
// signed with key, for cliPlatforms.
func buildArgs(src, out, key string) []string {
	return []string{"build", "-C", src, "-out", out, "-version", testVersion, "-key", key, "-binary-platforms", strings.Join(cliPlatforms, ",")}
}

// TestMakeReleaseBuildsEveryPlatform: without flags, release build makes the image for linux on
// amd64 and arm64, and the binaries for linux and darwin on amd64 and arm64.
func TestMakeReleaseBuildsEveryPlatform(t *testing.T) {
	ro, _, err := parseBuildFlags([]string{"-version", "1.2.3", "-key", "k"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"linux/amd64", "linux/arm64", "darwin/amd64", "darwin/arm64"}; !slices.Equal(ro.BinaryPlatforms, want) ||
		!slices.Equal(ro.Image.Platforms, want[:2]) {
		t.Errorf("binaries for %v, image for %v", ro.BinaryPlatforms, ro.Image.Platforms)
	}
}

// releaseInto builds a release of src into out, signed with key, and returns release.json.
func releaseInto(t testing.TB, src, out, key string) *releaseResult {
	t.Helper()
	var stdout, stderr bytes.Buffer
	err := run(context.Background(), buildArgs(src, out, key), &stdout, &stderr)
	if err != nil {
		t.Fatalf("release build: %v\n%s", err, stderr.String())
	}
	t.Logf("release build:\n%s", stdout.String())
	return readRelease(t, out)
}

func readRelease(t testing.TB, dir string) *releaseResult {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(dir, releaseManifestFile))
	if err != nil {
		t.Fatal(err)
	}
	var r releaseResult
	if err := json.Unmarshal(raw, &r); err != nil {
		t.Fatal(err)
	}
	return &r
}

// keyPair makes a throwaway key pair with release keygen into a folder of its own.
func keyPair(t testing.TB) (private, public string) {
	t.Helper()
	dir := t.TempDir()
	if err := run(context.Background(), []string{"keygen", "-out", dir}, io.Discard, io.Discard); err != nil {
		t.Fatal(err)
	}
	return filepath.Join(dir, "cosign.key"), filepath.Join(dir, "cosign.pub")
}

// toolRun runs a printed command line (split on spaces: the commands have no quoted arguments)
// with bin for its program, in env, and returns its combined output and error.
func toolRun(t testing.TB, bin string, env []string, line string) (string, error) {
	t.Helper()
	return toolRunIn(t, "", bin, env, line)
}

// toolRunIn is toolRun in the folder dir.
func toolRunIn(t testing.TB, dir, bin string, env []string, line string) (string, error) {
	t.Helper()
	args := strings.Fields(line)[1:]
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// printedCommands are the lines of publish's output that start with prog, without the indent.
func printedCommands(out, prog string) []string {
	var cmds []string
	for _, l := range strings.Split(out, "\n") {
		if l = strings.TrimSpace(l); strings.HasPrefix(l, prog+" ") {
			cmds = append(cmds, l)
		}
	}
	return cmds
}

// TestTheSameCommitGivesTheSameRelease builds the shared release's commit again with the same key:
// every digest is the same but the signatures' (ECDSA signs with fresh randomness), so anyone
// can rebuild a release and compare.
func TestTheSameCommitGivesTheSameRelease(t *testing.T) {
	rel := sharedRelease(t)
	out := filepath.Join(t.TempDir(), "release")
	again := releaseInto(t, rel.src, out, rel.key)
	first := rel.result
	if again.Image != first.Image || again.Chart != first.Chart || again.SBOM != first.SBOM {
		t.Errorf("image, chart, SBOM:\n%+v %+v %+v\nthen\n%+v %+v %+v", first.Image, first.Chart, first.SBOM, again.Image, again.Chart, again.SBOM)
	}
	if !slices.Equal(again.Files, first.Files) {
		t.Errorf("files:\n%v\nthen\n%v", first.Files, again.Files)
	}
	if a, b := provenanceOf(t, rel.out), provenanceOf(t, out); !bytes.Equal(a, b) {
		t.Errorf("the provenance statements differ:\n%s\n%s", a, b)
	}
}

// TestTheProvenanceSaysWhatWasBuiltFromWhat reads the signed provenance: it names the commit and
// the repository, the go build of every platform, the Go version, every module with its go.sum
// hash, and every artifact of the release by digest.
func TestTheProvenanceSaysWhatWasBuiltFromWhat(t *testing.T) {
	rel := sharedRelease(t)
	var st struct {
		Type          string `json:"_type"`
		PredicateType string `json:"predicateType"`
		Subject       []struct {
			Name   string            `json:"name"`
			Digest map[string]string `json:"digest"`
		} `json:"subject"`
		Predicate struct {
			BuildDefinition struct {
				BuildType            string `json:"buildType"`
				ExternalParameters   map[string]any
				InternalParameters   map[string]any
				ResolvedDependencies []struct {
					URI    string            `json:"uri"`
					Digest map[string]string `json:"digest"`
				} `json:"resolvedDependencies"`
			} `json:"buildDefinition"`
			RunDetails struct {
				Builder struct {
					ID string `json:"id"`
				} `json:"builder"`
			} `json:"runDetails"`
		} `json:"predicate"`
	}
	if err := json.Unmarshal(provenanceOf(t, rel.out), &st); err != nil {
		t.Fatal(err)
	}
	head := strings.TrimSpace(gitOutput(t, rel.src, "rev-parse", "HEAD"))
	def := st.Predicate.BuildDefinition
	if st.Type != "https://in-toto.io/Statement/v1" || st.PredicateType != slsaProvenanceType || def.BuildType != buildType {
		t.Errorf("statement %s, predicate %s, build type %s", st.Type, st.PredicateType, def.BuildType)
	}
	if src := def.ExternalParameters["source"].(map[string]any); src["revision"] != head || src["repository"] != defaultSource {
		t.Errorf("external parameters name the source %v, want %s at %s", src, defaultSource, head)
	}
	if len(def.ResolvedDependencies) < 10 || def.ResolvedDependencies[0].Digest["gitCommit"] != head {
		t.Fatalf("resolved dependencies: %+v", def.ResolvedDependencies)
	}
	var modules int
	for _, d := range def.ResolvedDependencies {
		if strings.HasPrefix(d.URI, "pkg:golang/k8s.io/client-go@") && len(d.Digest["dirHash"]) == 64 {
			modules++
		}
	}
	if modules != 1 {
		t.Errorf("client-go with its go.sum hash is listed %d times", modules)
	}
	builds := def.InternalParameters["builds"].([]any)
	if len(builds) != len(cliPlatforms) || !strings.Contains(builds[2].(string), "GOOS=darwin GOARCH=arm64") ||
		def.InternalParameters["goVersion"] != runtime.Version() {
		t.Errorf("internal parameters: %v", def.InternalParameters)
	}
	subjects := map[string]string{}
	for _, s := range st.Subject {
		subjects[s.Name] = s.Digest["sha256"]
	}
	r := rel.result
	want := map[string]string{r.Image.Repository: r.Image.Digest.Hex, r.Chart.Repository: r.Chart.Digest.Hex}
	for _, f := range r.Files {
		want[f.Name] = f.Digest.Hex
	}
	if !maps.Equal(subjects, want) {
		t.Errorf("subjects\n%v\nwant\n%v", subjects, want)
	}
}

// TestADirtyTreeIsNotReleased: a file changed, or one Git does not know, stops the release
// before anything is built, naming the file.
func TestADirtyTreeIsNotReleased(t *testing.T) {
	rel := sharedRelease(t)
	for _, file := range []string{"README.md", "extra.go"} {
		path := filepath.Join(rel.src, file)
		before, _ := os.ReadFile(path)
		if err := os.WriteFile(path, append(slices.Clone(before), "\n// changed\n"...), 0o644); err != nil {
			t.Fatal(err)
		}
		out := filepath.Join(t.TempDir(), "release")
		err := run(context.Background(), buildArgs(rel.src, out, rel.key), io.Discard, io.Discard)
		if err == nil || !strings.Contains(err.Error(), "has changes") || !strings.Contains(err.Error(), file) {
			t.Errorf("with %s changed: %v, want a refusal naming it", file, err)
		}
		if _, err := os.Stat(out); !os.IsNotExist(err) {
			t.Errorf("with %s changed, %s was written", file, out)
		}
		testenv.MustGit(t, "-C", rel.src, "checkout", "--quiet", "--", ".")
		testenv.MustGit(t, "-C", rel.src, "clean", "--quiet", "-f")
	}
}

// provenanceOf is the statement in the release's provenance file, its signature checked with
// the release's public key.
func provenanceOf(t testing.TB, dir string) []byte {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(dir, provenanceFile))
	if err != nil {
		t.Fatal(err)
	}
	var env dsse.Envelope
	if err := json.Unmarshal(bytes.TrimSpace(raw), &env); err != nil {
		t.Fatal(err)
	}
	pub, err := os.ReadFile(filepath.Join(dir, publicKeyFile))
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(pub)
	key, err := x509.ParsePKIXPublicKey(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	body, err := env.DecodeB64Payload()
	if err != nil {
		t.Fatal(err)
	}
	sig, err := base64.StdEncoding.DecodeString(env.Signatures[0].Sig)
	if err != nil {
		t.Fatal(err)
	}
	digest := sha256.Sum256(dsse.PAE(env.PayloadType, body))
	if env.PayloadType != inTotoPayloadType || !ecdsa.VerifyASN1(key.(*ecdsa.PublicKey), digest[:], sig) {
		t.Fatalf("%s: the envelope (%s) is not signed by the release's key", provenanceFile, env.PayloadType)
	}
	return body
}

func gitOutput(t testing.TB, dir string, args ...string) string {
	t.Helper()
	out, err := exec.Command("git", append([]string{"-C", dir}, args...)...).Output()
	if err != nil {
		t.Fatalf("git %v: %v", args, err)
	}
	return string(out)
}
