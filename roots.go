package main

import (
	"crypto/x509"
	"os"

	"golang.org/x/crypto/x509roots/fallback/bundle"
)

// systemRootFiles are where Go's crypto/x509 looks for the system's CA roots on Linux (Debian,
// Fedora/RHEL, OpenSUSE, OpenELEC, CentOS/RHEL 7, Alpine) and the directories it reads.
var systemRootFiles = []string{
	"/etc/ssl/certs/ca-certificates.crt", "/etc/pki/tls/certs/ca-bundle.crt", "/etc/ssl/ca-bundle.pem",
	"/etc/pki/tls/cacert.pem", "/etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem", "/etc/ssl/cert.pem",
	"/etc/ssl/certs", "/etc/pki/tls/certs",
}

// useFallbackRoots gives HTTPS Git remotes the Mozilla roots of golang.org/x/crypto/x509roots
// where the system has none, as in the image (only the binary). They are parsed only then: about
// a mebibyte that a host or a base image with its own roots does not pay.
func useFallbackRoots() {
	if hasSystemRoots(os.Getenv, os.Stat) {
		return
	}
	pool := x509.NewCertPool()
	for c := range bundle.Roots() {
		cert, err := x509.ParseCertificate(c.Certificate)
		if err != nil {
			continue // the bundle is tested upstream; one bad entry must not stop the daemon
		}
		if c.Constraint == nil {
			pool.AddCert(cert)
		} else {
			pool.AddCertWithConstraint(cert, c.Constraint)
		}
	}
	x509.SetFallbackRoots(pool)
}

// hasSystemRoots reports whether crypto/x509 will find roots of the system: SSL_CERT_FILE or
// SSL_CERT_DIR is set, or one of the usual files or directories exists.
func hasSystemRoots(getenv func(string) string, stat func(string) (os.FileInfo, error)) bool {
	if getenv("SSL_CERT_FILE") != "" || getenv("SSL_CERT_DIR") != "" {
		return true
	}
	for _, f := range systemRootFiles {
		if _, err := stat(f); err == nil {
			return true
		}
	}
	return false
}
