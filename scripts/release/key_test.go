package main

import (
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/configbutler/gitops-reverser/testenv"
)

// TestTheCosignsAreTheOnesNamed: the cosigns the release tests verify with, which testenv/clitools
// pins, are the versions the tests and docs name.
func TestTheCosignsAreTheOnesNamed(t *testing.T) {
	testenv.CLIToolsPin(t, cosignModule+" "+cosignVersion, cosign2Module+" "+cosign2Version)
}

// TestKeysAreCosignKeys: a key pair cosign generate-key-pair writes signs a release's blob that
// cosign verifies, and so does one release keygen writes; a wrong password, a key that is not
// cosign's and a second keygen into the same folder are refused with what to do.
func TestKeysAreCosignKeys(t *testing.T) {
	cosign := cosignBinary(t)
	t.Setenv(passwordEnv, testPassword)
	cosignDir := t.TempDir()
	cmd := exec.Command(cosign, "generate-key-pair")
	cmd.Dir = cosignDir
	cmd.Env = append(os.Environ(), "HOME="+t.TempDir())
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("cosign generate-key-pair: %v\n%s", err, out)
	}
	ours, _ := keyPair(t)
	for _, keyFile := range []string{filepath.Join(cosignDir, "cosign.key"), ours} {
		k, err := loadSigningKey(keyFile, []byte(testPassword))
		if err != nil {
			t.Fatalf("%s: %v", keyFile, err)
		}
		dir := t.TempDir()
		blob := []byte("the checksums of a release\n")
		sig, bundle, err := blobSignature(k, blob)
		if err != nil {
			t.Fatal(err)
		}
		files := map[string][]byte{"blob": blob, "blob.sig": sig, "blob.sigstore.json": bundle, "cosign.pub": k.PublicPEM}
		for name, data := range files {
			if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		for _, how := range [][]string{{"--signature", "blob.sig"}, {"--bundle", "blob.sigstore.json"}} {
			args := append([]string{"verify-blob", "--key", "cosign.pub", "--insecure-ignore-tlog"}, append(how, "blob")...)
			cmd := exec.Command(cosign, args...)
			cmd.Dir = dir
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Errorf("key %s: cosign %s: %v\n%s", keyFile, strings.Join(args, " "), err, out)
			}
		}
	}

	if _, err := loadSigningKey(ours, []byte("wrong")); err == nil || !strings.Contains(err.Error(), passwordEnv) {
		t.Errorf("a wrong password: %v, want an error naming $%s", err, passwordEnv)
	}
	if _, err := loadSigningKey(filepath.Join(cosignDir, "cosign.pub"), []byte(testPassword)); err == nil ||
		!strings.Contains(err.Error(), "not a cosign private key") {
		t.Errorf("a public key as the private key: %v", err)
	}
	err := run(context.Background(), []string{"keygen", "-out", filepath.Dir(ours)}, io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "never replaces a key") {
		t.Errorf("a second keygen into the same folder: %v", err)
	}
}
