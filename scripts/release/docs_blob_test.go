package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestDocsBlobCommandsWorkOffline runs docs/release.md's cosign sign-blob and verify-blob
// commands as written, with cosign 2 and 3, on a machine that reaches nothing: a user checks a
// release's checksums in a folder holding its files, and a key's rotation is signed with the old
// key and checked with it. The same checks refuse a changed file.
func TestDocsBlobCommandsWorkOffline(t *testing.T) {
	rel := sharedRelease(t)
	var signs, verifies []string
	for _, c := range cosignCommands(readDoc(t, "../../docs/release.md")) {
		switch strings.Fields(c)[1] {
		case "sign-blob":
			signs = append(signs, c)
		case "verify-blob":
			verifies = append(verifies, c)
		}
	}
	if len(signs) != 1 || len(verifies) != 3 {
		t.Fatalf("docs/release.md has the sign-blob commands %q and the verify-blob commands %q, "+
			"want the rotation's, and the checksums' as make publish prints it and as a user runs it", signs, verifies)
	}
	env := offlineEnv(t)
	for _, cosign := range everyCosign(t) {
		t.Run("cosign "+cosign.version, func(t *testing.T) {
			folders := map[string]string{ // where each documented verification runs, by the file it checks
				checksumsFile: usersReleaseFolder(t, rel.out),
				publicKeyFile: rotatedKeyFolder(t, cosign.bin, env, signs[0]),
			}
			for _, c := range verifies {
				blob := strings.Fields(c)[len(strings.Fields(c))-1]
				dir := folders[filepath.Base(blob)]
				if dir == "" {
					t.Fatalf("docs/release.md verifies %s, which the test does not make: %s", blob, c)
				}
				if out, err := toolRunIn(t, dir, cosign.bin, env, c); err != nil {
					t.Errorf("%s\n%v\n%s", c, err, out)
				}
				changeFile(t, filepath.Join(dir, blob))
				if out, err := toolRunIn(t, dir, cosign.bin, env, c); err == nil {
					t.Errorf("%s on a changed %s succeeded:\n%s", c, blob, out)
				}
			}
		})
	}
}

// usersReleaseFolder is a folder holding what a user downloads of the release in out (its public
// key, checksums and their signatures), and the same in bin/release, where the releaser runs what
// make publish printed.
func usersReleaseFolder(t *testing.T, out string) string {
	t.Helper()
	dir := t.TempDir()
	for _, sub := range []string{".", filepath.Join("bin", "release")} {
		if err := os.MkdirAll(filepath.Join(dir, sub), 0o755); err != nil {
			t.Fatal(err)
		}
		for _, f := range []string{publicKeyFile, checksumsFile, checksumsFile + ".sig", checksumsFile + ".sigstore.json"} {
			if err := copyFile(filepath.Join(out, f), filepath.Join(dir, sub, f)); err != nil {
				t.Fatal(err)
			}
		}
	}
	return dir
}

// rotatedKeyFolder runs the documented sign-blob of a key's rotation with cosign, with an old and
// a new key in ~/release-key and ~/release-key-2, and returns the folder a user checks the
// hand-over in: the new cosign.pub and its signature, and the old key as cosign.pub.old.
func rotatedKeyFolder(t *testing.T, cosign string, env []string, sign string) string {
	t.Helper()
	home := t.TempDir()
	oldKey, oldPub := keyPair(t)
	_, newPub := keyPair(t)
	for from, to := range map[string]string{oldKey: "release-key/cosign.key", newPub: "release-key-2/cosign.pub"} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(home, to)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := copyFile(from, filepath.Join(home, to)); err != nil {
			t.Fatal(err)
		}
	}
	dir := t.TempDir()
	env = append(env, passwordEnv+"="+testPassword)
	if out, err := toolRunIn(t, dir, cosign, env, strings.ReplaceAll(sign, "~/", home+"/")); err != nil {
		t.Fatalf("%s\n%v\n%s", sign, err, out)
	}
	for from, to := range map[string]string{newPub: publicKeyFile, oldPub: publicKeyFile + ".old"} {
		if err := copyFile(from, filepath.Join(dir, to)); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// changeFile flips a bit of a file's first byte.
func changeFile(t *testing.T, file string) {
	t.Helper()
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	raw[0] ^= 1
	if err := os.WriteFile(file, raw, 0o644); err != nil {
		t.Fatal(err)
	}
}
