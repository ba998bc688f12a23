package webhook

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jellydator/ttlcache/v3"

	"github.com/configbutler/gitops-reverser/gitops"
)

// The wire format of a forwarded admission record, version 1.
//
//	POST /correlations HTTP/1.1 or HTTP/2, over TLS to the peer's webhook port
//	Content-Type: application/json
//	X-Gitops-Reverser-Timestamp: 1761134400                  (Unix seconds, the sender's clock)
//	X-Gitops-Reverser-Signature: sha256=<64 hex>[,sha256=<64 hex>]
//
//	{"nonce":"<32 hex>","op":"UPDATE","group":"apps","kind":"Deployment","namespace":"team-a",
//	 "name":"web","hash":"<sanitize.Hash>","author":{"name":"alice","email":"alice@…"},
//	 "groups":["devs"],"ageMs":3}
//
// Each signature is hex(HMAC-SHA256(key, timestamp + "\n" + body)) over the exact bytes sent. The
// key is SHA-256(keyLabel || PKCS#8 DER of the serving certificate's private key): every replica
// serves the same certificate (one Secret, self-managed or mounted from cert-manager) and nobody
// else holds its key. A sender that has seen the certificate change signs with the previous key
// too, and a receiver accepts either of its own two: while a rotated certificate reaches the
// replicas one by one (a self-managed one within the hour, a mounted one within the kubelet's
// sync), they still share a key.
//
// The receiver answers 204 once the record is stored (or dropped as too old), 413 for a body over
// maxCorrelationBytes, 400 for a request that is not a record, 401 for a missing or wrong
// signature, a timestamp more than maxClockSkew away from its own clock, or a nonce it has already
// seen within that window (a replay), and 503 while it has no certificate to derive the key from.
// Every error answer has a plain-text message.
const (
	headerTimestamp = "X-Gitops-Reverser-Timestamp"
	headerSignature = "X-Gitops-Reverser-Signature"
	signaturePrefix = "sha256="
	keyLabel        = "gitops-reverser correlations"

	// maxCorrelationBytes caps a request body: a record is a few hundred bytes, most of it the
	// user's groups.
	maxCorrelationBytes = 256 << 10
	// maxClockSkew is how far a request's timestamp may be from the receiver's clock.
	maxClockSkew = 60 * time.Second
	// maxSignatures is how many signatures a request may carry: the current and previous key.
	maxSignatures = 2
	// replayMemory bounds the nonces remembered: more than ~270 records a second for 2×maxClockSkew.
	// When full, the oldest is forgotten first.
	replayMemory = 1 << 16
)

// wireCorrelation is the body of a forwarded record.
type wireCorrelation struct {
	Nonce     string     `json:"nonce"`
	Op        string     `json:"op"`
	Group     string     `json:"group,omitempty"`
	Kind      string     `json:"kind"`
	Namespace string     `json:"namespace,omitempty"`
	Name      string     `json:"name"`
	Hash      string     `json:"hash,omitempty"`
	Author    wireAuthor `json:"author"`
	Groups    []string   `json:"groups,omitempty"`
	AgeMillis int64      `json:"ageMs"`
	Cluster   string     `json:"cluster,omitempty"` // the RemoteCluster of the review; absent for the daemon's own
}

type wireAuthor struct {
	Name  string `json:"name"`
	Email string `json:"email,omitempty"`
}

// encodeCorrelation renders c as a request body with a fresh nonce, so two sends of the same
// record are two requests, not a replay.
func encodeCorrelation(c Correlation) ([]byte, error) {
	var nonce [16]byte
	_, _ = rand.Read(nonce[:]) // crypto/rand never fails on the platforms Go supports
	return json.Marshal(wireCorrelation{Nonce: hex.EncodeToString(nonce[:]), Op: c.Op, Group: c.Group, Kind: c.Kind,
		Namespace: c.Namespace, Name: c.Name, Hash: c.Hash, Author: wireAuthor(c.Author), Groups: c.Groups,
		AgeMillis: c.Age.Milliseconds(), Cluster: c.Cluster})
}

// decodeCorrelation parses and checks an authenticated body; it returns the record and its nonce.
func decodeCorrelation(body []byte) (Correlation, [16]byte, error) {
	var w wireCorrelation
	var nonce [16]byte
	if err := json.Unmarshal(body, &w); err != nil {
		return Correlation{}, nonce, fmt.Errorf("decode record: %w", err)
	}
	if n, err := hex.Decode(nonce[:], []byte(w.Nonce)); err != nil || n != len(nonce) || len(w.Nonce) != 2*len(nonce) {
		return Correlation{}, nonce, errors.New("record needs a nonce of 32 hex digits")
	}
	switch {
	case !slices.Contains(changingOperations, w.Op):
		return Correlation{}, nonce, fmt.Errorf("record has operation %q; want CREATE, UPDATE or DELETE", w.Op)
	case w.Kind == "" || w.Name == "":
		return Correlation{}, nonce, errors.New("record needs a kind and a name")
	case (w.Op == "DELETE") != (w.Hash == ""):
		return Correlation{}, nonce, errors.New("record needs a hash for CREATE and UPDATE, and none for DELETE")
	case w.Author.Name == "":
		return Correlation{}, nonce, errors.New("record names no author")
	case w.AgeMillis < 0:
		return Correlation{}, nonce, errors.New("record has a negative age")
	}
	return Correlation{Op: w.Op, Group: w.Group, Kind: w.Kind, Namespace: w.Namespace, Name: w.Name, Hash: w.Hash,
		Author: gitops.Signature(w.Author), Groups: w.Groups, Age: time.Duration(w.AgeMillis) * time.Millisecond, Cluster: w.Cluster}, nonce, nil
}

