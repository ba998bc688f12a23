package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	spdxjson "github.com/spdx/tools-golang/json"
	"github.com/spdx/tools-golang/spdx"
	"github.com/spdx/tools-golang/spdx/v2/common"
	"github.com/spdx/tools-golang/spdxlib"
)

// goModVersions are the versions go.mod selects for the modules, by path.
func goModVersions(t testing.TB, paths ...string) map[string]string {
	t.Helper()
	cmd := exec.Command("go", append([]string{"list", "-m", "-f", "{{.Path}} {{.Version}}"}, paths...)...)
	cmd.Dir = filepath.Join("..", "..")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -m: %v", err)
	}
	versions := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		path, version, _ := strings.Cut(line, " ")
		versions[path] = version
	}
	return versions
}

// TestSBOMListsTheModules reads the SBOM back as SPDX: a valid document describing the image by
// its digest, which contains the daemon at the build's version, which depends on the modules
// go.mod selects, at those versions.
func TestSBOMListsTheModules(t *testing.T) {
	res := sharedBuild(t)
	f, err := os.Open(res.SBOMFile)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	doc, err := spdxjson.Read(f)
	if err != nil {
		t.Fatalf("read %s as SPDX JSON: %v", res.SBOMFile, err)
	}
	if err := spdxlib.ValidateDocument(doc); err != nil {
		t.Errorf("SPDX validation: %v", err)
	}
	if doc.SPDXVersion != "SPDX-2.3" {
		t.Errorf("spdxVersion %q", doc.SPDXVersion)
	}
	described, err := spdxlib.GetDescribedPackageIDs(doc)
	if err != nil || len(described) != 1 {
		t.Fatalf("described packages %v: %v", described, err)
	}
	byID := map[common.ElementID]*spdx.Package{}
	byName := map[string]*spdx.Package{}
	for _, p := range doc.Packages {
		byID[p.PackageSPDXIdentifier] = p
		byName[p.PackageName] = p
	}
	image := byID[described[0]]
	if image.PackageName != defaultRepository || image.PackageVersion != "1.2.3-test" ||
		len(image.PackageChecksums) != 1 || image.PackageChecksums[0].Value != res.Digest.Hex {
		t.Errorf("the described package is %s %s %v, want %s 1.2.3-test with the index digest %s",
			image.PackageName, image.PackageVersion, image.PackageChecksums, defaultRepository, res.Digest.Hex)
	}
	daemon := byName["github.com/configbutler/gitops-reverser"]
	if daemon == nil || daemon.PackageVersion != "1.2.3-test" {
		t.Fatalf("the daemon's module: %+v, want version 1.2.3-test", daemon)
	}
	dependsOn := map[common.ElementID]bool{}
	for _, r := range doc.Relationships {
		if r.RefA.ElementRefID == daemon.PackageSPDXIdentifier && r.Relationship == common.TypeRelationshipDependsOn {
			dependsOn[r.RefB.ElementRefID] = true
		}
	}
	for path, version := range goModVersions(t, "github.com/go-git/go-git/v5", "k8s.io/client-go") {
		p := byName[path]
		if p == nil {
			t.Errorf("the SBOM lacks %s", path)
			continue
		}
		if p.PackageVersion != version {
			t.Errorf("%s: version %s, go.mod says %s", path, p.PackageVersion, version)
		}
		if purl := p.PackageExternalReferences[0].Locator; purl != "pkg:golang/"+path+"@"+version {
			t.Errorf("%s: purl %s", path, purl)
		}
		if !dependsOn[p.PackageSPDXIdentifier] {
			t.Errorf("%s: no DEPENDS_ON from the daemon", path)
		}
	}
	if byName["github.com/google/go-containerregistry"] != nil {
		t.Errorf("the SBOM lists go-containerregistry, which only the builder links, not the daemon")
	}
}
