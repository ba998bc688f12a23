package httpserver

import (
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"sync"
	"syscall"
	"time"
)

// ClientCA is the set of CAs whose client certificates may call a server, read from a PEM file.
// Where the apiserver presents a client certificate to webhooks (an AdmissionConfiguration with a
// kubeConfigFile), requiring one signed by this CA keeps everybody else from forging reviews. The
// file is looked at again at most every fileCheckInterval, so a replaced CA is used without a
// restart. Safe for concurrent use.
type ClientCA struct {
	path       string
	checkEvery time.Duration

	mu      sync.Mutex
	pool    *x509.CertPool
	stamp   string // modification time and size of the file last loaded
	checked time.Time
}

// LoadClientCA reads the CA certificates of the PEM file at path; it fails when the file cannot
// be read or holds no certificate.
func LoadClientCA(path string) (*ClientCA, error) {
	c := &ClientCA{path: path, checkEvery: fileCheckInterval}
	stamp, err := c.fingerprint()
	if err != nil {
		return nil, err
	}
	if err := c.load(stamp); err != nil {
		return nil, err
	}
	c.checked = time.Now()
	return c, nil
}

// Pool returns the current CAs, re-reading the file first when it changed. A file that fails to
// load (e.g. half written) keeps the previous CAs in force: refusing every caller would cost the
// service, trusting every caller would cost its integrity.
func (c *ClientCA) Pool() *x509.CertPool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if time.Since(c.checked) >= c.checkEvery {
		c.checked = time.Now()
		if stamp, err := c.fingerprint(); err == nil && stamp != c.stamp {
			_ = c.load(stamp)
		}
	}
	return c.pool
}

func (c *ClientCA) fingerprint() (string, error) {
	fi, err := os.Stat(c.path)
	if err != nil {
		return "", fmt.Errorf("read client CA: %w", err)
	}
	return fileStamp(fi), nil
}

// fileStamp tells one version of a file from the next: its modification time and size, and its
// inode, which a replacement by rename (how Kubernetes updates a mounted Secret) always changes,
// even within the file system's timestamp granularity and at the same size.
func fileStamp(fi os.FileInfo) string {
	var inode uint64
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		inode = st.Ino
	}
	return fmt.Sprintf("%d:%d:%d", fi.ModTime().UnixNano(), fi.Size(), inode)
}

func (c *ClientCA) load(stamp string) error {
	raw, err := os.ReadFile(c.path)
	if err != nil {
		return fmt.Errorf("read client CA: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(raw) {
		return errors.New("client CA " + c.path + ": no PEM certificate in the file")
	}
	c.pool, c.stamp = pool, stamp
	return nil
}
