package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"debug/elf"
	"debug/macho"
	"encoding/hex"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"
)

// cliPlatforms are the platforms of the CLI archives the tests build: the image's, and macOS on
// arm64. make release builds darwin/amd64 too (defaultBinaryPlatforms); the tests leave it out, as
// it differs from darwin/arm64 only in GOARCH and its cold compile costs a fresh machine about
// two and a half CPU-minutes.
var cliPlatforms = []string{"linux/amd64", "linux/arm64", "darwin/arm64"}

// The binaries and archives the tests share: the darwin compiles take a minute or two the first
// time, so a test binary compiles the platforms once, and archives them once.
var sharedCLI struct {
	once     sync.Once
	bins     map[string]string // os/arch → binary
	archives []binaryArchive
	err      error
}

// sharedArchives are the archives of cliPlatforms' binaries, built on first use into the
// shared folder, with testOptions' version and time.
func sharedArchives(t testing.TB) (map[string]string, []binaryArchive) {
	t.Helper()
	sharedCLI.once.Do(func() {
		dir := filepath.Join(shared.dir, "cli")
		sharedCLI.bins, sharedCLI.err = compileAll(testOptions(dir), cliPlatforms)
		if sharedCLI.err == nil {
			o := testOptions(dir)
			sharedCLI.archives, sharedCLI.err = archiveBinaries(filepath.Join(dir, "archives"), o.Version, o.Created, cliPlatforms, sharedCLI.bins)
		}
	})
	if sharedCLI.err != nil {
		t.Fatalf("build the CLI archives: %v", sharedCLI.err)
	}
	return sharedCLI.bins, sharedCLI.archives
}

// compileAll compiles the daemon for each platform side by side, into o.Out/<os>_<arch>/.
func compileAll(o options, platforms []string) (map[string]string, error) {
	bins := make(map[string]string, len(platforms))
	var g errgroup.Group
	for _, p := range platforms {
		bin := filepath.Join(o.Out, strings.ReplaceAll(p, "/", "_"), cliBinary)
		bins[p] = bin
		g.Go(func() error { return compile(context.Background(), o, p, bin) })
	}
	return bins, g.Wait()
}

// TestArchivesAreReproducible: archiving the same binaries again, into another folder, gives the
// same bytes, and each archive's digest is its file's sha256.
func TestArchivesAreReproducible(t *testing.T) {
	bins, first := sharedArchives(t)
	o := testOptions(t.TempDir())
	again, err := archiveBinaries(t.TempDir(), o.Version, o.Created, cliPlatforms, bins)
	if err != nil {
		t.Fatal(err)
	}
	if len(again) != len(cliPlatforms) {
		t.Fatalf("%d archives, want %d", len(again), len(cliPlatforms))
	}
	for i, a := range first {
		b := again[i]
		if a.Platform != cliPlatforms[i] || a.Name != b.Name || a.Digest != b.Digest {
			t.Errorf("archive %d: %s %s %s, then %s %s %s", i, a.Platform, a.Name, a.Digest, b.Platform, b.Name, b.Digest)
		}
		x, y := mustReadFile(t, a.Path), mustReadFile(t, b.Path)
		if !bytes.Equal(x, y) {
			t.Errorf("%s: the two archives differ (%d and %d bytes)", a.Name, len(x), len(y))
		}
		if sum := sha256.Sum256(x); hex.EncodeToString(sum[:]) != a.Digest.Hex || a.Digest.Algorithm != "sha256" {
			t.Errorf("%s: digest %s, the file's sha256 is %x", a.Name, a.Digest, sum)
		}
	}
}

// TestArchiveHoldsOnlyTheBinary: each archive, named gitops-reverser_<version>_<os>_<arch>.tar.gz,
// holds one file, gitops-reverser, 0755, owned by 0:0 without names and dated created; the gzip
// header has no name or time; the binary is one for its platform.
func TestArchiveHoldsOnlyTheBinary(t *testing.T) {
	_, archives := sharedArchives(t)
	o := testOptions("")
	for _, a := range archives {
		goos, goarch, _ := strings.Cut(a.Platform, "/")
		if want := "gitops-reverser_1.2.3-test_" + goos + "_" + goarch + ".tar.gz"; a.Name != want || filepath.Base(a.Path) != want {
			t.Errorf("%s: named %s at %s, want %s", a.Platform, a.Name, a.Path, want)
		}
		zr, hdrs, data := readArchive(t, a.Path)
		if zr.Name != "" || !zr.ModTime.IsZero() || zr.Comment != "" || zr.Extra != nil {
			t.Errorf("%s: gzip header %+v, want no name, time, comment or extra", a.Name, zr.Header)
		}
		if len(hdrs) != 1 {
			t.Fatalf("%s holds %d entries, want only %s", a.Name, len(hdrs), cliBinary)
		}
		h := hdrs[0]
		if h.Name != cliBinary || h.Typeflag != tar.TypeReg || h.Mode != 0o755 || h.Uid != 0 || h.Gid != 0 ||
			h.Uname != "" || h.Gname != "" || !h.ModTime.Equal(o.Created) {
			t.Errorf("%s: entry %q type %c mode %o owner %d:%d (%q:%q) time %s, want %s 0755 by 0:0, no names, at %s",
				a.Name, h.Name, h.Typeflag, h.Mode, h.Uid, h.Gid, h.Uname, h.Gname, h.ModTime, cliBinary, o.Created)
		}
		checkExecutable(t, a.Platform, data)
	}
}

