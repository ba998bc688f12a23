package gitsecrets

import (
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"

	"github.com/configbutler/gitops-reverser/gitops"
)

// The keys of a signing Secret.
const (
	keySigningKey = "signingKey"
	keyPassphrase = "passphrase"
)

// signerFrom reads the private key of a signing Secret. A Secret that does not hold a usable key
// of the format is an errSecret: commits are then not pushed at all, never pushed unsigned.
func signerFrom(format string, secret *corev1.Secret) (gitops.Signer, error) {
	key, pass := secret.Data[keySigningKey], secret.Data[keyPassphrase]
	where := fmt.Sprintf("Secret %s/%s", secret.Namespace, secret.Name)
	if len(key) == 0 {
		return nil, errSecret{fmt.Sprintf("%s has no %s for signing commits", where, keySigningKey)}
	}
	s, err := gitops.NewSigner(format, key, pass)
	switch {
	case errors.Is(err, gitops.ErrUnknownSigningFormat):
		return nil, errSecret{fmt.Sprintf("unknown commit signing format %q (ssh or openpgp)", format)}
	case errors.Is(err, gitops.ErrKeyEncrypted):
		err = fmt.Errorf("%w: add its %s to the Secret", err, keyPassphrase)
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
