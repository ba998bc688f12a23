package main

import (
	"cmp"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestTheProvenanceRecordsTheGoEnvFilesGOFLAGS: GOFLAGS set with go env -w, in the go env file and
// not in the environment, is what every go build of the release used, so it is what the
// provenance records for a rebuild to use again.
func TestTheProvenanceRecordsTheGoEnvFilesGOFLAGS(t *testing.T) {
	rel := sharedRelease(t)
	// The GOFLAGS the shared release was built with (make test's), moved from the environment to
	// the file, so every package comes from the build cache: other flags would compile the daemon
	// again for every platform. Without any, two that every build's command line has already.
	goflags := cmp.Or(os.Getenv("GOFLAGS"), "-buildvcs=false -trimpath")
	t.Setenv("GOENV", goEnvFileWith(t, "GOFLAGS="+goflags))
	t.Setenv("GOFLAGS", "")
	if err := os.Unsetenv("GOFLAGS"); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "release")
	releaseInto(t, rel.src, out, rel.key)
	var st struct {
		Predicate struct {
			BuildDefinition struct {
				InternalParameters map[string]any `json:"internalParameters"`
			} `json:"buildDefinition"`
		} `json:"predicate"`
	}
	if err := json.Unmarshal(provenanceOf(t, out), &st); err != nil {
		t.Fatal(err)
	}
	if got := st.Predicate.BuildDefinition.InternalParameters["GOFLAGS"]; got != goflags {
		t.Errorf("internalParameters.GOFLAGS is %q, want %q, what go env -w set", got, goflags)
	}
}

// goEnvFileWith is a copy of the go env file the tests run with (so GOTOOLCHAIN and the like stay
// as they are) with setting written into it by go env -w.
func goEnvFileWith(t *testing.T, setting string) string {
	t.Helper()
	goEnv := func(env []string, args ...string) string {
		cmd := exec.Command("go", append([]string{"env"}, args...)...)
		cmd.Env = append(os.Environ(), env...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("go env %v: %v\n%s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	current, err := os.ReadFile(goEnv(nil, "GOENV"))
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "go.env")
	if err := os.WriteFile(file, current, 0o644); err != nil {
		t.Fatal(err)
	}
	goEnv([]string{"GOENV=" + file}, "-w", setting)
	return file
}
