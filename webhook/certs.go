package webhook

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"time"
)

// CertSource gives the server its certificate on every TLS handshake (it is an
// httpserver.Certificates) and Registration the CA bundle the apiserver must trust. Both must be
// safe for concurrent use. SelfManaged is one; httpserver.FileCerts, for a directory that
// cert-manager fills, is the other.
type CertSource interface {
	GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error)
	CABundle() []byte
}

// Key names inside a certificate directory or Secret, as cert-manager writes them.
const (
	keyTLSCert = "tls.crt"
	keyTLSKey  = "tls.key"
	keyCACert  = "ca.crt"
	keyCAKey   = "ca.key"
)

// keyPair is a certificate with its private key, parsed and PEM-encoded.
type keyPair struct {
	cert    *x509.Certificate
	key     *ecdsa.PrivateKey
	certPEM []byte
	keyPEM  []byte
}

// issue signs tmpl with parent's key, or self-signs it when parent is nil.
func issue(tmpl *x509.Certificate, parent *keyPair) (keyPair, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return keyPair{}, fmt.Errorf("generate key: %w", err)
	}
	if tmpl.SerialNumber, err = rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127)); err != nil {
		return keyPair{}, fmt.Errorf("generate serial number: %w", err)
	}
	signer, signerKey := tmpl, key
	if parent != nil {
		signer, signerKey = parent.cert, parent.key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, signer, &key.PublicKey, signerKey)
	if err != nil {
		return keyPair{}, fmt.Errorf("sign certificate %q: %w", tmpl.Subject.CommonName, err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return keyPair{}, fmt.Errorf("encode key: %w", err)
	}
	return parseKeyPair(
		pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}))
}

// parseKeyPair reads the first certificate of certPEM (a CA bundle may hold older CAs after it)
// and its ECDSA key.
func parseKeyPair(certPEM, keyPEM []byte) (keyPair, error) {
	block, _ := pem.Decode(certPEM)
	if block == nil || block.Type != "CERTIFICATE" {
		return keyPair{}, errors.New("no PEM certificate")
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return keyPair{}, fmt.Errorf("parse certificate: %w", err)
	}
	pair, err := tls.X509KeyPair(pem.EncodeToMemory(block), keyPEM)
	if err != nil {
		return keyPair{}, fmt.Errorf("match key to certificate: %w", err)
	}
	key, ok := pair.PrivateKey.(*ecdsa.PrivateKey)
	if !ok {
		return keyPair{}, errors.New("private key is not ECDSA")
	}
	return keyPair{cert: cert, key: key, certPEM: certPEM, keyPEM: keyPEM}, nil
}

func newCA(now time.Time) (keyPair, error) {
	return issue(&x509.Certificate{
		Subject:               pkix.Name{CommonName: "gitops-reverser-webhook-ca"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(caValidity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}, nil)
}

// newServing issues a serving certificate for hosts (DNS names or IP addresses), signed by ca.
func newServing(ca keyPair, hosts []string, now time.Time) (keyPair, error) {
	tmpl := &x509.Certificate{
		Subject:     pkix.Name{CommonName: hosts[0]},
		NotBefore:   now.Add(-time.Hour),
		NotAfter:    now.Add(servingValidity),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	return issue(tmpl, &ca)
}
