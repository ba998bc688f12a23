package writeback

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/configbutler/gitops-reverser/sanitize"
)

// diffConfigMap is the canonical YAML of a ConfigMap of exactly lines lines.
func diffConfigMap(t *testing.T, lines int) string {
	t.Helper()
	data := map[string]any{}
	for i := range lines - 6 { // apiVersion, kind, metadata, name, namespace, data
		data[fmt.Sprintf("key-%03d", i)] = fmt.Sprintf("value %d", i)
	}
	out, err := sanitize.YAML(map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": "web", "namespace": "default"},
		"data":     data,
	})
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(out), "\n"); n != lines {
		t.Fatalf("%d lines, want %d", n, lines)
	}
	return string(out)
}

// diffApply writes live to obj.yaml in a fresh directory, applies diff there with the real
// tool (args run in that directory, the patch on stdin) and returns what obj.yaml holds then
// ("" when the tool removed it).
func diffApply(t *testing.T, live, diff string, args ...string) string {
	t.Helper()
	if _, err := exec.LookPath(args[0]); err != nil {
		t.Skipf("%s not installed: %v", args[0], err)
	}
	dir := t.TempDir()
	file := filepath.Join(dir, "obj.yaml")
	if err := os.WriteFile(file, []byte(live), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Dir = dir
	cmd.Stdin = strings.NewReader(diff)
	// git apply outside a repository works like patch; keep it from finding one above dir.
	cmd.Env = append(os.Environ(), "GIT_CEILING_DIRECTORIES="+filepath.Dir(dir), "LC_ALL=C")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s\npatch:\n%s", strings.Join(args, " "), err, out, diff)
	}
	got, err := os.ReadFile(file)
	if errors.Is(err, fs.ErrNotExist) {
		return ""
	}
	if err != nil {
		t.Fatal(err)
	}
	return string(got)
}

func TestUnifiedDiffAppliesWithGitApplyAndPatch(t *testing.T) {
	live := diffConfigMap(t, 200)
	lines := strings.SplitAfter(live, "\n")
	lines = lines[:len(lines)-1] // SplitAfter leaves an empty string after the last newline
	with := func(edit func(l []string) []string) string {
		return strings.Join(edit(append([]string(nil), lines...)), "")
	}
	cases := []struct {
		name    string
		desired string
		hunks   []string // the @@ lines the diff must have
	}{
		{"one line changed in the middle", with(func(l []string) []string {
			l[99] = "  key-093: changed\n"
			return l
		}), []string{"@@ -97,7 +97,7 @@"}},
		{"first line changed", with(func(l []string) []string {
			l[0] = "apiVersion: v2\n"
			return l
		}), []string{"@@ -1,4 +1,4 @@"}},
		{"last line changed", with(func(l []string) []string {
			l[199] = "  key-193: changed\n"
			return l
		}), []string{"@@ -197,4 +197,4 @@"}},
		{"line added at the end", with(func(l []string) []string {
			return append(l, "  key-194: new\n")
		}), []string{"@@ -198,3 +198,4 @@"}},
		{"line removed", with(func(l []string) []string {
			return append(l[:50], l[51:]...)
		}), []string{"@@ -48,7 +48,6 @@"}},
		{"two distant changes", with(func(l []string) []string {
			l[10], l[150] = "  key-004: a\n", "  key-144: b\n"
			return l
		}), []string{"@@ -8,7 +8,7 @@", "@@ -148,7 +148,7 @@"}},
		{"no newline at the end", strings.TrimSuffix(live, "\n"), []string{"@@ -197,4 +197,4 @@"}},
		{"everything removed", "", []string{"@@ -1,200 +0,0 @@"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			diff := UnifiedDiff([]byte(live), []byte(c.desired), "obj.yaml", "obj.yaml")
			if !strings.HasPrefix(diff, "--- obj.yaml\n+++ obj.yaml\n@@ ") {
				t.Fatalf("diff does not start with its headers:\n%s", diff)
			}
			if c.hunks != nil {
				var hunks []string
				for _, l := range strings.Split(diff, "\n") {
					if strings.HasPrefix(l, "@@") {
						hunks = append(hunks, l)
					}
				}
				if strings.Join(hunks, "|") != strings.Join(c.hunks, "|") {
					t.Errorf("hunks %q, want %q:\n%s", hunks, c.hunks, diff)
				}
			}
			for _, tool := range [][]string{
				{"git", "apply", "-p0", "--check", "-"},
				{"git", "apply", "-p0", "-"},
				{"patch", "--dry-run", "-p0", "-s", "obj.yaml"},
				{"patch", "-p0", "-s", "obj.yaml"},
			} {
				got := diffApply(t, live, diff, tool...)
				if slices.Contains(tool, "--check") || slices.Contains(tool, "--dry-run") {
					if got != live {
						t.Errorf("%s changed the file", strings.Join(tool, " "))
					}
					continue
				}
				if got != c.desired {
					t.Errorf("%s gave %d bytes, want the %d desired:\n%s", strings.Join(tool, " "), len(got), len(c.desired), diff)
				}
			}
		})
	}
}

