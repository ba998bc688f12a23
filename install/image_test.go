package install

import (
	"debug/elf"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// imageUser is the uid:gid of the Dockerfile's final USER.
func imageUser(t testing.TB) (int64, int64) {
	t.Helper()
	var user string
	for _, line := range dockerfileLines(t) {
		if u, ok := strings.CutPrefix(line, "USER "); ok {
			user = strings.TrimSpace(u)
		}
	}
	uidText, gidText, _ := strings.Cut(user, ":")
	uid, err1 := strconv.ParseInt(uidText, 10, 64)
	gid, err2 := strconv.ParseInt(gidText, 10, 64)
	if err1 != nil || err2 != nil {
		t.Fatalf("Dockerfile USER %q is not a numeric uid:gid (runAsNonRoot needs numbers)", user)
	}
	return uid, gid
}

func dockerfileLines(t testing.TB) []string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(string(raw), "\n")
}

// TestDockerBuildContextBuildsAStaticDaemon runs the Dockerfile's build command in a copy of the
// repository holding only what .dockerignore lets into the build context, and checks the result
// is a static binary (distroless/static has no libc) that starts.
func TestDockerBuildContextBuildsAStaticDaemon(t *testing.T) {
	var build, entrypoint string
	for _, line := range dockerfileLines(t) {
		if cmd, ok := strings.CutPrefix(line, "RUN "); ok && strings.Contains(cmd, "go build") {
			build = cmd
		}
		if e, ok := strings.CutPrefix(line, "ENTRYPOINT "); ok {
			entrypoint = e
		}
	}
	if !strings.Contains(build, "-o /out/gitops-reverser ") || !strings.Contains(build, "CGO_ENABLED=0") {
		t.Fatalf("Dockerfile build step %q: want CGO_ENABLED=0 and -o /out/gitops-reverser", build)
	}
	if entrypoint != `["/gitops-reverser"]` {
		t.Errorf("ENTRYPOINT %s, want [\"/gitops-reverser\"], where the build output is copied", entrypoint)
	}

	buildContext := filepath.Join(t.TempDir(), "context")
	copyBuildContext(t, "..", buildContext, dockerignorePatterns(t))
	out := t.TempDir()
	cmd := exec.Command("sh", "-c", strings.ReplaceAll(build, "/out/", out+"/"))
	cmd.Dir = buildContext
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("the Dockerfile's build step fails on the build context: %v\n%s", err, b)
	}
	bin := filepath.Join(out, "gitops-reverser")
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Errorf("%s is dynamically linked; distroless/static has no libc", bin)
		}
	}
	help, err := exec.Command(bin, "--help").CombinedOutput()
	if err != nil || !strings.Contains(string(help), "--webhook-bind-address") {
		t.Errorf("built daemon --help: %v\n%s", err, help)
	}
}

// dockerignorePatterns reads .dockerignore, refusing syntax the matcher below does not implement
// (so the copy never silently differs from Docker's build context).
func dockerignorePatterns(t testing.TB) []string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", ".dockerignore"))
	if err != nil {
		t.Fatal(err)
	}
	var patterns []string
	for _, line := range strings.Split(string(raw), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if strings.HasPrefix(line, "!") || strings.Contains(strings.TrimPrefix(line, "**/"), "**") {
			t.Fatalf(".dockerignore pattern %q: this test only understands plain patterns and a leading **/", line)
		}
		patterns = append(patterns, strings.TrimPrefix(filepath.Clean(line), "/"))
	}
	return patterns
}

// dockerIgnored says whether rel (slash-separated, relative to the context root) matches a
// pattern; a matched directory excludes everything below it, as in Docker.
func dockerIgnored(patterns []string, rel string) bool {
	for _, p := range patterns {
		if rest, ok := strings.CutPrefix(p, "**/"); ok {
			elems := strings.Split(rel, "/")
			for i := range elems {
				if m, _ := filepath.Match(rest, strings.Join(elems[i:], "/")); m {
					return true
				}
			}
			continue
		}
		if m, _ := filepath.Match(p, rel); m {
			return true
		}
	}
	return false
}

func copyBuildContext(t testing.TB, src, dst string, patterns []string) {
	t.Helper()
	if err := os.MkdirAll(dst, 0o755); err != nil {
		t.Fatal(err)
	}
	err := filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil || rel == "." {
			return err
		}
		if dockerIgnored(patterns, filepath.ToSlash(rel)) {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		if !d.Type().IsRegular() {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(target, b, 0o644)
	})
	if err != nil {
		t.Fatalf("copy the build context: %v", err)
	}
}
