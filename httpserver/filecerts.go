package httpserver

import (
	"bytes"
	"crypto/tls"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// File names inside a certificate directory, as cert-manager writes them into a Secret.
const (
	fileTLSCert = "tls.crt"
	fileTLSKey  = "tls.key"
	fileCACert  = "ca.crt"
)

// fileCheckInterval bounds how often a handshake looks at the files: a stat per handshake would
// cost more than the rare rotation is worth.
const fileCheckInterval = 10 * time.Second

// FileCerts serves tls.crt/tls.key from a directory (e.g. a cert-manager Secret mounted as a
// volume) and picks up replaced files without a restart. ca.crt, if present, is the CA bundle,
// for an admission webhook's registration. Safe for concurrent use.
type FileCerts struct {
	dir        string
	checkEvery time.Duration

	mu      sync.Mutex
	cert    *tls.Certificate
	ca      []byte
	stamp   string // modification times and sizes of the files last loaded
	checked time.Time
}

// NewFileCerts loads the pair from dir; it fails when the pair is missing or does not match.
func NewFileCerts(dir string) (*FileCerts, error) {
	f := &FileCerts{dir: dir, checkEvery: fileCheckInterval}
	if err := f.load(f.fingerprint()); err != nil {
		return nil, err
	}
	f.checked = time.Now()
	return f, nil
}

// GetCertificate returns the current pair, reloading it first when the files changed. A pair
// that fails to load (e.g. the key is written before the certificate) keeps the previous one in
// service and is retried at the next check.
func (f *FileCerts) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.refreshLocked()
	return f.cert, nil
}

// CABundle is the content of ca.crt, or nil when the directory has none.
func (f *FileCerts) CABundle() []byte {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.refreshLocked()
	return f.ca
}

func (f *FileCerts) refreshLocked() {
	if time.Since(f.checked) < f.checkEvery {
		return
	}
	f.checked = time.Now()
	if stamp := f.fingerprint(); stamp != f.stamp {
		_ = f.load(stamp)
	}
}

func (f *FileCerts) fingerprint() string {
	var b bytes.Buffer
	for _, name := range []string{fileTLSCert, fileTLSKey, fileCACert} {
		if fi, err := os.Stat(filepath.Join(f.dir, name)); err == nil {
			fmt.Fprintf(&b, "%s:%s;", name, fileStamp(fi))
		}
	}
	return b.String()
}

func (f *FileCerts) load(stamp string) error {
	cert, err := tls.LoadX509KeyPair(filepath.Join(f.dir, fileTLSCert), filepath.Join(f.dir, fileTLSKey))
	if err != nil {
		return fmt.Errorf("load certificate from %s: %w", f.dir, err)
	}
	ca, err := os.ReadFile(filepath.Join(f.dir, fileCACert))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("read CA bundle from %s: %w", f.dir, err)
	}
	f.cert, f.ca, f.stamp = &cert, ca, stamp
	return nil
}
