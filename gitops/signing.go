package gitops

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
)

// sshNamespace is the SSHSIG namespace git signs and verifies commits in.
const sshNamespace = "git"

// Signer signs commits: Sign returns the armored signature of a commit's bytes without its
// gpgsig header, which is what git verifies; Public is the key to register with the Git host.
type Signer interface {
	Sign(commit []byte) ([]byte, error)
	Public() SigningKey
}

// Errors of NewSigner.
var (
	// ErrUnknownSigningFormat: the format is neither SigningSSH nor SigningOpenPGP.
	ErrUnknownSigningFormat = errors.New("unknown commit signing format")
	// ErrKeyEncrypted: the key is encrypted and no passphrase was given.
	ErrKeyEncrypted = errors.New("the key is encrypted")
)

// NewSigner parses a private key of the format (SigningSSH: an OpenSSH or PEM private key;
// SigningOpenPGP: one armored secret key), decrypting it with passphrase when it is encrypted.
func NewSigner(format string, key, passphrase []byte) (Signer, error) {
	var (
		s   Signer
		err error
	)
	switch format {
	case SigningSSH:
		s, err = sshSignerFrom(key, passphrase)
	case SigningOpenPGP:
		s, err = openPGPSignerFrom(key, passphrase)
	default:
		return nil, fmt.Errorf("%w %q", ErrUnknownSigningFormat, format)
	}
	if err != nil {
		return nil, err // not s: a nil *sshSigner in a Signer is not a nil Signer
	}
	return s, nil
}

// sshSigner makes SSHSIG signatures (namespace git, SHA-512, as ssh-keygen -Y sign does).
type sshSigner struct {
	key ssh.Signer
	pub SigningKey
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
		return nil, ErrKeyEncrypted
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
	return &sshSigner{key: key, pub: SigningKey{
		Format:      SigningSSH,
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

func (s *sshSigner) Public() SigningKey { return s.pub }

// openPGPSigner makes armored detached OpenPGP signatures, as gpg --detach-sign --armor does.
type openPGPSigner struct {
	entity *openpgp.Entity
	pub    SigningKey
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
			return nil, ErrKeyEncrypted
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
	return &openPGPSigner{entity: e, pub: SigningKey{
		Format:      SigningOpenPGP,
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

func (s *openPGPSigner) Public() SigningKey { return s.pub }

// signCommit adds the gpgsig header to a commit: the signature of the bytes without it, each of
// its lines after the first indented by one space, after the committer line.
func signCommit(commit []byte, s Signer) ([]byte, error) {
	sig, err := s.Sign(commit)
	if err != nil {
		return nil, err
	}
	end := bytes.Index(commit, []byte("\n\n"))
	if end < 0 {
		return nil, errors.New("sign commit: no end of headers")
	}
	header := "gpgsig " + strings.ReplaceAll(strings.TrimRight(string(sig), "\n"), "\n", "\n ") + "\n"
	out := make([]byte, 0, len(commit)+len(header))
	out = append(out, commit[:end+1]...)
	out = append(out, header...)
	return append(out, commit[end+1:]...), nil
}
