package gitsecrets

import (
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/ProtonMail/go-crypto/openpgp"
	"github.com/ProtonMail/go-crypto/openpgp/armor"
	"github.com/ProtonMail/go-crypto/openpgp/packet"
	"github.com/hiddeco/sshsig"
	"golang.org/x/crypto/ssh"
	corev1 "k8s.io/api/core/v1"

	"github.com/configbutler/gitops-reverser/gitops"
)

// The keys of a signing Secret.
const (
	keySigningKey = "signingKey"
	keyPassphrase = "passphrase"
)

// sshNamespace is the SSHSIG namespace git signs and verifies commits in.
const sshNamespace = "git"

// signerFrom reads the private key of a signing Secret. A Secret that does not hold a usable key
// of the format is an errSecret: commits are then not pushed at all, never pushed unsigned.
func signerFrom(format string, secret *corev1.Secret) (gitops.Signer, error) {
	key, pass := secret.Data[keySigningKey], secret.Data[keyPassphrase]
	where := fmt.Sprintf("Secret %s/%s", secret.Namespace, secret.Name)
	if len(key) == 0 {
		return nil, errSecret{fmt.Sprintf("%s has no %s for signing commits", where, keySigningKey)}
	}
	var (
		s   gitops.Signer
		err error
	)
	switch format {
	case gitops.SigningSSH:
		s, err = sshSignerFrom(key, pass)
	case gitops.SigningOpenPGP:
		s, err = openPGPSignerFrom(key, pass)
	default:
		return nil, errSecret{fmt.Sprintf("unknown commit signing format %q (ssh or openpgp)", format)}
	}
	if err != nil {
		return nil, errSecret{fmt.Sprintf("%s: %s is not a usable %s signing key: %v", where, keySigningKey, format, err)}
	}
	// Sign once now: a key that parses but cannot sign (an unsupported algorithm) is found here,
	// not at the first commit.
	if _, err := s.Sign([]byte("tree 4b825dc642cb6eb9a060e54bf8d69288fbee4904\n")); err != nil {
		return nil, errSecret{fmt.Sprintf("%s: %s cannot sign: %v", where, keySigningKey, err)}
	}
	return s, nil
}

// sshSigner makes SSHSIG signatures (namespace git, SHA-512, as ssh-keygen -Y sign does).
type sshSigner struct {
	key ssh.Signer
	pub gitops.SigningKey
}

func sshSignerFrom(pemBytes, passphrase []byte) (*sshSigner, error) {
	var (
		key ssh.Signer
		err error
	)
	if len(passphrase) > 0 {
		key, err = ssh.ParsePrivateKeyWithPassphrase(pemBytes, passphrase)
	} else {
		key, err = ssh.ParsePrivateKey(pemBytes)
	}
	var missing *ssh.PassphraseMissingError
	if errors.As(err, &missing) {
		return nil, fmt.Errorf("the key is encrypted: add its %s to the Secret", keyPassphrase)
	}
	if err != nil {
		return nil, err
	}
	if alg, ok := key.(ssh.AlgorithmSigner); ok && key.PublicKey().Type() == ssh.KeyAlgoRSA {
		// Plain ssh-rsa is SHA-1, which OpenSSH refuses in signatures.
		if key, err = ssh.NewSignerWithAlgorithms(alg, []string{ssh.KeyAlgoRSASHA512}); err != nil {
			return nil, err
		}
	}
	return &sshSigner{key: key, pub: gitops.SigningKey{
		Format:      gitops.SigningSSH,
		PublicKey:   strings.TrimSpace(string(ssh.MarshalAuthorizedKey(key.PublicKey()))),
		Fingerprint: ssh.FingerprintSHA256(key.PublicKey()),
	}}, nil
}

func (s *sshSigner) Sign(commit []byte) ([]byte, error) {
	sig, err := sshsig.Sign(bytes.NewReader(commit), s.key, sshsig.HashSHA512, sshNamespace)
	if err != nil {
		return nil, fmt.Errorf("ssh signature: %w", err)
	}
	return sshsig.Armor(sig), nil
}

func (s *sshSigner) Public() gitops.SigningKey { return s.pub }

// openPGPSigner makes armored detached OpenPGP signatures, as gpg --detach-sign --armor does.
type openPGPSigner struct {
	entity *openpgp.Entity
	pub    gitops.SigningKey
}

func openPGPSignerFrom(armored, passphrase []byte) (*openPGPSigner, error) {
	ring, err := openpgp.ReadArmoredKeyRing(bytes.NewReader(armored))
	if err != nil {
		return nil, err
	}
	if len(ring) != 1 {
		return nil, fmt.Errorf("want one key, found %d", len(ring))
	}
	e := ring[0]
	if e.PrivateKey == nil {
		return nil, errors.New("it holds a public key only: export the secret key (gpg --armor --export-secret-keys)")
	}
	if err := e.DecryptPrivateKeys(passphrase); err != nil {
		if len(passphrase) == 0 {
			return nil, fmt.Errorf("the key is encrypted: add its %s to the Secret", keyPassphrase)
		}
		return nil, fmt.Errorf("decrypt with the passphrase: %w", err)
	}
	if _, ok := e.SigningKey(time.Now()); !ok {
		return nil, errors.New("no valid signing key or subkey (expired or revoked?)")
	}
	var pub bytes.Buffer
	w, err := armor.Encode(&pub, openpgp.PublicKeyType, nil)
	if err != nil {
		return nil, err
	}
	if err := e.Serialize(w); err != nil {
		return nil, err
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	return &openPGPSigner{entity: e, pub: gitops.SigningKey{
		Format:      gitops.SigningOpenPGP,
		PublicKey:   pub.String(),
		Fingerprint: strings.ToUpper(hex.EncodeToString(e.PrimaryKey.Fingerprint)),
	}}, nil
}

func (s *openPGPSigner) Sign(commit []byte) ([]byte, error) {
	var sig bytes.Buffer
	if err := openpgp.ArmoredDetachSign(&sig, s.entity, bytes.NewReader(commit), &packet.Config{}); err != nil {
		return nil, fmt.Errorf("openpgp signature: %w", err)
	}
	return sig.Bytes(), nil
}

func (s *openPGPSigner) Public() gitops.SigningKey { return s.pub }
