package httpserver

import (
	"crypto/tls"
	"errors"
)

// Certificates gives the server its certificate on every TLS handshake, so a rotated
// certificate is served without a restart. It must be safe for concurrent use. FileCerts is
// one; the admission webhook's self-managed certificates are another.
type Certificates interface {
	GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error)
}

// tlsConfig is nil for plain HTTP (no CertDir, no Certs), else TLS 1.2+ with the certificates
// of cfg and, when set, the client CA.
func tlsConfig(cfg Config) (*tls.Config, error) {
	certs := cfg.Certs
	switch {
	case cfg.CertDir != "" && certs != nil:
		return nil, errors.New("both a certificate directory and a certificate source")
	case cfg.CertDir != "":
		fc, err := NewFileCerts(cfg.CertDir)
		if err != nil {
			return nil, err
		}
		certs = fc
	case certs == nil && cfg.ClientCA != nil:
		return nil, errors.New("a client CA needs TLS: no certificates")
	case certs == nil:
		return nil, nil
	}
	return withClientCA(certs, cfg.ClientCA), nil
}

// withClientCA serves certs; with a client CA, every handshake gets a config that requires a
// client certificate verified against the CA file as it is now, so a replaced CA applies to the
// next connection. Session tickets are off then: a resumed session would skip that check.
func withClientCA(certs Certificates, clientCA *ClientCA) *tls.Config {
	build := func() *tls.Config {
		c := &tls.Config{
			MinVersion:     tls.VersionTLS12,
			GetCertificate: certs.GetCertificate,
			NextProtos:     []string{"h2", "http/1.1"},
		}
		if clientCA != nil {
			c.ClientAuth = tls.RequireAndVerifyClientCert
			c.ClientCAs = clientCA.Pool()
			c.SessionTicketsDisabled = true
		}
		return c
	}
	c := build()
	if clientCA != nil {
		c.GetConfigForClient = func(*tls.ClientHelloInfo) (*tls.Config, error) { return build(), nil }
	}
	return c
}
