package webhook

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/configbutler/gitops-reverser/httpserver"
	"github.com/configbutler/gitops-reverser/metrics"
)

// CorrelationsPath is where a replica receives the admission records of its peers, on the same
// TLS server as AdmissionPath.
const CorrelationsPath = "/correlations"

// DefaultForwardTimeout is how long an admission waits, at most, for its record to reach every
// peer: well inside the registration's timeout, and short enough that a peer that is down costs
// each admission little.
const DefaultForwardTimeout = 250 * time.Millisecond

// A failing peer, or a sender refused, is logged at most once per peerLogInterval; at most
// peerLogKeys of them are remembered, as peers come and go.
const (
	peerLogInterval = time.Minute
	peerLogKeys     = 1024
)

// PeersConfig configures Peers.
type PeersConfig struct {
	// Store receives the records peers send.
	Store *Store
	// StoreFor, if set, is the store of the records of RemoteCluster cluster ("namespace/name"),
	// nil for one this replica keeps none of; records of remote clusters are dropped without it.
	StoreFor func(cluster string) *Store
	// Addresses gives the host:port of the other live replicas' webhook servers; it is asked on
	// every admission. nil, or no addresses, forwards nothing and costs nothing.
	Addresses func() []string
	// Certs gives the webhook's own certificates; it is asked on every use, so it may return nil
	// until they are loaded (forwards then fail and requests are refused with 503). Their CA bundle
	// verifies the peers; their private key is the secret the requests are signed with.
	Certs func() CertSource
	// ServerName is the name a peer's certificate is verified for: the webhook Service's
	// <service>.<namespace>.svc, which every replica's serving certificate holds.
	ServerName string
	// Timeout bounds how long an admission waits for all its forwards; default
	// DefaultForwardTimeout.
	Timeout time.Duration
	Metrics *metrics.Attribution
	Log     *slog.Logger
}

// Peers hands admission records between replicas. With shards, the replica the apiserver calls
// for an admission is not always the one whose watch sees the change, so the handler that records
// a change forwards the record to every peer (Forward) before it answers the admission: the watch
// event follows the write, which follows the answer, so the peer has the record before its watch
// can ask for it. Peers is also the handler of CorrelationsPath, which verifies a peer's request
// and imports its record into the Store. Safe for concurrent use.
type Peers struct {
	store      *Store
	storeFor   func(cluster string) *Store
	addresses  func() []string
	certs      func() CertSource
	serverName string
	timeout    time.Duration
	log        *slog.Logger

	keys    keyring
	seen    *nonces
	roots   rootPool
	client  *http.Client
	limiter *httpserver.Throttle // the log lines of each peer, or each sender refused

	forwarded map[string]prometheus.Counter
	received  map[string]prometheus.Counter
	duration  prometheus.Histogram

	mu     sync.RWMutex // forwards hold it for reading; Close for writing
	closed bool
}

// NewPeers checks cfg and builds Peers; it starts nothing and does no I/O. Close it once the
// server whose handler calls Forward has stopped.
func NewPeers(cfg PeersConfig) (*Peers, error) {
	if cfg.Store == nil || cfg.Certs == nil || cfg.ServerName == "" {
		return nil, errors.New("webhook peers: store, certificates and server name are required")
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultForwardTimeout
	}
	if cfg.Metrics == nil {
		cfg.Metrics = metrics.New().Attribution
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.StoreFor == nil {
		cfg.StoreFor = func(string) *Store { return nil }
	}
	p := &Peers{
		store: cfg.Store, storeFor: cfg.StoreFor, addresses: cfg.Addresses, certs: cfg.Certs, serverName: cfg.ServerName,
		timeout: cfg.Timeout, log: cfg.Log,
		keys: keyring{certs: cfg.Certs}, seen: newNonces(replayMemory),
		limiter:   httpserver.NewThrottle(peerLogInterval, peerLogKeys),
		forwarded: map[string]prometheus.Counter{}, received: map[string]prometheus.Counter{},
		duration: cfg.Metrics.ForwardDuration,
	}
	for _, r := range metrics.ForwardResults {
		p.forwarded[r] = cfg.Metrics.Forwarded.WithLabelValues(r)
	}
	for _, r := range metrics.ReceivedResults {
		p.received[r] = cfg.Metrics.Received.WithLabelValues(r)
	}
	p.client = &http.Client{Transport: &http.Transport{
		Proxy:             nil, // replicas talk directly, whatever the environment says
		DialContext:       (&net.Dialer{KeepAlive: 30 * time.Second}).DialContext,
		ForceAttemptHTTP2: true, // one multiplexed connection per peer
		// The peers' roots are the webhook's own CA bundle as it is at each handshake, so a rotated
		// CA applies without a new client; verifyPeer does what the standard verification would.
		TLSClientConfig: &tls.Config{MinVersion: tls.VersionTLS12, ServerName: cfg.ServerName,
			InsecureSkipVerify: true, VerifyConnection: p.verifyPeer}, //nolint:gosec // verified in verifyPeer
		MaxIdleConnsPerHost: 4,
		IdleConnTimeout:     90 * time.Second,
		// A peer that vanished without closing its connection is noticed within seconds, not at
		// the next admission's timeout after the next.
		HTTP2: &http.HTTP2Config{SendPingTimeout: 10 * time.Second, PingTimeout: 2 * time.Second},
	}}
	return p, nil
}

// WithPeers has the admission handler forward every record it makes to p's peers before it
// answers. nil forwards nothing.
// WithCluster has the handler take the reviews of RemoteCluster cluster ("namespace/name"): its
// records say so when they are handed to peers, which keep them for that cluster.
func WithCluster(cluster string) AdmissionOption {
	return func(h *admissionHandler) { h.cluster = cluster }
}

func WithPeers(p *Peers) AdmissionOption {
	return func(h *admissionHandler) { h.peers = p }
}

// Forward sends c to every peer at once and returns when all have answered or the timeout has
// passed, whichever is first. It never fails: a peer that is down, slow or refuses is counted and
// logged (at most once a minute per peer), and its watch credits the change to the bot. The
// forwards outlive ctx's cancellation (an apiserver that gave up on the review may still persist
// the change), never the timeout. After Close it does nothing.
func (p *Peers) Forward(ctx context.Context, c Correlation) {
	if p == nil || p.addresses == nil {
		return
	}
	addrs := p.addresses()
	if len(addrs) == 0 {
		return
	}
	p.mu.RLock()
	defer p.mu.RUnlock()
	if p.closed {
		return
	}
	start := time.Now()
	defer func() { p.duration.Observe(time.Since(start).Seconds()) }()
	req, err := p.signedRequest(c)
	if err != nil {
		for _, a := range addrs {
			p.forwardFailed(a, metrics.ForwardFailed, err)
		}
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), p.timeout)
	defer cancel()
	var wg sync.WaitGroup
	for _, a := range addrs {
		wg.Go(func() { p.send(ctx, a, req) })
	}
	wg.Wait()
}

