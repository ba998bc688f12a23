package main

import (
	"encoding/json"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/configbutler/gitops-reverser/testenv"
)

// cranePackage is crane's command; it is built at the go-containerregistry version of go.mod,
// the version docs/image.md tells to install.
const cranePackage = "github.com/google/go-containerregistry/cmd/crane"

// ggcrVersion is the go-containerregistry version this test binary links: go.mod's.
func ggcrVersion(t testing.TB) string {
	t.Helper()
	info, ok := debug.ReadBuildInfo()
	if !ok {
		t.Fatal("no build info")
	}
	for _, d := range info.Deps {
		if d.Path == "github.com/google/go-containerregistry" {
			return d.Version
		}
	}
	t.Fatal("go-containerregistry is not in the build info")
	return ""
}

// TestCranePushesImageAndSBOM pushes the layouts with the crane commands of docs/image.md to a
// registry on loopback: the tag resolves to the index digest the build printed, both platforms
// are there, and the registry's referrers API lists the SBOM under the index.
func TestCranePushesImageAndSBOM(t *testing.T) {
	res := sharedBuild(t)
	testenv.CLIToolsPin(t, "github.com/google/go-containerregistry "+ggcrVersion(t)) // the crane docs/image.md names
	crane := testenv.CLI(t).Crane
	reg := httptest.NewServer(registry.New(registry.WithReferrersSupport(true), registry.Logger(log.New(io.Discard, "", 0))))
	defer reg.Close()
	defer http.DefaultClient.CloseIdleConnections()
	repo := strings.TrimPrefix(reg.URL, "http://") + "/configbutler/gitops-reverser"

	run := func(args ...string) string {
		t.Helper()
		out, err := exec.Command(crane, args...).Output()
		if err != nil {
			var stderr []byte
			if ee, ok := err.(*exec.ExitError); ok {
				stderr = ee.Stderr
			}
			t.Fatalf("crane %s: %v\n%s", strings.Join(args, " "), err, stderr)
		}
		return strings.TrimSpace(string(out))
	}
	pushed := run("push", res.Layout, repo+":"+res.Version)
	if want := repo + "@" + res.Digest.String(); pushed != want {
		t.Errorf("crane push printed %s, want %s", pushed, want)
	}
	if got := run("digest", repo+":"+res.Version); got != res.Digest.String() {
		t.Errorf("the tag resolves to %s, want %s", got, res.Digest)
	}
	for _, platform := range []string{"linux/amd64", "linux/arm64"} {
		var cf v1.ConfigFile
		if err := json.Unmarshal([]byte(run("config", "--platform", platform, repo+":"+res.Version)), &cf); err != nil {
			t.Fatal(err)
		}
		if cf.Architecture != strings.TrimPrefix(platform, "linux/") || cf.Config.User != imageUser {
			t.Errorf("%s from the registry: arch %s user %s", platform, cf.Architecture, cf.Config.User)
		}
	}

	run("push", res.SBOMLayout, repo+"@"+res.SBOMDigest.String())
	resp, err := http.Get(reg.URL + "/v2/configbutler/gitops-reverser/referrers/" + res.Digest.String())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	var referrers v1.IndexManifest
	if err := json.NewDecoder(resp.Body).Decode(&referrers); err != nil {
		t.Fatal(err)
	}
	// (This registry reports the config's media type as artifactType, not the manifest's own
	// artifactType as the spec says: the manifest is checked below.)
	if len(referrers.Manifests) != 1 || referrers.Manifests[0].Digest != res.SBOMDigest {
		t.Fatalf("referrers of the index: %+v, want the SBOM %s", referrers.Manifests, res.SBOMDigest)
	}
	sbom, err := os.ReadFile(res.SBOMFile)
	if err != nil {
		t.Fatal(err)
	}
	var m v1.Manifest
	if err := json.Unmarshal([]byte(run("manifest", repo+"@"+res.SBOMDigest.String())), &m); err != nil {
		t.Fatal(err)
	}
	if m.ArtifactType != "application/spdx+json" || m.Subject == nil || m.Subject.Digest != res.Digest {
		t.Errorf("SBOM artifact: artifactType %q subject %+v, want application/spdx+json referring to %s", m.ArtifactType, m.Subject, res.Digest)
	}
	if len(m.Layers) != 1 || m.Layers[0].Size != int64(len(sbom)) {
		t.Fatalf("SBOM artifact layers %+v, want the %d bytes of %s", m.Layers, len(sbom), res.SBOMFile)
	}
	if got := run("blob", repo+"@"+m.Layers[0].Digest.String()); got != strings.TrimSpace(string(sbom)) {
		t.Errorf("the pushed SBOM differs from %s", res.SBOMFile)
	}
}

// TestDocsInstallTheCraneOfGoMod: docs/image.md tells to install the crane this test pushes with.
func TestDocsInstallTheCraneOfGoMod(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "image.md"))
	if err != nil {
		t.Fatal(err)
	}
	if want := "go install " + cranePackage + "@" + ggcrVersion(t); !strings.Contains(string(doc), want) {
		t.Errorf("docs/image.md lacks %q", want)
	}
}
