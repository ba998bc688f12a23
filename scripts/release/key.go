package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/secure-systems-lab/go-securesystemslib/encrypted"
)

// The PEM types of a cosign private key: encrypted PKCS #8, scrypt and NaCl secretbox (what
// cosign generate-key-pair writes; older cosign wrote the COSIGN type), and of its public key.
const (
	sigstoreKeyType = "ENCRYPTED SIGSTORE PRIVATE KEY"
	cosignKeyType   = "ENCRYPTED COSIGN PRIVATE KEY"
	publicKeyType   = "PUBLIC KEY"
)

// The environment cosign reads the key's path and password from; release reads them too.
const (
	keyEnv      = "COSIGN_KEY"
	passwordEnv = "COSIGN_PASSWORD"
)

// signingKey is a cosign key pair: ECDSA P-256 signing SHA-256 digests, as cosign's default key
// (ecdsa-sha2-256-nistp256). It is the release's only key: the image's and the chart's
// signatures, the attestations' DSSE envelopes and the checksums' signature are all made with it.
type signingKey struct {
	private   *ecdsa.PrivateKey
	PublicPEM []byte // the public key, PKIX in a PEM block: what cosign verify --key reads
}

// loadSigningKey reads a cosign private key file and decrypts it with password.
func loadSigningKey(path string, password []byte) (*signingKey, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read the signing key: %w", err)
	}
	block, _ := pem.Decode(raw)
	if block == nil || (block.Type != sigstoreKeyType && block.Type != cosignKeyType) {
		return nil, fmt.Errorf("%s is not a cosign private key (want a PEM block %q, as cosign generate-key-pair writes)", path, sigstoreKeyType)
	}
	der, err := encrypted.Decrypt(block.Bytes, password)
	if err != nil {
		return nil, fmt.Errorf("decrypt %s with $%s: %w", path, passwordEnv, err)
	}
	parsed, err := x509.ParsePKCS8PrivateKey(der)
	if err != nil {
		return nil, fmt.Errorf("parse the signing key: %w", err)
	}
	priv, ok := parsed.(*ecdsa.PrivateKey)
	if !ok || priv.Curve != elliptic.P256() {
		return nil, fmt.Errorf("%s holds a %T: release signs with ECDSA P-256 keys only (cosign's default)", path, parsed)
	}
	return newSigningKey(priv)
}

func newSigningKey(priv *ecdsa.PrivateKey) (*signingKey, error) {
	der, err := x509.MarshalPKIXPublicKey(&priv.PublicKey)
	if err != nil {
		return nil, err
	}
	return &signingKey{private: priv, PublicPEM: pem.EncodeToMemory(&pem.Block{Type: publicKeyType, Bytes: der})}, nil
}

// sign is the ASN.1 ECDSA signature of data's SHA-256 digest: what cosign signs and verifies.
func (k *signingKey) sign(data []byte) ([]byte, error) {
	digest := sha256.Sum256(data)
	return ecdsa.SignASN1(rand.Reader, k.private, digest[:])
}

// Sign and KeyID make the key a DSSE signer. Like cosign, it leaves the envelope's keyid empty.
func (k *signingKey) Sign(_ context.Context, data []byte) ([]byte, error) { return k.sign(data) }
func (k *signingKey) KeyID() (string, error)                              { return "", nil }

// hint is the Sigstore bundle's public key hint: the SHA-256 of the public key's PKIX form.
func (k *signingKey) hint() string {
	block, _ := pem.Decode(k.PublicPEM)
	sum := sha256.Sum256(block.Bytes)
	return base64.StdEncoding.EncodeToString(sum[:])
}

// generateKeyPair makes a new key pair as cosign generate-key-pair does: the private key
// encrypted with password, both in PEM.
func generateKeyPair(password []byte) (private, public []byte, err error) {
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	der, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		return nil, nil, err
	}
	sealed, err := encrypted.Encrypt(der, password)
	if err != nil {
		return nil, nil, fmt.Errorf("encrypt the private key: %w", err)
	}
	k, err := newSigningKey(priv)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: sigstoreKeyType, Bytes: sealed}), k.PublicPEM, nil
}

// runKeygen writes cosign.key and cosign.pub into a folder, the password from $COSIGN_PASSWORD,
// refusing to replace a key.
func runKeygen(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("keygen", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dir := fs.String("out", ".", "the folder to write cosign.key and cosign.pub into")
	if err := fs.Parse(args); err != nil {
		return err
	}
	password, ok := os.LookupEnv(passwordEnv)
	if !ok || password == "" {
		return fmt.Errorf("set $%s to the password that encrypts the private key", passwordEnv)
	}
	keyPath, pubPath := filepath.Join(*dir, "cosign.key"), filepath.Join(*dir, "cosign.pub")
	for _, p := range []string{keyPath, pubPath} {
		if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("%s exists: release keygen never replaces a key (move it away first)", p)
		}
	}
	private, public, err := generateKeyPair([]byte(password))
	if err != nil {
		return err
	}
	if err := os.MkdirAll(*dir, 0o700); err != nil {
		return err
	}
	if err := os.WriteFile(keyPath, private, 0o600); err != nil {
		return err
	}
	if err := os.WriteFile(pubPath, public, 0o644); err != nil {
		return err
	}
	_, _ = fmt.Fprintf(stdout, "private key %s (encrypted with $%s)\npublic key  %s\n", keyPath, passwordEnv, pubPath)
	return nil
}
