package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// versionPattern is SemVer 2.0 without build metadata: Helm wants a chart version to be semver,
// krew a plugin's (after a v), and a "+" can be neither in an OCI tag (the image's tag is the
// same version) nor in the app.kubernetes.io/version label the chart sets from appVersion.
var versionPattern = regexp.MustCompile(`^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)` +
	`(-(0|[1-9]\d*|\d*[A-Za-z-][0-9A-Za-z-]*)(\.(0|[1-9]\d*|\d*[A-Za-z-][0-9A-Za-z-]*))*)?$`)

// checkSemver refuses a release version that is not versionPattern, saying so plainly for the
// common mistake of a leading v.
func checkSemver(version string) error {
	if strings.HasPrefix(version, "v") {
		return fmt.Errorf("version %q: give the semantic version without the leading v (%s)", version, strings.TrimPrefix(version, "v"))
	}
	if !versionPattern.MatchString(version) {
		return fmt.Errorf("version %q is not a semantic version MAJOR.MINOR.PATCH[-PRERELEASE] (no +build)", version)
	}
	return nil
}

// defaultDownloadURL is where the archives of version v are downloadable, for the krew manifest:
// the assets of the repository's release v<version>.
const defaultDownloadURL = defaultSource + "/releases/download/v{version}"

// runBuild parses release build's command line, checks the source tree is a clean commit,
// builds and signs the release, and prints what it made.
func runBuild(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	ro, keyFile, err := parseBuildFlags(args, stderr)
	if err != nil {
		return err
	}
	if ro.Image.Revision, ro.Image.Created, err = cleanCommit(ctx, ro.Image.Dir); err != nil {
		return err
	}
	if !ro.Snapshot {
		if err := checkReleaseTag(ctx, ro.Image.Dir, ro.Image.Version, ro.Image.Revision); err != nil {
			return err
		}
	}
	password, ok := os.LookupEnv(passwordEnv)
	if !ok {
		return fmt.Errorf("set $%s to the signing key's password", passwordEnv)
	}
	if ro.Key, err = loadSigningKey(keyFile, []byte(password)); err != nil {
		return err
	}
	res, err := makeRelease(ctx, ro)
	if err != nil {
		return err
	}
	printRelease(stdout, ro.Image.Out, res)
	return nil
}

// parseBuildFlags reads release build's flags into the release's options and the key's path.
func parseBuildFlags(args []string, stderr io.Writer) (releaseOptions, string, error) {
	fs := flag.NewFlagSet("build", flag.ContinueOnError)
	fs.SetOutput(stderr)
	ro := releaseOptions{Image: options{Log: stderr}}
	var platforms, binaryPlatforms, keyFile string
	fs.StringVar(&ro.Image.Dir, "C", ".", "the module root: a Git work tree with nothing uncommitted")
	fs.StringVar(&ro.Image.Out, "out", "bin/release", "output directory (replaced)")
	fs.StringVar(&ro.Image.Repository, "repository", defaultRepository, "the image's name without tag; the chart goes to <its folder>/charts/<chart>")
	fs.StringVar(&ro.Image.Version, "version", "", "the release's version, semver without a leading v (the tag v<version>)")
	fs.StringVar(&ro.Image.Source, "source", defaultSource, "the source repository's URL")
	fs.StringVar(&platforms, "platforms", strings.Join(defaultPlatforms, ","), "the image's platforms")
	fs.StringVar(&binaryPlatforms, "binary-platforms", strings.Join(defaultBinaryPlatforms, ","), "the binaries' platforms")
	fs.StringVar(&ro.ChartDir, "chart", filepath.Join("deploy", "helm", "gitops-reverser"), "the chart's folder, under -C")
	fs.StringVar(&ro.DownloadURL, "download-url", defaultDownloadURL, "where the archives will be downloadable ({version} is replaced)")
	fs.StringVar(&keyFile, "key", os.Getenv(keyEnv), "the cosign private key (default $"+keyEnv+"); its password is $"+passwordEnv)
	fs.BoolVar(&ro.Snapshot, "snapshot", false, "build although the tag v<version> is not at HEAD: a trial, not to be uploaded as that release")
	if err := fs.Parse(args); err != nil {
		return ro, "", err
	}
	var errs []error
	if fs.NArg() > 0 {
		errs = append(errs, fmt.Errorf("unexpected arguments %q", fs.Args()))
	}
	if err := checkSemver(ro.Image.Version); err != nil {
		errs = append(errs, fmt.Errorf("%w: tag the commit (git tag v0.2.0) and give VERSION=0.2.0", err))
	}
	if keyFile == "" {
		errs = append(errs, fmt.Errorf("no signing key: give -key or $%s (make one with: go run ./scripts/release keygen)", keyEnv))
	}
	ro.Image.Platforms = strings.Split(platforms, ",")
	ro.BinaryPlatforms = strings.Split(binaryPlatforms, ",")
	ro.ChartDir = filepath.Join(ro.Image.Dir, ro.ChartDir)
	ro.DownloadURL = strings.ReplaceAll(ro.DownloadURL, "{version}", ro.Image.Version)
	return ro, keyFile, errors.Join(errs...)
}

