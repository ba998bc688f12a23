package webhook

import (
	"bytes"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/configbutler/gitops-reverser/metrics"
)

// signedRequest is a request to a replica's CorrelationsPath: body signed under keys at ts.
func signedRequest(t *testing.T, addr string, keys [][]byte, ts time.Time, body []byte) *http.Request {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, "https://"+addr+CorrelationsPath, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	stamp := strconv.FormatInt(ts.Unix(), 10)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(headerTimestamp, stamp)
	req.Header.Set(headerSignature, signatureHeader(keys, stamp, body))
	return req
}

// peerClient trusts certs' CA for the Service's name, as a replica does.
func peerClient(t *testing.T, certs staticCerts) *http.Client {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(certs.ca)
	tr := &http.Transport{ForceAttemptHTTP2: true,
		TLSClientConfig: &tls.Config{RootCAs: pool, ServerName: peerService, MinVersion: tls.VersionTLS12}}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 30 * time.Second}
}

func TestCorrelationsRefusesWhatIsNotFromAPeer(t *testing.T) {
	certs := newStaticCerts(t, peerService)
	keys, err := (&keyring{certs: func() CertSource { return certs }}).keys()
	if err != nil {
		t.Fatal(err)
	}
	other := sha256.Sum256([]byte("a key outsiders guess"))
	record := func(t *testing.T) []byte {
		b, err := encodeCorrelation(Correlation{Op: "UPDATE", Kind: "ConfigMap", Namespace: "team-a", Name: "app",
			Hash: "0123abcd", Author: aliceSig, Groups: alice.Groups})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	signedBody := func(body string) func(*testing.T) []byte { return func(*testing.T) []byte { return []byte(body) } }
	cases := []struct {
		name    string
		body    func(*testing.T) []byte
		keys    [][]byte
		skew    time.Duration               // added to now for the timestamp
		edit    func(*http.Request, []byte) // changes the request after it was signed
		twice   bool                        // the same request is sent again, and judged
		want    int
		result  string
		message string
		stored  int
	}{
		{name: "a signed record is imported", want: http.StatusNoContent, result: metrics.ReceivedImported, stored: 1},
		{name: "a signature under another key", keys: [][]byte{other[:]},
			want: http.StatusUnauthorized, result: metrics.ReceivedUnauthorized, message: "no signature matches"},
		{name: "no signature", edit: func(r *http.Request, _ []byte) { r.Header.Del(headerSignature) },
			want: http.StatusUnauthorized, result: metrics.ReceivedUnauthorized, message: "no " + headerSignature},
		{name: "a signature that is not hex", edit: func(r *http.Request, _ []byte) { r.Header.Set(headerSignature, "sha256=zz") },
			want: http.StatusUnauthorized, result: metrics.ReceivedUnauthorized, message: "not sha256="},
		{name: "more signatures than keys", keys: [][]byte{other[:], other[:], keys[0]},
			want: http.StatusUnauthorized, result: metrics.ReceivedUnauthorized, message: "at most 2"},
		{name: "a body changed after signing", edit: func(r *http.Request, body []byte) {
			changed := bytes.Replace(body, []byte(`"alice"`), []byte(`"mallory"`), 1)
			r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(changed)), int64(len(changed))
		}, want: http.StatusUnauthorized, result: metrics.ReceivedUnauthorized, message: "no signature matches"},
		{name: "a timestamp two minutes old", skew: -2 * time.Minute,
			want: http.StatusUnauthorized, result: metrics.ReceivedStale, message: "at most 1m0s"},
		{name: "a timestamp two minutes ahead", skew: 2 * time.Minute,
			want: http.StatusUnauthorized, result: metrics.ReceivedStale, message: "at most 1m0s"},
		{name: "no timestamp", edit: func(r *http.Request, _ []byte) { r.Header.Del(headerTimestamp) },
			want: http.StatusBadRequest, result: metrics.ReceivedMalformed, message: "Unix seconds"},
		{name: "a replayed request", twice: true,
			want: http.StatusUnauthorized, result: metrics.ReceivedReplayed, message: "replay", stored: 1},
		{name: "a body over the limit", body: signedBody(strings.Repeat(" ", maxCorrelationBytes+1)),
			want: http.StatusRequestEntityTooLarge, result: metrics.ReceivedTooLarge, message: "larger than"},
		{name: "a body over the limit without a length", body: signedBody(strings.Repeat(" ", maxCorrelationBytes+1)),
			edit: func(r *http.Request, body []byte) {
				r.Body, r.ContentLength = io.NopCloser(io.MultiReader(bytes.NewReader(body))), -1
			}, want: http.StatusRequestEntityTooLarge, result: metrics.ReceivedTooLarge, message: "larger than"},
		{name: "a signed body that is not a record", body: signedBody(`{"op":`),
			want: http.StatusBadRequest, result: metrics.ReceivedMalformed, message: "decode record"},
		{name: "a signed record without a nonce", body: signedBody(`{"op":"UPDATE","kind":"ConfigMap","name":"app","hash":"ab","author":{"name":"alice"}}`),
			want: http.StatusBadRequest, result: metrics.ReceivedMalformed, message: "nonce"},
		{name: "a signed DELETE with a hash", body: signedBody(`{"nonce":"00112233445566778899aabbccddeeff","op":"DELETE","kind":"ConfigMap","name":"app","hash":"ab","author":{"name":"alice"}}`),
			want: http.StatusBadRequest, result: metrics.ReceivedMalformed, message: "none for DELETE"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := startReplica(t, certs)
			client := peerClient(t, certs)
			body := record(t)
			if tc.body != nil {
				body = tc.body(t)
			}
			sign := keys
			if tc.keys != nil {
				sign = tc.keys
			}
			send := func() *http.Response {
				req := signedRequest(t, b.addr, sign, time.Now().Add(tc.skew), body)
				if tc.edit != nil {
					tc.edit(req, body)
				}
				resp, err := client.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				return resp
			}
			resp := send()
			if tc.twice {
				_ = resp.Body.Close()
				if resp.StatusCode != http.StatusNoContent {
					t.Fatalf("first send answered %d", resp.StatusCode)
				}
				resp = send()
			}
			msg, _ := io.ReadAll(resp.Body)
			_ = resp.Body.Close()
			if resp.StatusCode != tc.want || !strings.Contains(string(msg), tc.message) {
				t.Errorf("answered %d %q; want %d with %q", resp.StatusCode, strings.TrimSpace(string(msg)), tc.want, tc.message)
			}
			if n := b.received(tc.result); n != 1 {
				t.Errorf("received{result=%s} = %v; want 1", tc.result, n)
			}
			if b.store.Len() != tc.stored {
				t.Errorf("store holds %d records; want %d", b.store.Len(), tc.stored)
			}
		})
	}
}

