package receiver

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"hash"
	"net/http"
	"os"
	"path/filepath"
	"testing"
)

// webhooks holds the recorded payloads (argoproj/argo-cd util/webhook/testdata), copied into ../testdata.
const webhooks = "../testdata/webhooks"

var testToken = []byte("s3cr3t-token-for-tests")

// mustPayload reads a recorded payload.
func mustPayload(tb testing.TB, name string) []byte {
	tb.Helper()
	b, err := os.ReadFile(filepath.Join(webhooks, name))
	if err != nil {
		tb.Fatalf("read recorded payload: %v", err)
	}
	return b
}

// sign is hex(HMAC(token, body)) with the given hash.
func sign(newHash func() hash.Hash, token, body []byte) string {
	m := hmac.New(newHash, token)
	m.Write(body)
	return hex.EncodeToString(m.Sum(nil))
}

func sha256Hex(token, body []byte) string { return sign(sha256.New, token, body) }

// signed returns the headers a host of type typ sends for event with body signed by token.
func signed(typ string, token, body []byte, event, delivery string) http.Header {
	h := http.Header{}
	h.Set("Content-Type", "application/json")
	switch typ {
	case TypeGitHub:
		h.Set("X-Hub-Signature-256", "sha256="+sha256Hex(token, body))
		h.Set("X-GitHub-Event", event)
		h.Set("X-GitHub-Delivery", delivery)
	case TypeGitea:
		h.Set("X-Gitea-Signature", sha256Hex(token, body))
		h.Set("X-Gitea-Event", event)
		h.Set("X-Gitea-Delivery", delivery)
	case TypeGitLab:
		h.Set("X-Gitlab-Token", string(token))
		h.Set("X-Gitlab-Event", event)
		h.Set("X-Gitlab-Event-UUID", delivery)
	case TypeBitbucket:
		h.Set("X-Hub-Signature", "sha256="+sha256Hex(token, body))
		h.Set("X-Event-Key", event)
		h.Set("X-Request-Id", delivery)
	case TypeGenericHMAC:
		h.Set("X-Signature", "sha256="+sha256Hex(token, body))
		h.Set("X-Event", event)
		h.Set("X-Request-Id", delivery)
	case TypeGeneric:
		h.Set("X-Event", event)
		h.Set("X-Request-Id", delivery)
	}
	return h
}

// mustRefusal asserts err is a *Refusal with status and reason.
func mustRefusal(tb testing.TB, err error, status int, reason string) {
	tb.Helper()
	var r *Refusal
	if !errors.As(err, &r) {
		tb.Fatalf("error = %v (%T), want a *Refusal %d %s", err, err, status, reason)
	}
	if r.Status != status || r.Reason != reason {
		tb.Fatalf("refusal = %d %s (%s), want %d %s", r.Status, r.Reason, r.Message, status, reason)
	}
}

func hexString(b []byte) string { return hex.EncodeToString(b) }
