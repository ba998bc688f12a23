package daemon

import (
	"os"
	"strings"
	"testing"
)

// TestREADMEDocumentsEveryKey keeps the configuration reference from drifting from the CLI.
func TestREADMEDocumentsEveryKey(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range Flags() {
		key := f.Names()[0]
		row := "| `" + key + "` | `" + EnvVar(key) + "` |"
		if !strings.Contains(string(readme), row) {
			t.Errorf("README configuration reference lacks the row for %s: %q", key, row)
		}
	}
}
