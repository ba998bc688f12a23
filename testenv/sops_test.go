package testenv

import (
	"strings"
	"testing"
)

// TestToolVersionsMatchMakefile keeps the version of Gitea, which testenv builds and the
// Makefile's targets build too, one, and their compiler flags the same.
func TestToolVersionsMatchMakefile(t *testing.T) {
	MakefileSays(t, "GITEA_VERSION := "+GiteaVersion,
		"TOOL_GCFLAGS := "+makeFlags(toolGCFlags))
}

// makeFlags is flags as a Makefile's shell line says them: a value with a space in quotes.
func makeFlags(flags []string) string {
	said := make([]string, len(flags))
	for i, flag := range flags {
		name, value, _ := strings.Cut(flag, "=")
		if strings.Contains(value, " ") {
			value = "'" + value + "'"
		}
		said[i] = name + "=" + value
	}
	return strings.Join(said, " ")
}
