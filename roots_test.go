package main

import (
	"crypto/x509"
	"io/fs"
	"os"
	"testing"

	"golang.org/x/crypto/x509roots/fallback/bundle"
)

// TestSystemRootsAreFoundWhereGoLooks: the environment or any of the usual paths means the
// system has roots; nothing at all (the image) means it has none.
func TestSystemRootsAreFoundWhereGoLooks(t *testing.T) {
	none := func(string) string { return "" }
	missing := func(string) (os.FileInfo, error) { return nil, fs.ErrNotExist }
	if hasSystemRoots(none, missing) {
		t.Error("no variable and no file: the system has roots")
	}
	env := func(k string) string {
		if k == "SSL_CERT_FILE" {
			return "/custom/ca.pem"
		}
		return ""
	}
	if !hasSystemRoots(env, missing) {
		t.Error("SSL_CERT_FILE set: the system has no roots")
	}
	debian := func(name string) (os.FileInfo, error) {
		if name == "/etc/ssl/certs/ca-certificates.crt" {
			return nil, nil
		}
		return nil, fs.ErrNotExist
	}
	if !hasSystemRoots(none, debian) {
		t.Error("Debian's bundle present: the system has no roots")
	}
}

// TestFallbackBundleParses: every root of the bundle the image relies on parses.
func TestFallbackBundleParses(t *testing.T) {
	n := 0
	for c := range bundle.Roots() {
		if _, err := x509.ParseCertificate(c.Certificate); err != nil {
			t.Errorf("root %d: %v", n, err)
		}
		n++
	}
	if n < 100 {
		t.Errorf("%d roots in the bundle, want over 100", n)
	}
}