// checkExecutable checks data is an executable for platform: ELF for Linux, Mach-O for macOS
// (arm64 Macs run only signed code: Go's linker signs it ad hoc), of the right CPU.
func checkExecutable(t *testing.T, platform string, data []byte) {
	t.Helper()
	want := map[string]any{
		"linux/amd64": elf.EM_X86_64, "linux/arm64": elf.EM_AARCH64,
		"darwin/amd64": macho.CpuAmd64, "darwin/arm64": macho.CpuArm64,
	}[platform]
	if strings.HasPrefix(platform, "linux/") {
		f, err := elf.NewFile(bytes.NewReader(data))
		if err != nil || f.Machine != want {
			t.Errorf("%s: not an ELF executable for %v: %v", platform, want, err)
		}
		return
	}
	f, err := macho.NewFile(bytes.NewReader(data))
	if err != nil {
		t.Errorf("%s: not a Mach-O file: %v", platform, err)
		return
	}
	if f.Type != macho.TypeExec || f.Cpu != want {
		t.Errorf("%s: Mach-O type %v CPU %v, want an executable for %v", platform, f.Type, f.Cpu, want)
	}
	if platform == "darwin/arm64" && !hasCodeSignature(f) {
		t.Errorf("%s: no code signature: macOS on arm64 would refuse to run it", platform)
	}
}

// hasCodeSignature reports whether f has an LC_CODE_SIGNATURE load command.
func hasCodeSignature(f *macho.File) bool {
	const lcCodeSignature = 0x1d
	for _, l := range f.Loads {
		if raw := l.Raw(); len(raw) >= 4 && f.ByteOrder.Uint32(raw) == lcCodeSignature {
			return true
		}
	}
	return false
}

// TestBinaryFromTheArchiveRuns: the host's binary, taken out of its archive, prints the version
// the build was given.
func TestBinaryFromTheArchiveRuns(t *testing.T) {
	host := runtime.GOOS + "/" + runtime.GOARCH
	_, archives := sharedArchives(t)
	for _, a := range archives {
		if a.Platform != host {
			continue
		}
		_, _, data := readArchive(t, a.Path)
		bin := filepath.Join(t.TempDir(), cliBinary)
		if err := os.WriteFile(bin, data, 0o755); err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command(bin, "--version").CombinedOutput()
		if err != nil || strings.TrimSpace(string(out)) != "gitops-reverser version 1.2.3-test" {
			t.Fatalf("%s --version: %v: %q", a.Name, err, out)
		}
		return
	}
	t.Skipf("no archive for this machine's platform %s", host)
}

// TestArchivesRefuseWhatTheyCannotShip: a version krew could not take, a platform that is not
// os/arch, listed twice or without a binary, and a binary that is no Go program or one for
// another platform are refused with a message saying so, before any archive is written.
func TestArchivesRefuseWhatTheyCannotShip(t *testing.T) {
	dir := t.TempDir()
	text := filepath.Join(dir, "text")
	if err := os.WriteFile(text, []byte("not a program"), 0o755); err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable() // this test, a Go program for this machine
	if err != nil {
		t.Fatal(err)
	}
	host := runtime.GOOS + "/" + runtime.GOARCH
	other := map[bool]string{true: "darwin/arm64", false: "linux/amd64"}[host != "darwin/arm64"]
	bins := map[string]string{host: self, "linux/arm/v7": self, other: self, "windows/amd64": self, "linux/ppc64le": text, "linux/riscv64": dir}
	for _, c := range []struct {
		name, version string
		platforms     []string
		want          string
	}{
		{"leading v", "v1.2.3", []string{host}, `without the leading v (1.2.3)`},
		{"two numbers", "1.2", []string{host}, "not a semantic version"},
		{"dev", "dev", []string{host}, "not a semantic version"},
		{"empty", "", []string{host}, "not a semantic version"},
		{"no platforms", "1.2.3", nil, "no platforms"},
		{"variant", "1.2.3", []string{"linux/arm/v7"}, `"linux/arm/v7" is not os/arch`},
		{"no binary", "1.2.3", []string{host, "linux/s390x"}, "no binary for platform linux/s390x"},
		{"twice", "1.2.3", []string{host, host}, "listed twice"},
		{"another platform's", "1.2.3", []string{host, other}, "is built for " + host},
		{"not a Go program", "1.2.3", []string{"linux/ppc64le"}, "could not read Go build info"},
		{"windows", "1.2.3", []string{"windows/amd64"}, "must be named gitops-reverser.exe"},
		{"folder", "1.2.3", []string{"linux/riscv64"}, "the binary for linux/riscv64"},
	} {
		t.Run(c.name, func(t *testing.T) {
			out := filepath.Join(dir, "out")
			_, err := archiveBinaries(out, c.version, time.Unix(0, 0), c.platforms, bins)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want one saying %q", err, c.want)
			}
			if _, err := os.Stat(out); !os.IsNotExist(err) {
				t.Errorf("%s was created: %v", out, err)
			}
		})
	}
}

// readArchive returns the gzip reader (for its header), the tar headers and the content of the
// last entry of the tar.gz at path.
func readArchive(t testing.TB, path string) (*gzip.Reader, []*tar.Header, []byte) {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(mustReadFile(t, path)))
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	zr.Multistream(false)
	tr := tar.NewReader(zr)
	var hdrs []*tar.Header
	var data []byte
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		hdrs = append(hdrs, h)
		if data, err = io.ReadAll(tr); err != nil {
			t.Fatalf("%s: %s: %v", path, h.Name, err)
		}
	}
	return zr, hdrs, data
}

// mustReadFile is the content of the file at path.
func mustReadFile(t testing.TB, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
