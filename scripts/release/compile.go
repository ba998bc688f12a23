package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// compile builds the daemon for platform into out: static (no cgo), stripped, without local paths
// or VCS stamps (the revision is the image's label; a stamp would also change with untracked
// files), the version set at link time. GOAMD64 and GOARM64 are pinned to Go's defaults so a
// setting in the environment cannot change the digest.
// Apart from GOOS and GOARCH this is make build's command, so the compiled packages are shared
// with it and with the tests (make test builds with CGO_ENABLED=0 and -trimpath too).
func compile(ctx context.Context, o options, platform, out string) error {
	abs, err := filepath.Abs(out)
	if err != nil {
		return err
	}
	env, args := goBuild(o, platform, abs)
	if o.Log != nil {
		_, _ = fmt.Fprintln(o.Log, commandLine(env, args))
	}
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = o.Dir
	cmd.Env = append(os.Environ(), env...)
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build for %s: %w\n%s", platform, err, b)
	}
	return nil
}

// goBuild is the environment and the arguments of the go command that builds the daemon for
// platform into out.
func goBuild(o options, platform, out string) (env, args []string) {
	goos, goarch, _ := strings.Cut(platform, "/")
	env = []string{"CGO_ENABLED=0", "GOOS=" + goos, "GOARCH=" + goarch}
	switch goarch {
	case "amd64":
		env = append(env, "GOAMD64=v1")
	case "arm64":
		env = append(env, "GOARM64=v8.0")
	}
	return env, []string{"build", "-trimpath", "-buildvcs=false",
		"-ldflags=-s -w -X " + versionVariable + "=" + o.Version, "-o", out, "."}
}

// commandLine is the go command as a shell runs it, each argument with a space quoted.
func commandLine(env, args []string) string {
	q := make([]string, len(args))
	for i, a := range args {
		q[i] = a
		if strings.Contains(a, " ") {
			q[i] = "'" + a + "'"
		}
	}
	return strings.Join(env, " ") + " go " + strings.Join(q, " ")
}

// goEnv is the go command's setting name as a go build in dir sees it: the environment's, else
// the go env file's (go env -w), else Go's default. $GOFLAGS alone would miss the file's.
func goEnv(ctx context.Context, dir, name string) (string, error) {
	cmd := exec.CommandContext(ctx, "go", "env", name)
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return "", fmt.Errorf("go env %s: %w: %s", name, err, ee.Stderr)
		}
		return "", fmt.Errorf("go env %s: %w", name, err)
	}
	return strings.TrimSpace(string(out)), nil
}