func TestUnifiedDiffOfEqualCreatedAndDestroyedFiles(t *testing.T) {
	obj := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: web\n"
	cases := []struct {
		name                  string
		live, desired         string
		liveName, desiredName string
		want                  string
	}{
		{"equal", obj, obj, "live", "desired", ""},
		{"both empty", "", "", "live", "desired", ""},
		{"create", "", obj, "live", "desired",
			"--- live\n+++ desired\n@@ -0,0 +1,4 @@\n+apiVersion: v1\n+kind: ConfigMap\n+metadata:\n+  name: web\n"},
		{"destroy", obj, "", "live", "desired",
			"--- live\n+++ desired\n@@ -1,4 +0,0 @@\n-apiVersion: v1\n-kind: ConfigMap\n-metadata:\n-  name: web\n"},
		{"one line", obj, strings.Replace(obj, "web", "api", 1), "live", "desired",
			"--- live\n+++ desired\n@@ -1,4 +1,4 @@\n apiVersion: v1\n kind: ConfigMap\n metadata:\n-  name: web\n+  name: api\n"},
		{"no newline at the end", obj, obj + "data: {}", "live", "desired",
			"--- live\n+++ desired\n@@ -2,3 +2,4 @@\n kind: ConfigMap\n metadata:\n   name: web\n+data: {}\n\\ No newline at end of file\n"},
		{"empty names", "", "x\n", "", "", "--- live\n+++ desired\n@@ -0,0 +1 @@\n+x\n"},
		{"file names", "", "x\n", "a/default/configmaps/web.yaml", "b/default/configmaps/web.yaml",
			"--- a/default/configmaps/web.yaml\n+++ b/default/configmaps/web.yaml\n@@ -0,0 +1 @@\n+x\n"},
		{"names that would break the header", "", "x\n", "a\nb", "c\td", "--- \"a\\nb\"\n+++ \"c\\td\"\n@@ -0,0 +1 @@\n+x\n"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := UnifiedDiff([]byte(c.live), []byte(c.desired), c.liveName, c.desiredName)
			if got != c.want {
				t.Errorf("UnifiedDiff =\n%s\nwant\n%s", got, c.want)
			}
		})
	}
	t.Run("create applies", func(t *testing.T) {
		diff := UnifiedDiff(nil, []byte(obj), "obj.yaml", "obj.yaml")
		for _, tool := range [][]string{{"git", "apply", "-p0", "-"}, {"patch", "-p0", "-s", "obj.yaml"}} {
			if got := diffApply(t, "", diff, tool...); got != obj {
				t.Errorf("%s gave %q, want %q", strings.Join(tool, " "), got, obj)
			}
		}
	})
}

// diffNote matches the last line of a cut diff.
var diffNote = regexp.MustCompile(`^\.\.\. (\d+) more lines \((\d+) bytes\) of the diff left out$`)

