package notify

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
)

// webhook posts a Notice as JSON, signed when it has a key.
type webhook struct {
	url     string
	hmacKey []byte
	client  *http.Client
}

// NewWebhook returns a Sender that posts each Notice as JSON (its json field names) to url with
// client (nil: http.DefaultClient). When hmacKey is not empty, the header
// X-Signature: sha256=<hex HMAC-SHA256 of the body, keyed by hmacKey> signs the exact bytes sent:
// the form a generic-hmac Receiver (this daemon's, or Flux's) checks.
func NewWebhook(url string, hmacKey []byte, client *http.Client) Sender {
	return &webhook{url: url, hmacKey: hmacKey, client: client}
}

// Send posts n.
func (w *webhook) Send(ctx context.Context, n Notice) error {
	body, err := json.Marshal(n)
	if err != nil {
		return &SendError{Err: fmt.Errorf("encoding the notice for %s: %w", redactURL(w.url), err)}
	}
	header := http.Header{"Content-Type": {"application/json"}}
	if len(w.hmacKey) > 0 {
		mac := hmac.New(sha256.New, w.hmacKey)
		mac.Write(body)
		header.Set("X-Signature", "sha256="+hex.EncodeToString(mac.Sum(nil)))
	}
	return post(ctx, w.client, w.url, header, body)
}
