package sops

import (
	"crypto/sha256"
	"crypto/sha512"
	"fmt"
	"hash"
)

// macHash accumulates sops's MAC: SHA-512 over the bytes of every non-null leaf value in
// document order, before encryption and after decryption. With mac_only_encrypted only the
// encrypted leaves count and the hash starts with SHA-256("sops"); otherwise (the default, and
// what Encrypt writes) unencrypted leaves count too. Comments never count.
type macHash struct {
	h             hash.Hash
	onlyEncrypted bool
}

func newMAC(onlyEncrypted bool) *macHash {
	m := &macHash{h: sha512.New(), onlyEncrypted: onlyEncrypted}
	if onlyEncrypted {
		seed := sha256.Sum256([]byte("sops"))
		m.h.Write(seed[:])
	}
	return m
}

// add hashes the plaintext leaf v that is encrypted or not.
func (m *macHash) add(v any, encrypted bool) error {
	if m.onlyEncrypted && !encrypted {
		return nil
	}
	b, _, err := leafBytes(v)
	if err != nil {
		return err
	}
	m.h.Write(b)
	return nil
}

// sum is the MAC as sops stores it before encryption: upper-case hex.
func (m *macHash) sum() string {
	return fmt.Sprintf("%X", m.h.Sum(nil))
}