func TestUnifiedDiffIsCutAtMaxDiffBytes(t *testing.T) {
	var live, desired strings.Builder
	for i := 0; live.Len() < MaxDiffBytes; i++ {
		fmt.Fprintf(&live, "  key-%06d: old value\n", i)
		fmt.Fprintf(&desired, "  key-%06d: new value\n", i)
	}
	diff := UnifiedDiff([]byte(live.String()), []byte(desired.String()), "live", "desired")
	if len(diff) > MaxDiffBytes {
		t.Fatalf("diff of %d bytes, more than %d", len(diff), MaxDiffBytes)
	}
	if len(diff) < MaxDiffBytes-diffNoteRoom-100 {
		t.Errorf("diff of %d bytes: cut far below %d", len(diff), MaxDiffBytes)
	}
	lines := strings.Split(strings.TrimSuffix(diff, "\n"), "\n")
	m := diffNote.FindStringSubmatch(lines[len(lines)-1])
	if m == nil {
		t.Fatalf("last line %q is not the note", lines[len(lines)-1])
	}
	// Both sides are changed: the whole diff is the headers, one hunk line and every line of
	// each side with its -/+ prefix.
	n := strings.Count(live.String(), "\n")
	wholeLines := 3 + 2*n
	wholeBytes := len("--- live\n+++ desired\n") + len(fmt.Sprintf("@@ -1,%d +1,%d @@\n", n, n)) + live.Len() + desired.Len() + 2*n
	kept := lines[:len(lines)-1]
	keptBytes := len(diff) - len(lines[len(lines)-1]) - 1
	if left, _ := strconv.Atoi(m[1]); left+len(kept) != wholeLines {
		t.Errorf("%d lines kept and %d left out, want %d in all", len(kept), left, wholeLines)
	}
	if left, _ := strconv.Atoi(m[2]); left+keptBytes != wholeBytes {
		t.Errorf("%d bytes kept and %d left out, want %d in all", keptBytes, left, wholeBytes)
	}
	if kept[0] != "--- live" || kept[1] != "+++ desired" || !strings.HasPrefix(kept[2], "@@ -1,") {
		t.Errorf("diff does not start with its headers: %q", kept[:3])
	}
	for _, l := range kept[3:] {
		if !strings.HasPrefix(l, "-  key-") && !strings.HasPrefix(l, "+  key-") {
			t.Fatalf("kept line %q is not a whole diff line", l)
		}
	}
}

func TestCutDiff(t *testing.T) {
	const limit = 200 // room for text: limit - diffNoteRoom = 72 bytes
	line := strings.Repeat("x", 19) + "\n"
	cases := []struct {
		name, diff, want string
	}{
		{"short", "a\nb\n", "a\nb\n"},
		{"exactly the limit", strings.Repeat(line, limit/len(line)), strings.Repeat(line, limit/len(line))},
		{"whole lines that fit", strings.Repeat(line, 11),
			strings.Repeat(line, 3) + "... 8 more lines (160 bytes) of the diff left out\n"},
		{"no line end in the room's second half: cut inside the line", "ab\n" + strings.Repeat("y", 300) + "\nz\n",
			"ab\n" + strings.Repeat("y", 69) + "\n... 2 more lines (234 bytes) of the diff left out\n"},
		{"between UTF-8 characters", strings.Repeat("é", 150) + "\n",
			strings.Repeat("é", 36) + "\n... 1 more lines (229 bytes) of the diff left out\n"},
		{"no last newline", strings.Repeat("y", 300),
			strings.Repeat("y", 72) + "\n... 1 more lines (228 bytes) of the diff left out\n"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := cutDiff(c.diff, limit)
			if got != c.want {
				t.Errorf("cutDiff =\n%q\nwant\n%q", got, c.want)
			}
			if len(got) > limit {
				t.Errorf("%d bytes, more than %d", len(got), limit)
			}
		})
	}
}
