package receiver

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
)

// fuzzSmallBody is a payload every git-host type reads a repository from.
var fuzzSmallBody = []byte(`{"repository":{"clone_url":"https://h.example/o/r.git","full_name":"o/r"},` +
	`"project":{"git_http_url":"https://h.example/o/r.git"}}`)

// FuzzHandler sends random methods, paths, headers and bodies to an index with one Receiver of
// each type: the handler never panics, answers a valid status, and triggers nothing unless the
// request carries the right secret (generic: the path is the secret).
func FuzzHandler(f *testing.F) {
	token := []byte("fuzz-token")
	ex := MustLoadCDEventExamples(f, "conformance")[0]
	envelope := cloudEventEnvelope(f, ex, ex.raw, nil)
	for i, typ := range fuzzTypes {
		h := signed(typ, token, fuzzSmallBody, "push", "d-1")
		sig := h.Get(fuzzHeaders[typ][0])
		body, ct := fuzzSmallBody, "application/json"
		if typ == TypeCDEvents {
			sig, body, ct = "Bearer "+string(token), envelope, "application/cloudevents+json"
		}
		f.Add("POST", uint8(i), "", sig, "push", "d-1", ct, body)
		f.Add("POST", uint8(i), "", sig+"0", "push", "d-2", ct, body)
	}
	f.Add("GET", uint8(0), "", "", "", "", "", []byte(nil))
	f.Add("POST", uint8(200), "/hook/../x", "sha256=00", "ping", "", "text/plain", []byte("{}"))

	r := newRig(f)
	paths := make([]string, len(fuzzTypes))
	for i, typ := range fuzzTypes {
		paths[i] = r.add(&Entry{Name: "fuzz-" + typ, Type: typ, Token: token,
			Targets: []Target{{Namespace: "apps", Name: typ, RepoURL: "https://h.example/o/r.git"}}})
	}
	f.Fuzz(func(t *testing.T, method string, which uint8, rawPath, sig, event, delivery, contentType string, body []byte) {
		typ, path := "", rawPath
		if int(which) < len(fuzzTypes) {
			typ, path = fuzzTypes[which], paths[which]
		}
		names := fuzzHeaders[TypeGitHub]
		if typ != "" {
			names = fuzzHeaders[typ]
		}
		h := http.Header{}
		h.Set(names[0], sig)
		h.Set(names[1], event)
		h.Set(names[2], delivery)
		h.Set("Content-Type", contentType)
		req := (&http.Request{Method: method, URL: &url.URL{Path: path}, Header: h, RemoteAddr: "192.0.2.1:1234",
			Body: io.NopCloser(bytes.NewReader(body)), ContentLength: int64(len(body))}).WithContext(context.Background())
		before := len(r.trig.got())
		rec := httptest.NewRecorder()
		r.handler.ServeHTTP(rec, req)
		if rec.Code < 200 || rec.Code > 599 {
			t.Fatalf("status %d", rec.Code)
		}
		calls := r.trig.got()[before:]
		if len(calls) == 0 {
			return
		}
		if rec.Code != http.StatusAccepted || method != http.MethodPost || typ == "" {
			t.Fatalf("triggered %v with %d for %s %q", calls, rec.Code, method, path)
		}
		if !rightSecret(typ, sig, token, body) && (typ != TypeCDEvents || !rightBearer(sig, token)) &&
			typ != TypeGeneric {
			t.Fatalf("%s delivery triggered %v without the right secret: %q", typ, calls, sig)
		}
	})
}

// rightBearer checks an Authorization header the obvious way.
func rightBearer(auth string, token []byte) bool {
	scheme, got, ok := strings.Cut(strings.TrimSpace(auth), " ")
	return ok && strings.EqualFold(scheme, "bearer") && strings.TrimSpace(got) == string(token)
}
