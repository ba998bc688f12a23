package testenv

import (
	"testing"
)

// TestToolVersionsMatchMakefile keeps the versions of the tools testenv builds, and the
// Makefile's targets build too, one each.
func TestToolVersionsMatchMakefile(t *testing.T) {
	MakefileSays(t, "SOPS_VERSION := "+SopsVersion, "GITEA_VERSION := "+GiteaVersion)
}
