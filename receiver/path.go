package receiver

import (
	"crypto/sha256"
	"encoding/hex"
)

// WebhookPath is the secret path of a receiver: "/hook/" + hex(sha256(token + name + namespace)).
// It is the same derivation as Flux's notification-controller, so the path changes when the token
// does and cannot be guessed without it.
func WebhookPath(token []byte, name, namespace string) string {
	h := sha256.New()
	h.Write(token)
	h.Write([]byte(name))
	h.Write([]byte(namespace))
	return "/hook/" + hex.EncodeToString(h.Sum(nil))
}
