package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/configbutler/gitops-reverser/testenv"
)

// TestAVersionIsReleasedFromItsTag: release build makes version 1.2.3 from the commit its tag
// v1.2.3 names, where the krew manifest's download URLs point, and from no other: without the tag,
// or with the tag at another commit, it refuses before it builds anything, naming the tag and the
// way out, a snapshot. Built at its tag, the release is no snapshot.
func TestAVersionIsReleasedFromItsTag(t *testing.T) {
	rel := sharedRelease(t)
	t.Run("the tag at HEAD", func(t *testing.T) {
		if snapshot, command := snapshotOf(t, rel.out); snapshot != nil || command != "make release VERSION="+testVersion {
			t.Errorf("release.json says snapshot %v, the provenance's command is %q: want no snapshot, make release VERSION=%s",
				snapshot, command, testVersion)
		}
	})

	src := cloneSource(t)
	refused := func(t *testing.T, want ...string) {
		t.Helper()
		out := filepath.Join(t.TempDir(), "release")
		err := run(context.Background(), buildArgs(src, out, rel.key), io.Discard, io.Discard)
		if err == nil || slices.ContainsFunc(want, func(w string) bool { return !strings.Contains(err.Error(), w) }) {
			t.Errorf("release build: %v, want a refusal saying %q", err, want)
		}
		if _, err := os.Stat(out); !os.IsNotExist(err) {
			t.Errorf("%s was written", out)
		}
	}
	t.Run("no tag", func(t *testing.T) {
		refused(t, "v"+testVersion, "git tag", "SNAPSHOT=1", "-snapshot")
	})
	testenv.MustGit(t, tagArgs(src, testVersion)...)
	tagged := strings.TrimSpace(gitOutput(t, src, "rev-parse", "--short", "HEAD"))
	testenv.MustGit(t, "-C", src, "-c", "user.name=Releaser", "-c", "user.email=releaser@example.com",
		"commit", "--quiet", "--allow-empty", "-m", "after the release")
	t.Run("the tag at another commit", func(t *testing.T) {
		refused(t, "v"+testVersion, tagged, "git checkout v"+testVersion, "SNAPSHOT=1", "-snapshot")
	})
}

// TestASnapshotIsBuiltAwayFromItsTag: told it is a snapshot, release build makes a release of an
// untagged commit, and says so: on its output, in release.json and in the provenance's command,
// so a rebuild runs the same.
func TestASnapshotIsBuiltAwayFromItsTag(t *testing.T) {
	rel := sharedRelease(t)
	src := cloneSource(t)
	out := filepath.Join(t.TempDir(), "release")
	var stdout, stderr bytes.Buffer
	if err := run(context.Background(), append(buildArgs(src, out, rel.key), "-snapshot"), &stdout, &stderr); err != nil {
		t.Fatalf("release build -snapshot: %v\n%s", err, stderr.String())
	}
	if !strings.Contains(stdout.String(), "snapshot") {
		t.Errorf("release build -snapshot does not say it made a snapshot:\n%s", stdout.String())
	}
	if snapshot, command := snapshotOf(t, out); snapshot != true || command != "make release VERSION="+testVersion+" SNAPSHOT=1" {
		t.Errorf("release.json says snapshot %v, the provenance's command is %q: want true, make release VERSION=%s SNAPSHOT=1",
			snapshot, command, testVersion)
	}
}

// snapshotOf is what the release in dir says of being a snapshot: release.json's snapshot field
// (nil when it has none) and the provenance's externalParameters.command.
func snapshotOf(t *testing.T, dir string) (snapshot any, command string) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(dir, releaseManifestFile))
	if err != nil {
		t.Fatal(err)
	}
	var manifest map[string]any
	if err := json.Unmarshal(raw, &manifest); err != nil {
		t.Fatal(err)
	}
	var st struct {
		Predicate struct {
			BuildDefinition struct {
				ExternalParameters struct {
					Command string `json:"command"`
				} `json:"externalParameters"`
			} `json:"buildDefinition"`
		} `json:"predicate"`
	}
	if err := json.Unmarshal(provenanceOf(t, dir), &st); err != nil {
		t.Fatal(err)
	}
	return manifest["snapshot"], st.Predicate.BuildDefinition.ExternalParameters.Command
}