// signature is the MAC of one request under key.
func signature(key []byte, timestamp string, body []byte) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(timestamp))
	m.Write([]byte{'\n'})
	m.Write(body)
	return m.Sum(nil)
}

// signatureHeader is the value of headerSignature for body under each key.
func signatureHeader(keys [][]byte, timestamp string, body []byte) string {
	var b strings.Builder
	for i, k := range keys {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(signaturePrefix)
		b.WriteString(hex.EncodeToString(signature(k, timestamp, body)))
	}
	return b.String()
}

// verifySignature reports whether one of the header's signatures is body's under one of keys;
// every comparison takes constant time.
func verifySignature(header string, keys [][]byte, timestamp string, body []byte) error {
	if header == "" {
		return errors.New("no " + headerSignature + " header")
	}
	sigs := strings.Split(header, ",")
	if len(sigs) > maxSignatures {
		return fmt.Errorf("%d signatures; at most %d are read", len(sigs), maxSignatures)
	}
	ok := false
	for _, sig := range sigs {
		h, found := strings.CutPrefix(strings.TrimSpace(sig), signaturePrefix)
		got, err := hex.DecodeString(h)
		if !found || err != nil || len(got) != sha256.Size {
			return errors.New("a signature is not " + signaturePrefix + "<64 hex digits>")
		}
		for _, k := range keys {
			ok = hmac.Equal(got, signature(k, timestamp, body)) || ok
		}
	}
	if !ok {
		return errors.New("no signature matches this replica's key (a peer with another serving certificate, or not a peer)")
	}
	return nil
}

// checkTimestamp parses the timestamp header and refuses one more than maxClockSkew from now.
// The bool says whether the header was there and well-formed at all.
func checkTimestamp(header string, now time.Time) (bool, error) {
	sec, err := strconv.ParseInt(header, 10, 64)
	if err != nil {
		return false, errors.New(headerTimestamp + " header must be Unix seconds")
	}
	switch skew := now.Sub(time.Unix(sec, 0)); {
	case skew > maxClockSkew:
		return true, fmt.Errorf("timestamp is %s behind this replica's clock; at most %s is accepted", skew.Round(time.Second), maxClockSkew)
	case skew < -maxClockSkew:
		return true, fmt.Errorf("timestamp is %s ahead of this replica's clock; at most %s is accepted", (-skew).Round(time.Second), maxClockSkew)
	}
	return true, nil
}

// keyring derives the signing keys from the webhook's serving certificate, asked on every use so
// a rotated certificate applies at once, and remembers the key of the certificate before.
type keyring struct {
	certs func() CertSource

	mu        sync.Mutex
	from      *tls.Certificate // the certificate cur was derived from
	cur, prev []byte
}

var errNoCertificate = errors.New("no webhook certificate loaded yet")

// keys returns the current key first, then the previous one if this process has seen one.
func (k *keyring) keys() ([][]byte, error) {
	var src CertSource
	if k.certs != nil {
		src = k.certs()
	}
	if src == nil {
		return nil, errNoCertificate
	}
	cert, err := src.GetCertificate(nil)
	if err != nil {
		return nil, fmt.Errorf("webhook certificate: %w", err)
	}
	if cert == nil || cert.PrivateKey == nil {
		return nil, errNoCertificate
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if cert != k.from {
		der, err := x509.MarshalPKCS8PrivateKey(cert.PrivateKey)
		if err != nil {
			return nil, fmt.Errorf("encode the webhook certificate's key: %w", err)
		}
		sum := sha256.Sum256(append([]byte(keyLabel), der...))
		if !bytes.Equal(sum[:], k.cur) {
			k.prev, k.cur = k.cur, sum[:]
		}
		k.from = cert
	}
	if k.prev == nil {
		return [][]byte{k.cur}, nil
	}
	return [][]byte{k.cur, k.prev}, nil
}

// nonces remembers the nonces of the requests received within the replay window, so a request
// is accepted once; at most limit of them, the oldest forgotten first. Each is kept for twice the
// allowed skew: a request whose timestamp was maxClockSkew ahead stays acceptable that long.
// Expiry is judged by the clock add is given, as Decisions does. Safe for concurrent use.
type nonces struct {
	mu      sync.Mutex
	expires *ttlcache.Cache[[16]byte, time.Time]
}

func newNonces(limit int) *nonces {
	return &nonces{expires: ttlcache.New(ttlcache.WithCapacity[[16]byte, time.Time](uint64(limit)),
		ttlcache.WithDisableTouchOnHit[[16]byte, time.Time]())}
}

// add remembers n at now and reports whether it is new (or forgotten since).
func (s *nonces) add(n [16]byte, now time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if item := s.expires.Get(n); item != nil && !now.After(item.Value()) {
		return false
	}
	s.expires.Set(n, now.Add(2*maxClockSkew), ttlcache.NoTTL)
	return true
}

// len is the number of nonces remembered.
func (s *nonces) len() int { return s.expires.Len() }
