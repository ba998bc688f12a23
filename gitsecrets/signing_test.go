package gitsecrets

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"errors"
	"strings"
	"testing"

	"github.com/ProtonMail/go-crypto/openpgp"
	"github.com/ProtonMail/go-crypto/openpgp/armor"
	"github.com/ProtonMail/go-crypto/openpgp/packet"
	"golang.org/x/crypto/ssh"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/configbutler/gitops-reverser/gitops"
)

// newSSHKey is a new ed25519 key as an OpenSSH private key file, encrypted when passphrase is set.
func newSSHKey(tb testing.TB, passphrase string) []byte {
	tb.Helper()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		tb.Fatal(err)
	}
	var block *pem.Block
	if passphrase == "" {
		block, err = ssh.MarshalPrivateKey(priv, "test")
	} else {
		block, err = ssh.MarshalPrivateKeyWithPassphrase(priv, "test", []byte(passphrase))
	}
	if err != nil {
		tb.Fatal(err)
	}
	return pem.EncodeToMemory(block)
}

// newOpenPGPKey is a new ed25519 OpenPGP key, armored: the private key (encrypted when passphrase is
// set) and the public key.
func newOpenPGPKey(tb testing.TB, passphrase string) (private, public []byte) {
	tb.Helper()
	cfg := &packet.Config{Algorithm: packet.PubKeyAlgoEdDSA}
	e, err := openpgp.NewEntity("gitops-reverser", "test", "bot@example.com", cfg)
	if err != nil {
		tb.Fatal(err)
	}
	if passphrase != "" {
		if err := e.EncryptPrivateKeys([]byte(passphrase), cfg); err != nil {
			tb.Fatal(err)
		}
	}
	armored := func(typ string, write func(w *bytes.Buffer) error) []byte {
		var buf bytes.Buffer
		w, err := armor.Encode(&buf, typ, nil)
		if err != nil {
			tb.Fatal(err)
		}
		var raw bytes.Buffer
		if err := write(&raw); err != nil {
			tb.Fatal(err)
		}
		if _, err := w.Write(raw.Bytes()); err != nil {
			tb.Fatal(err)
		}
		if err := w.Close(); err != nil {
			tb.Fatal(err)
		}
		return buf.Bytes()
	}
	private = armored(openpgp.PrivateKeyType, func(w *bytes.Buffer) error { return e.SerializePrivateWithoutSigning(w, nil) })
	public = armored(openpgp.PublicKeyType, func(w *bytes.Buffer) error { return e.Serialize(w) })
	return private, public
}

func signingSecret(data map[string][]byte) *corev1.Secret {
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "signing"}, Data: data}
}

func mustSigner(tb testing.TB, format string, key []byte, passphrase string) gitops.Signer {
	tb.Helper()
	data := map[string][]byte{keySigningKey: key}
	if passphrase != "" {
		data[keyPassphrase] = []byte(passphrase)
	}
	s, err := signerFrom(format, signingSecret(data))
	if err != nil {
		tb.Fatal(err)
	}
	return s
}

func TestUnusableSigningKeysAreRefusedWithTheReason(t *testing.T) {
	openPGPPrivate, openPGPPublic := newOpenPGPKey(t, "")
	encryptedPGP, _ := newOpenPGPKey(t, "s3cret")
	cases := []struct {
		name, format string
		data         map[string][]byte
		want         string
	}{
		{"no key", gitops.SigningSSH, map[string][]byte{"other": []byte("x")}, "has no signingKey"},
		{"not a key", gitops.SigningSSH, map[string][]byte{keySigningKey: []byte("hello")}, "not a usable ssh signing key"},
		{"an ssh key for openpgp", gitops.SigningOpenPGP, map[string][]byte{keySigningKey: newSSHKey(t, "")}, "not a usable openpgp signing key"},
		{"an openpgp key for ssh", gitops.SigningSSH, map[string][]byte{keySigningKey: openPGPPrivate}, "not a usable ssh signing key"},
		{"an encrypted ssh key without its passphrase", gitops.SigningSSH, map[string][]byte{keySigningKey: newSSHKey(t, "s3cret")}, "add its passphrase"},
		{"a wrong ssh passphrase", gitops.SigningSSH, map[string][]byte{keySigningKey: newSSHKey(t, "s3cret"), keyPassphrase: []byte("nope")}, "not a usable ssh"},
		{"an encrypted openpgp key without its passphrase", gitops.SigningOpenPGP, map[string][]byte{keySigningKey: encryptedPGP}, "add its passphrase"},
		{"a wrong openpgp passphrase", gitops.SigningOpenPGP, map[string][]byte{keySigningKey: encryptedPGP, keyPassphrase: []byte("nope")}, "decrypt"},
		{"a public openpgp key", gitops.SigningOpenPGP, map[string][]byte{keySigningKey: openPGPPublic}, "public key only"},
		{"an unknown format", "x509", map[string][]byte{keySigningKey: newSSHKey(t, "")}, "unknown commit signing format"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := signerFrom(c.format, signingSecret(c.data))
			if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "team/signing") && c.format != "x509" {
				t.Fatalf("err = %v, want one naming the Secret and saying %q", err, c.want)
			}
			if !errors.As(err, new(errSecret)) {
				t.Errorf("err is a %T, want errSecret (the user must fix the Secret)", err)
			}
		})
	}
	for name, c := range map[string]struct {
		format, passphrase string
		key                []byte
	}{
		"encrypted ssh":     {gitops.SigningSSH, "s3cret", newSSHKey(t, "s3cret")},
		"encrypted openpgp": {gitops.SigningOpenPGP, "s3cret", encryptedPGP},
	} {
		if s := mustSigner(t, c.format, c.key, c.passphrase); s.Public().Fingerprint == "" {
			t.Errorf("%s: no fingerprint", name)
		}
	}
}
