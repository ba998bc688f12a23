package notify_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/configbutler/gitops-reverser/notify"
	"github.com/configbutler/gitops-reverser/receiver"
)

func TestWebhook(t *testing.T) {
	key := []byte("a shared key")
	cases := []struct {
		name  string
		key   []byte
		check func(t *testing.T, req channelRequest)
	}{
		{"a signed body passes this daemon's own generic-hmac Receiver", key, func(t *testing.T, req channelRequest) {
			if _, err := receiver.Verify(receiver.TypeGenericHMAC, key, req.header, req.body, nil); err != nil {
				t.Errorf("the generic-hmac Receiver refuses it: %v", err)
			}
			if _, err := receiver.Verify(receiver.TypeGenericHMAC, []byte("another key"), req.header, req.body, nil); err == nil {
				t.Error("the Receiver accepts it with another key too: the check proves nothing")
			}
		}},
		{"the signature is sha256= and the HMAC of the exact body", key, func(t *testing.T, req channelRequest) {
			mac := hmac.New(sha256.New, key)
			mac.Write(req.body)
			if got, want := req.header.Get("X-Signature"), "sha256="+hex.EncodeToString(mac.Sum(nil)); got != want {
				t.Errorf("X-Signature %q, want %q", got, want)
			}
		}},
		{"without a key the body is not signed", nil, func(t *testing.T, req channelRequest) {
			if sig, ok := req.header["X-Signature"]; ok {
				t.Errorf("X-Signature %q without a key", sig)
			}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv, got := MustChannel(t, http.StatusNoContent, "")
			n := sampleNotice()
			if err := notify.NewWebhook(srv.URL+secretPath, tc.key, srv.Client()).Send(t.Context(), n); err != nil {
				t.Fatalf("Send = %v", err)
			}
			req := MustReceive(t, got)
			if ct := req.header.Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type %q", ct)
			}
			var back notify.Notice
			if err := json.Unmarshal(req.body, &back); err != nil {
				t.Fatalf("the body is not JSON: %v", err)
			}
			if !reflect.DeepEqual(back, n) {
				t.Errorf("the body decodes to\n%+v\nwant\n%+v", back, n)
			}
			if !strings.Contains(string(req.body), `"destination":"prod"`) {
				t.Errorf("the body does not use the Notice's JSON names: %s", req.body)
			}
			tc.check(t, req)
		})
	}
}
