package receiver

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"hash"
	"net/http"
	"strings"
	"testing"
)

// fuzzTypes are the types FuzzVerify picks from; cdevents is refused here but must not panic.
var fuzzTypes = []string{TypeGitHub, TypeGitea, TypeGitLab, TypeBitbucket, TypeGenericHMAC, TypeGeneric, TypeCDEvents}

// fuzzHeaders names, per type, the headers for the signature, the event and the delivery id.
var fuzzHeaders = map[string][3]string{
	TypeGitHub:      {"X-Hub-Signature-256", "X-GitHub-Event", "X-GitHub-Delivery"},
	TypeGitea:       {"X-Gitea-Signature", "X-Gitea-Event", "X-Gitea-Delivery"},
	TypeGitLab:      {"X-Gitlab-Token", "X-Gitlab-Event", "X-Gitlab-Event-UUID"},
	TypeBitbucket:   {"X-Hub-Signature", "X-Event-Key", "X-Request-Id"},
	TypeGenericHMAC: {"X-Signature", "X-Event", "X-Request-Id"},
	TypeGeneric:     {"X-Signature", "X-Event", "X-Request-Id"},
	TypeCDEvents:    {"Authorization", "Ce-Type", "Ce-Id"},
}

// FuzzVerify feeds random headers and bodies to every type: Verify never panics, answers only with
// a *Refusal, and never verifies a delivery whose signature or token is not the right secret's.
func FuzzVerify(f *testing.F) {
	token := []byte("fuzz-token")
	small := []byte(`{"repository":{"clone_url":"https://h.example/o/r.git","full_name":"o/r"},` +
		`"project":{"git_http_url":"https://h.example/o/r.git"}}`)
	for i, typ := range fuzzTypes {
		h := signed(typ, token, small, "push", "d-1")
		sig := h.Get(fuzzHeaders[typ][0])
		f.Add(uint8(i), sig, "push", "d-1", "application/json", small)
		f.Add(uint8(i), sig, "ping", "", "", []byte(`{}`))
	}
	f.Add(uint8(0), "sha256=00", "push", "", "application/x-www-form-urlencoded", []byte("payload=%7B%7D"))
	f.Add(uint8(3), "sha256=", "diagnostics:ping", "x", "", []byte(`{"test":true}`))
	f.Add(uint8(4), "md5=00", "", "", "", []byte(``))

	f.Fuzz(func(t *testing.T, typIndex uint8, sig, event, delivery, contentType string, body []byte) {
		typ := fuzzTypes[int(typIndex)%len(fuzzTypes)]
		names := fuzzHeaders[typ]
		h := http.Header{}
		h.Set(names[0], sig)
		h.Set(names[1], event)
		h.Set(names[2], delivery)
		h.Set("Content-Type", contentType)

		ev, err := Verify(typ, token, h, body, nil)
		if err != nil {
			var r *Refusal
			if !errors.As(err, &r) || r.Reason == "" || r.Status < 200 || r.Status > 599 {
				t.Fatalf("Verify error %v (%T) is not a *Refusal with a reason and a status", err, err)
			}
		} else {
			if ev.Type != typ {
				t.Fatalf("event type %q, want %q", ev.Type, typ)
			}
			for _, r := range ev.Repository {
				if r == "" {
					t.Fatalf("an empty repository form in %q", ev.Repository)
				}
			}
			if typ != TypeGeneric && !rightSecret(typ, sig, token, body) {
				t.Fatalf("%s delivery verified without the right secret: %q", typ, sig)
			}
		}
		if typ == TypeGeneric {
			return
		}
		if _, err := Verify(typ, []byte("another-token"), h, body, nil); err == nil {
			t.Fatalf("%s delivery verified with another token", typ)
		}
	})
}

// rightSecret checks a signature or token the slow, obvious way, apart from Verify's code.
func rightSecret(typ, sig string, token, body []byte) bool {
	sig = strings.TrimSpace(sig)
	mac := func(newHash func() hash.Hash, hexSig string) bool {
		got, err := hex.DecodeString(hexSig)
		m := hmac.New(newHash, token)
		m.Write(body)
		return err == nil && bytes.Equal(got, m.Sum(nil))
	}
	switch typ {
	case TypeGitHub, TypeBitbucket:
		return strings.HasPrefix(sig, "sha256=") && mac(sha256.New, sig[len("sha256="):])
	case TypeGitea:
		return mac(sha256.New, sig)
	case TypeGitLab:
		return sig == string(token)
	case TypeGenericHMAC:
		alg, hexSig, _ := strings.Cut(sig, "=")
		newHash, ok := hmacAlgorithms[strings.ToLower(alg)]
		return ok && mac(newHash, hexSig)
	}
	return false
}
