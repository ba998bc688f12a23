package main

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestDemoShowsCommitsByBothUsers runs `make demo` the way a newcomer would (non-interactive) and
// checks that the printed history credits alice and bob.
func TestDemoShowsCommitsByBothUsers(t *testing.T) {
	cmd := exec.Command("go", "run", ".")
	cmd.Env = append(os.Environ(), "DEMO_ONCE=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("demo failed: %v\n%s", err, out)
	}
	for _, want := range []string{"Author: alice <", "Author: bob <", "clusters/demo/demo/configmaps/app-config.yaml"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("demo output lacks %q:\n%s", want, out)
		}
	}
}
