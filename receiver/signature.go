package receiver

import (
	"crypto/hmac"
	"crypto/sha1" //nolint:gosec // generic-hmac senders may still sign with SHA-1; an HMAC-SHA1 is not broken.
	"crypto/sha256"
	"crypto/sha512"
	"encoding/hex"
	"hash"
	"net/http"
	"strings"
)

// checkPrefixedHMAC checks that header name holds prefix + hex(HMAC-SHA256(token, body)).
func checkPrefixedHMAC(h http.Header, name, prefix string, token, body []byte) *Refusal {
	sig := strings.TrimSpace(h.Get(name))
	if sig == "" {
		return refuse(http.StatusUnauthorized, ReasonMissingSignature, "no %s header", name)
	}
	hexSig, ok := strings.CutPrefix(sig, prefix)
	if !ok {
		return refuse(http.StatusForbidden, ReasonBadSignature, "%s does not start with %q", name, prefix)
	}
	return checkHMAC(sha256.New, hexSig, name, token, body)
}

// hmacAlgorithms are the hashes a generic-hmac X-Signature may name.
var hmacAlgorithms = map[string]func() hash.Hash{
	"sha1":   sha1.New,
	"sha256": sha256.New,
	"sha512": sha512.New,
}

// checkGenericHMAC checks an X-Signature of the form <alg>=<hex>.
func checkGenericHMAC(sig string, token, body []byte) *Refusal {
	sig = strings.TrimSpace(sig)
	if sig == "" {
		return refuse(http.StatusUnauthorized, ReasonMissingSignature, "no X-Signature header")
	}
	alg, hexSig, ok := strings.Cut(sig, "=")
	if !ok {
		return refuse(http.StatusForbidden, ReasonBadSignature, "X-Signature is not <alg>=<hex>")
	}
	newHash, ok := hmacAlgorithms[strings.ToLower(alg)]
	if !ok {
		return refuse(http.StatusForbidden, ReasonUnsupportedAlgorithm,
			"X-Signature algorithm is not sha1, sha256 or sha512")
	}
	return checkHMAC(newHash, hexSig, "X-Signature", token, body)
}

// checkHMAC compares the hex signature with the HMAC of body in constant time.
func checkHMAC(newHash func() hash.Hash, hexSig, name string, token, body []byte) *Refusal {
	got, err := hex.DecodeString(hexSig)
	if err != nil {
		return refuse(http.StatusForbidden, ReasonBadSignature, "%s is not hex", name)
	}
	mac := hmac.New(newHash, token)
	mac.Write(body)
	if !hmac.Equal(got, mac.Sum(nil)) {
		return refuse(http.StatusForbidden, ReasonBadSignature, "%s does not match the body", name)
	}
	return nil
}

// checkToken compares a plain token in constant time. Both sides are hashed first so that the
// compare does not even reveal the token's length.
func checkToken(got string, token []byte) *Refusal {
	if got == "" {
		return refuse(http.StatusUnauthorized, ReasonMissingToken, "no X-Gitlab-Token header")
	}
	a, b := sha256.Sum256([]byte(got)), sha256.Sum256(token)
	if !hmac.Equal(a[:], b[:]) {
		return refuse(http.StatusForbidden, ReasonBadToken, "X-Gitlab-Token is not the receiver's token")
	}
	return nil
}
