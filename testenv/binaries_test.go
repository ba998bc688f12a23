package testenv

import (
	"encoding/json"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestToolsShareTheModuleVersions: every module that go.mod and the tools module (testenv/tools,
// which builds etcd, kube-apiserver and kubectl) both require is required at one version. A package
// is compiled once for the control plane's programs and the tests only when its module, and every
// module under it, is the same version in both; otherwise a fresh machine compiles Kubernetes'
// client packages twice (make test, Makefile). After a go get in one module, run the same go get
// in the other.
func TestToolsShareTheModuleVersions(t *testing.T) {
	tools, err := toolsDir()
	if err != nil {
		t.Fatal(err)
	}
	if shared := sameVersions(t, filepath.Join(tools, "..", ".."), "go.mod", tools, "testenv/tools/go.mod"); shared < 50 {
		t.Errorf("go.mod and testenv/tools/go.mod share %d modules; want the Kubernetes client's (more than 50)", shared)
	}
}

// TestCLIToolsShareFluxsModuleVersions: every module that testenv/clitools (sops, cosign, crane) and
// testenv/flux (the Flux controllers) both require is required at one version, with the same
// replacements. Both are built with the same flags into the same build cache, so the packages they
// share (the cloud KMS and registry clients, Sigstore, go-containerregistry, client-go) compile once
// for the two builds, not once for each. After a go get in one module, run the same go get in the
// other.
func TestCLIToolsShareFluxsModuleVersions(t *testing.T) {
	cli, err := moduleDir("clitools")
	if err != nil {
		t.Fatal(err)
	}
	flux, err := moduleDir("flux")
	if err != nil {
		t.Fatal(err)
	}
	if shared := sameVersions(t, cli, "testenv/clitools/go.mod", flux, "testenv/flux/go.mod"); shared < 200 {
		t.Errorf("testenv/clitools and testenv/flux share %d modules; want more than 200", shared)
	}
}

// sameVersions fails the test for each module that the go.mod in dirA (named nameA in messages)
// and the one in dirB both require at different versions, and returns how many they share.
func sameVersions(t *testing.T, dirA, nameA, dirB, nameB string) (shared int) {
	t.Helper()
	b := requirements(t, dirB)
	for path, version := range requirements(t, dirA) {
		if theirs, ok := b[path]; ok {
			shared++
			if theirs != version {
				t.Errorf("%s: %s requires %s, %s %s: require one version in both", path, nameA, version, nameB, theirs)
			}
		}
	}
	return shared
}

// requirements are the modules the go.mod in dir requires (replacements applied), by path.
func requirements(t *testing.T, dir string) map[string]string {
	t.Helper()
	cmd := exec.Command("go", "mod", "edit", "-json")
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go mod edit -json in %s: %v", dir, err)
	}
	type module struct{ Path, Version string }
	var mod struct {
		Require []module
		Replace []struct{ Old, New module }
	}
	if err := json.Unmarshal(out, &mod); err != nil {
		t.Fatalf("read %s/go.mod: %v", dir, err)
	}
	versions := make(map[string]string, len(mod.Require))
	for _, r := range mod.Require {
		versions[r.Path] = r.Version
	}
	for _, r := range mod.Replace {
		if _, ok := versions[r.Old.Path]; ok && r.New.Version != "" {
			versions[r.Old.Path] = r.New.Version
		}
	}
	return versions
}
