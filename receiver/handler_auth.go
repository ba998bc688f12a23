package receiver

import (
	"crypto/hmac"
	"crypto/sha256"
	"net/http"
	"strings"
)

// checkCDEventAuth authenticates a cdevents delivery: an Authorization bearer token equal to the
// Receiver's token, or a generic-hmac X-Signature of the body; every one present must be right
// and one must be. Missing → 401, wrong → 403.
func checkCDEventAuth(token []byte, h http.Header, body []byte) *Refusal {
	if len(token) == 0 {
		return refuse(http.StatusServiceUnavailable, ReasonNoToken, "the receiver has no token")
	}
	auth, sig := h.Get("Authorization"), h.Get("X-Signature")
	if auth == "" && sig == "" {
		return refuse(http.StatusUnauthorized, ReasonMissingToken, "no Authorization bearer token or X-Signature header")
	}
	if sig != "" {
		if r := checkGenericHMAC(sig, token, body); r != nil {
			return r
		}
	}
	if auth != "" {
		return checkBearer(auth, token)
	}
	return nil
}

// checkBearer compares an "Authorization: Bearer <token>" header with token in constant time
// (both hashed first, so not even the length shows).
func checkBearer(auth string, token []byte) *Refusal {
	scheme, got, ok := strings.Cut(strings.TrimSpace(auth), " ")
	got = strings.TrimSpace(got)
	if !ok || !strings.EqualFold(scheme, "Bearer") || got == "" {
		return refuse(http.StatusUnauthorized, ReasonMissingToken, "the Authorization header is not a bearer token")
	}
	a, b := sha256.Sum256([]byte(got)), sha256.Sum256(token)
	if !hmac.Equal(a[:], b[:]) {
		return refuse(http.StatusForbidden, ReasonBadToken, "the bearer token is not the receiver's token")
	}
	return nil
}
