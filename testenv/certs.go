package testenv

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// pki is the throwaway key material of one control plane: a CA, the apiserver's serving
// certificate signed by it, and the service-account signing key.
type pki struct {
	caPEM                 []byte
	caFile                string
	serverCert, serverKey string
	saKey                 string
}

func writePKI(dir string) (pki, error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return pki{}, fmt.Errorf("generate CA key: %w", err)
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "testenv-ca"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(10 * 365 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return pki{}, fmt.Errorf("sign CA: %w", err)
	}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		return pki{}, fmt.Errorf("parse CA: %w", err)
	}
	srvKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return pki{}, fmt.Errorf("generate serving key: %w", err)
	}
	srvTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: "kube-apiserver"},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(10 * 365 * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:     []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc"},
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1")},
	}
	srvDER, err := x509.CreateCertificate(rand.Reader, srvTmpl, caCert, &srvKey.PublicKey, caKey)
	if err != nil {
		return pki{}, fmt.Errorf("sign serving certificate: %w", err)
	}
	saKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return pki{}, fmt.Errorf("generate service-account key: %w", err)
	}
	p := pki{
		caPEM:      pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}),
		caFile:     filepath.Join(dir, "ca.crt"),
		serverCert: filepath.Join(dir, "apiserver.crt"),
		serverKey:  filepath.Join(dir, "apiserver.key"),
		saKey:      filepath.Join(dir, "sa.key"),
	}
	files := map[string][]byte{
		p.caFile:     p.caPEM,
		p.serverCert: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srvDER}),
	}
	for path, key := range map[string]*ecdsa.PrivateKey{p.serverKey: srvKey, p.saKey: saKey} {
		der, err := x509.MarshalECPrivateKey(key)
		if err != nil {
			return pki{}, fmt.Errorf("encode key: %w", err)
		}
		files[path] = pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der})
	}
	for path, b := range files {
		if err := os.WriteFile(path, b, 0o600); err != nil {
			return pki{}, fmt.Errorf("write %s: %w", filepath.Base(path), err)
		}
	}
	return p, nil
}