// FuzzCorrelationsRequest feeds random headers and bodies to the checks of CorrelationsPath: they
// never panic, never verify a signature made under another key, and a body that decodes is a
// record the Store can key.
func FuzzCorrelationsRequest(f *testing.F) {
	key := sha256.Sum256([]byte("fuzz key"))
	keys := [][]byte{key[:]}
	good, err := encodeCorrelation(Correlation{Op: "UPDATE", Kind: "ConfigMap", Namespace: "team-a", Name: "app",
		Hash: "ab", Author: aliceSig})
	if err != nil {
		f.Fatal(err)
	}
	f.Add("1761134400", signatureHeader(keys, "1761134400", good), good)
	f.Add("-1", "sha256=00,sha256=", []byte(`{"nonce":"00112233445566778899aabbccddeeff","op":"DELETE"}`))
	f.Add("", "", []byte(`{"op":`))
	f.Fuzz(func(t *testing.T, ts, sig string, body []byte) {
		_, _ = checkTimestamp(ts, time.Now())
		other := sha256.Sum256([]byte("another key"))
		if verifySignature(sig, [][]byte{other[:]}, ts, body) == nil && sig == signatureHeader(keys, ts, body) {
			t.Fatal("a signature under one key verified under another")
		}
		c, _, err := decodeCorrelation(body)
		if err == nil && (c.Kind == "" || c.Name == "" || c.Author.Name == "" || (c.Op == "DELETE") != (c.Hash == "")) {
			t.Fatalf("decoded an incomplete record %+v", c)
		}
	})
}
