package testenv

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestSopsVersionMatchesMakefile keeps the one sops version in two places equal.
func TestSopsVersionMatchesMakefile(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	want := "SOPS_VERSION := " + SopsVersion
	if !slices.Contains(strings.Split(string(raw), "\n"), want) {
		t.Errorf("the Makefile has no line %q: keep it and SopsVersion in testenv/sops.go equal", want)
	}
}
