package sops

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"time"
)

// ivSize is the size of the random nonce sops uses for AES-GCM (not the usual 12 bytes).
const ivSize = 32

// encPattern is the string form of an encrypted value.
var encPattern = regexp.MustCompile(`^ENC\[AES256_GCM,data:(.+),iv:(.+),tag:(.+),type:(.+)\]`)

// errNotEncrypted marks a value that does not have the ENC[...] form.
var errNotEncrypted = errors.New("value is not in the ENC[AES256_GCM,...] form")

// leafBytes returns the bytes sops uses for a plaintext leaf, both for the MAC and as the
// plaintext to encrypt, and the type tag of the encrypted form.
func leafBytes(v any) ([]byte, string, error) {
	switch v := v.(type) {
	case string:
		return []byte(v), "str", nil
	case int:
		return []byte(strconv.Itoa(v)), "int", nil
	case float64:
		return []byte(strconv.FormatFloat(v, 'f', -1, 64)), "float", nil
	case bool:
		if v {
			return []byte("True"), "bool", nil
		}
		return []byte("False"), "bool", nil
	case time.Time:
		b, err := v.MarshalText()
		if err != nil {
			return nil, "", fmt.Errorf("encode a timestamp: %w", err)
		}
		return b, "time", nil
	default:
		return nil, "", fmt.Errorf("unsupported value type %T", v)
	}
}

// newGCM returns AES-256-GCM with sops's 32-byte nonce.
func newGCM(key []byte) (cipher.AEAD, error) {
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, fmt.Errorf("init AES: %w", err)
	}
	gcm, err := cipher.NewGCMWithNonceSize(block, ivSize)
	if err != nil {
		return nil, fmt.Errorf("init GCM: %w", err)
	}
	return gcm, nil
}

// encryptValue returns the ENC[...] form of v under key with additionalData. An empty string
// stays empty, as in sops.
func encryptValue(gcm cipher.AEAD, v any, additionalData string) (string, error) {
	if s, ok := v.(string); ok && s == "" {
		return "", nil
	}
	plain, typ, err := leafBytes(v)
	if err != nil {
		return "", err
	}
	iv := make([]byte, ivSize)
	if _, err := rand.Read(iv); err != nil {
		return "", fmt.Errorf("generate an IV: %w", err)
	}
	out := gcm.Seal(nil, iv, plain, []byte(additionalData))
	cut := len(out) - gcm.Overhead()
	enc := base64.StdEncoding
	return "ENC[AES256_GCM,data:" + enc.EncodeToString(out[:cut]) +
		",iv:" + enc.EncodeToString(iv) +
		",tag:" + enc.EncodeToString(out[cut:]) +
		",type:" + typ + "]", nil
}

// decryptValue returns the plaintext of an ENC[...] string and its typed value. An empty string
// decrypts to an empty string, as in sops.
func decryptValue(gcm cipher.AEAD, s, additionalData string) ([]byte, any, error) {
	if s == "" {
		return nil, "", nil
	}
	m := encPattern.FindStringSubmatch(s)
	if m == nil {
		return nil, nil, errNotEncrypted
	}
	var parts [3][]byte
	for i, name := range []string{"data", "iv", "tag"} {
		b, err := base64.StdEncoding.DecodeString(m[i+1])
		if err != nil {
			return nil, nil, fmt.Errorf("decode the %s of an encrypted value: %w", name, err)
		}
		parts[i] = b
	}
	data, iv, tag := parts[0], parts[1], parts[2]
	if len(iv) != ivSize || len(tag) != gcm.Overhead() {
		return nil, nil, fmt.Errorf("encrypted value has a %d-byte iv and a %d-byte tag, want %d and %d",
			len(iv), len(tag), ivSize, gcm.Overhead())
	}
	plain, err := gcm.Open(nil, iv, append(append([]byte(nil), data...), tag...), []byte(additionalData))
	if err != nil {
		return nil, nil, fmt.Errorf("authenticate an encrypted value: %w", err)
	}
	v, err := typedValue(plain, m[4])
	if err != nil {
		return nil, nil, err
	}
	return plain, v, nil
}

// typedValue parses decrypted bytes by the type tag of the ENC[...] form.
func typedValue(plain []byte, typ string) (any, error) {
	s := string(plain)
	switch typ {
	case "str":
		return s, nil
	case "int":
		v, err := strconv.Atoi(s)
		if err != nil {
			return nil, errors.New("decrypted value of type int does not parse as one")
		}
		return v, nil
	case "float":
		v, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return nil, errors.New("decrypted value of type float does not parse as one")
		}
		return v, nil
	case "bool":
		v, err := strconv.ParseBool(s)
		if err != nil {
			return nil, errors.New("decrypted value of type bool does not parse as one")
		}
		return v, nil
	case "time":
		var t time.Time
		if err := t.UnmarshalText(plain); err != nil {
			return nil, errors.New("decrypted value of type time does not parse as one")
		}
		return t, nil
	case "bytes":
		return s, nil
	default:
		return nil, fmt.Errorf("unknown encrypted value type %q", typ)
	}
}