// cleanCommit is the commit checked out in dir and its time, refusing a tree with changes to
// tracked files or files Git does not ignore: what is released is exactly a commit.
func cleanCommit(ctx context.Context, dir string) (string, time.Time, error) {
	git := func(args ...string) (string, error) { return runGit(ctx, dir, args...) }
	status, err := git("status", "--porcelain")
	if err != nil {
		return "", time.Time{}, err
	}
	if status != "" {
		return "", time.Time{}, fmt.Errorf("the tree in %s has changes; a release is built from a commit alone (commit or stash them):\n%s", dir, status)
	}
	revision, err := git("rev-parse", "HEAD")
	if err != nil {
		return "", time.Time{}, err
	}
	when, err := git("log", "-1", "--format=%ct")
	if err != nil {
		return "", time.Time{}, err
	}
	epoch, err := strconv.ParseInt(when, 10, 64)
	if err != nil {
		return "", time.Time{}, fmt.Errorf("the commit's time %q: %w", when, err)
	}
	return revision, time.Unix(epoch, 0).UTC(), nil
}

// checkReleaseTag refuses to release version from a commit, head, that its tag v<version> does
// not name: the krew manifest points at the downloads of the release of that tag, which should
// hold what was built from it, and a rebuild checks the tag out.
func checkReleaseTag(ctx context.Context, dir, version, head string) error {
	tag := "v" + version
	const why = "release %s is built from the commit its tag names (the krew manifest downloads from release %s)"
	const snapshot = "or build a snapshot, not to be uploaded as that release (make release SNAPSHOT=1, or release build -snapshot)"
	listed, err := runGit(ctx, dir, "tag", "--list", tag)
	if err != nil {
		return err
	}
	if listed == "" {
		return fmt.Errorf("no tag %s: "+why+"; tag this commit (git tag -s %s -m 'gitops-reverser %s'), %s",
			tag, version, tag, tag, version, snapshot)
	}
	tagged, err := runGit(ctx, dir, "rev-parse", tag+"^{commit}")
	if err != nil {
		return err
	}
	if tagged != head {
		return fmt.Errorf("the tag %s is at %s, not at HEAD %s: "+why+"; check it out (git checkout %s), %s",
			tag, tagged[:12], head[:12], version, tag, tag, snapshot)
	}
	return nil
}

// runGit runs git in dir and returns its output, trimmed.
func runGit(ctx context.Context, dir string, args ...string) (string, error) {
	out, err := exec.CommandContext(ctx, "git", append([]string{"-C", dir}, args...)...).Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return "", fmt.Errorf("git %s: %w: %s", strings.Join(args, " "), err, ee.Stderr)
		}
		return "", fmt.Errorf("git %s: %w", strings.Join(args, " "), err)
	}
	return strings.TrimSpace(string(out)), nil
}

// printRelease prints what a release holds and what to do next.
func printRelease(w io.Writer, out string, r *releaseResult) {
	_, _ = fmt.Fprintf(w, "release %s of %s in %s\n", r.Version, r.Revision, out)
	if r.Snapshot {
		_, _ = fmt.Fprintf(w, "a snapshot: the tag v%s is not at %s, so upload none of it as release v%s (its krew manifest points there)\n",
			r.Version, r.Revision, r.Version)
	}
	_, _ = fmt.Fprintf(w, "image  %s:%s@%s (signed; provenance and SBOM attested)\n", r.Image.Repository, r.Image.Tag, r.Image.Digest)
	_, _ = fmt.Fprintf(w, "chart  %s:%s@%s (signed; provenance attested)\n", r.Chart.Repository, r.Chart.Tag, r.Chart.Digest)
	for _, f := range r.Files {
		_, _ = fmt.Fprintf(w, "file   %s  %s\n", f.Digest.Hex, f.Name)
	}
	_, _ = fmt.Fprintf(w, "signed with %s; built in %s (compile %s)\n", filepath.Join(out, r.PublicKey),
		r.Total.Round(time.Millisecond), r.Compile.Round(time.Millisecond))
	_, _ = fmt.Fprintf(w, "next: make publish REGISTRY=<registry>/<owner>\n")
}