// Close waits for the forwards in flight, makes later ones do nothing, and closes the idle
// connections to the peers. Call it once the server whose handler calls Forward has stopped.
func (p *Peers) Close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	p.client.CloseIdleConnections()
}

// signed is a record ready to send: its body and headers, the same for every peer.
type signed struct {
	body                 []byte
	timestamp, signature string
}

func (p *Peers) signedRequest(c Correlation) (signed, error) {
	keys, err := p.keys.keys()
	if err != nil {
		return signed{}, err
	}
	body, err := encodeCorrelation(c)
	if err != nil {
		return signed{}, fmt.Errorf("encode record: %w", err)
	}
	ts := strconv.FormatInt(time.Now().Unix(), 10)
	return signed{body: body, timestamp: ts, signature: signatureHeader(keys, ts, body)}, nil
}

// send posts one signed record to the peer at addr and counts the result.
func (p *Peers) send(ctx context.Context, addr string, s signed) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "https://"+addr+CorrelationsPath, bytes.NewReader(s.body))
	if err != nil {
		p.forwardFailed(addr, metrics.ForwardFailed, err)
		return
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(headerTimestamp, s.timestamp)
	req.Header.Set(headerSignature, s.signature)
	resp, err := p.client.Do(req)
	if err != nil {
		result := metrics.ForwardFailed
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			result = metrics.ForwardTimeout
		}
		p.forwardFailed(addr, result, err)
		return
	}
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10)) // drained, the connection is reused
	_ = resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		p.forwardFailed(addr, metrics.ForwardRefused,
			fmt.Errorf("peer answered %s: %s", resp.Status, strings.TrimSpace(string(msg))))
		return
	}
	p.forwarded[metrics.ForwardDelivered].Inc()
}

// forwardFailed counts a forward that did not arrive and logs it, at most once a minute per peer.
func (p *Peers) forwardFailed(addr, result string, err error) {
	p.forwarded[result].Inc()
	if missed, ok := p.limiter.Admit(addr, time.Now()); ok {
		p.log.Warn("admission record not handed to a peer replica; its watch credits the change to the bot",
			"peer", addr, "result", result, "err", err, "unlogged_since_last", missed)
	}
}

// verifyPeer checks a peer's certificate chain against the webhook's own CA bundle, for
// ServerName, as crypto/tls would with fixed roots.
func (p *Peers) verifyPeer(cs tls.ConnectionState) error {
	if len(cs.PeerCertificates) == 0 {
		return errors.New("peer sent no certificate")
	}
	var bundle []byte
	if src := p.certs(); src != nil {
		bundle = src.CABundle()
	}
	roots, err := p.roots.pool(bundle)
	if err != nil {
		return err
	}
	opts := x509.VerifyOptions{Roots: roots, DNSName: p.serverName, Intermediates: x509.NewCertPool(),
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	for _, c := range cs.PeerCertificates[1:] {
		opts.Intermediates.AddCert(c)
	}
	if _, err := cs.PeerCertificates[0].Verify(opts); err != nil {
		return fmt.Errorf("verify peer certificate against the webhook's CA bundle: %w", err)
	}
	return nil
}

// rootPool keeps the pool parsed from the last CA bundle, so a handshake parses it only after it
// changed.
type rootPool struct {
	mu     sync.Mutex
	bundle []byte
	roots  *x509.CertPool
}

func (r *rootPool) pool(bundle []byte) (*x509.CertPool, error) {
	if len(bundle) == 0 {
		return nil, errors.New("no webhook CA bundle loaded yet")
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.roots == nil || !bytes.Equal(bundle, r.bundle) {
		roots := x509.NewCertPool()
		if !roots.AppendCertsFromPEM(bundle) {
			return nil, errors.New("the webhook CA bundle holds no certificate")
		}
		r.bundle, r.roots = bytes.Clone(bundle), roots
	}
	return r.roots, nil
}
