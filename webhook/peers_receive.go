package webhook

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/configbutler/gitops-reverser/httpserver"
	"github.com/configbutler/gitops-reverser/metrics"
)

// ServeHTTP is the handler of CorrelationsPath: it verifies a peer's request (size, timestamp,
// signature, nonce; the wire format is described in peers_wire.go) and imports its record into
// the Store. A refused request is counted, and logged at most once a minute per remote address.
func (p *Peers) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	result, status, err := p.receive(w, r)
	p.received[result].Inc()
	if err == nil {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	http.Error(w, err.Error(), status)
	if status != http.StatusServiceUnavailable {
		host, _, _ := net.SplitHostPort(r.RemoteAddr)
		if missed, ok := p.limiter.Admit("from "+host, time.Now()); ok {
			p.log.Warn("refused an admission record from a peer", "remote", host, "result", result, "status", status,
				"err", err, "unlogged_since_last", missed)
		}
	}
}

// receive checks and imports one request; it returns the correlations_received_total result and,
// when refused, the status and the message to answer with.
func (p *Peers) receive(w http.ResponseWriter, r *http.Request) (string, int, error) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		return metrics.ReceivedMalformed, http.StatusMethodNotAllowed, errors.New("records are POSTed")
	}
	var buf bytes.Buffer
	if err := httpserver.ReadBody(w, r, &buf, maxCorrelationBytes); errors.Is(err, httpserver.ErrBodyTooLarge) {
		return metrics.ReceivedTooLarge, http.StatusRequestEntityTooLarge, fmt.Errorf("record is larger than %d bytes", maxCorrelationBytes)
	} else if err != nil {
		return metrics.ReceivedMalformed, http.StatusBadRequest, fmt.Errorf("read record: %w", err)
	}
	body := buf.Bytes()
	now := time.Now()
	ts := r.Header.Get(headerTimestamp)
	if wellFormed, err := checkTimestamp(ts, now); !wellFormed {
		return metrics.ReceivedMalformed, http.StatusBadRequest, err
	} else if err != nil {
		return metrics.ReceivedStale, http.StatusUnauthorized, err
	}
	keys, err := p.keys.keys()
	if err != nil {
		return metrics.ReceivedUnavailable, http.StatusServiceUnavailable, err
	}
	if err := verifySignature(r.Header.Get(headerSignature), keys, ts, body); err != nil {
		return metrics.ReceivedUnauthorized, http.StatusUnauthorized, err
	}
	// Authentic from here on: only a replica can have written the body.
	c, nonce, err := decodeCorrelation(body)
	if err != nil {
		return metrics.ReceivedMalformed, http.StatusBadRequest, err
	}
	if !p.seen.add(nonce, now) {
		return metrics.ReceivedReplayed, http.StatusUnauthorized, errors.New("request already received (a replay)")
	}
	store := p.store
	if c.Cluster != "" {
		if store = p.storeFor(c.Cluster); store == nil {
			return metrics.ReceivedUnknownCluster, 0, nil // not a cluster of this replica's: nothing to credit here
		}
	}
	if !store.Import(c) {
		return metrics.ReceivedExpired, 0, nil
	}
	return metrics.ReceivedImported, 0, nil
}
