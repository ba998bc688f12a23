package webhook

import (
	"crypto/tls"
	"encoding/json"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	admissionv1 "k8s.io/api/admission/v1"

	"github.com/configbutler/gitops-reverser/metrics"
	"github.com/configbutler/gitops-reverser/sanitize"
)

// peerService is the webhook Service's name that every replica's certificate holds.
const peerService = "gitops-reverser.ops.svc"

// replica is one daemon's webhook side: its store, its admission handler (called in process, as
// the apiserver's call would arrive) and its Peers, with the admission and correlations paths
// served over TLS on loopback like the daemon's webhook server.
type replica struct {
	addr    string
	store   *Store
	handler http.Handler
	m       *metrics.Attribution
}

// startReplica serves a replica with certs that forwards to peers; it stops when tb ends.
func startReplica(tb testing.TB, certs CertSource, peers ...string) *replica {
	tb.Helper()
	store, m, _ := newTestStore(tb, StoreConfig{})
	var addrs func() []string
	if len(peers) > 0 {
		addrs = func() []string { return peers }
	}
	p, err := NewPeers(PeersConfig{Store: store, Addresses: addrs, Certs: func() CertSource { return certs },
		ServerName: peerService, Metrics: m, Log: whLogger()})
	if err != nil {
		tb.Fatalf("NewPeers: %v", err)
	}
	var w Watched
	w.Set([]Resource{{GVR: configMaps, Namespaced: true, Namespace: "team-a"}})
	h := NewAdmissionHandler(store, &w, m, nil, WithPeers(p))
	mux := http.NewServeMux()
	mux.Handle("POST "+AdmissionPath, h)
	mux.Handle("POST "+CorrelationsPath, p)
	tb.Cleanup(p.Close) // cleanups run last first: after the server below has stopped
	srv := serveWebhook(tb, certs, mux)
	return &replica{addr: srv.addr, store: store, handler: h, m: m}
}

// admit has r's handler review rc and checks that it allowed it.
func (r *replica) admit(tb testing.TB, rc reviewCase) {
	tb.Helper()
	rec := post(r.handler, http.MethodPost, "application/json", rc.review(tb))
	var got admissionv1.AdmissionReview
	if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil || rec.Code != http.StatusOK || got.Response == nil || !got.Response.Allowed {
		tb.Fatalf("admission answered %d %s; want allowed", rec.Code, rec.Body)
	}
}

func (r *replica) forwarded(result string) float64 {
	return testutil.ToFloat64(r.m.Forwarded.WithLabelValues(result))
}

func (r *replica) received(result string) float64 {
	return testutil.ToFloat64(r.m.Received.WithLabelValues(result))
}

// peerCA is a CA as the self-managed certificates make one.
func peerCA(tb testing.TB) keyPair {
	tb.Helper()
	ca, err := newCA(time.Now())
	if err != nil {
		tb.Fatal(err)
	}
	return ca
}

// servingFrom issues a serving certificate for hosts from ca, with a key of its own.
func servingFrom(tb testing.TB, ca keyPair, hosts ...string) staticCerts {
	tb.Helper()
	leaf, err := newServing(ca, hosts, time.Now())
	if err != nil {
		tb.Fatal(err)
	}
	cert, err := tls.X509KeyPair(leaf.certPEM, leaf.keyPEM)
	if err != nil {
		tb.Fatal(err)
	}
	return staticCerts{cert: &cert, ca: ca.certPEM}
}

// rotatingCerts serves whichever certificate the test set last.
type rotatingCerts struct{ cur atomic.Pointer[staticCerts] }

func (r *rotatingCerts) set(c staticCerts) { r.cur.Store(&c) }
func (r *rotatingCerts) GetCertificate(h *tls.ClientHelloInfo) (*tls.Certificate, error) {
	return r.cur.Load().GetCertificate(h)
}
func (r *rotatingCerts) CABundle() []byte { return r.cur.Load().CABundle() }

// cmUpdate is an UPDATE of ConfigMap name in team-a by alice, and the content the watch hashes.
func cmUpdate(tb testing.TB, name string) (reviewCase, []byte) {
	tb.Helper()
	obj := cmObject(name, map[string]any{"k": "v"})
	content, err := sanitize.JSON(sanitize.Object(obj))
	if err != nil {
		tb.Fatal(err)
	}
	return reviewCase{op: "UPDATE", namespace: "team-a", name: name, object: obj, oldObject: obj}, content
}

// The guarantee: once A's admission call returns, B's and C's watches find the record.
func TestForwardedRecordIsFoundByThePeer(t *testing.T) {
	certs := newStaticCerts(t, peerService)
	b, c := startReplica(t, certs), startReplica(t, certs)
	a := startReplica(t, certs, b.addr, c.addr)
	update, content := cmUpdate(t, "app")
	cases := []struct {
		name    string
		rc      reviewCase
		content []byte
	}{
		{"create", reviewCase{op: "CREATE", namespace: "team-a", name: "app", object: update.object}, content},
		{"update", update, content},
		{"delete", reviewCase{op: "DELETE", namespace: "team-a", name: "app", oldObject: update.object}, []byte("whatever the watch saw last\n")},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a.admit(t, tc.rc)
			for _, peer := range []*replica{b, c} {
				if got, ok := peer.store.Author(tc.rc.op, configMap, "team-a", "app", tc.content); !ok || got.Author != aliceSig {
					t.Errorf("peer's Author = %+v, %v; want %+v, true", got, ok, aliceSig)
				}
				if n := peer.received(metrics.ReceivedImported); n != float64(i+1) {
					t.Errorf("peer imported %v; want %d", n, i+1)
				}
			}
			if got, ok := a.store.Author(tc.rc.op, configMap, "team-a", "app", tc.content); !ok || got.Author != aliceSig {
				t.Errorf("own Author = %+v, %v; want %+v, true", got, ok, aliceSig)
			}
			if n := a.forwarded(metrics.ForwardDelivered); n != float64(2*(i+1)) {
				t.Errorf("delivered = %v; want %d", n, 2*(i+1))
			}
		})
	}
}

func TestNoPeersForwardsNothing(t *testing.T) {
	certs := newStaticCerts(t, peerService)
	for name, addrs := range map[string]func() []string{"no function": nil, "no addresses": func() []string { return nil }} {
		t.Run(name, func(t *testing.T) {
			store, m, _ := newTestStore(t, StoreConfig{})
			p, err := NewPeers(PeersConfig{Store: store, Addresses: addrs, Certs: func() CertSource { return certs }, ServerName: peerService, Metrics: m})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(p.Close)
			var w Watched
			w.Set([]Resource{{GVR: configMaps, Namespaced: true, Namespace: "team-a"}})
			rc, _ := cmUpdate(t, "app")
			(&replica{handler: NewAdmissionHandler(store, &w, m, nil, WithPeers(p))}).admit(t, rc)
			if store.Len() != 1 || testutil.CollectAndCount(m.ForwardDuration) != 1 {
				t.Fatalf("store holds %d, forward duration has %d series", store.Len(), testutil.CollectAndCount(m.ForwardDuration))
			}
			if n := testutil.ToFloat64(m.Forwarded.WithLabelValues(metrics.ForwardDelivered)) +
				testutil.ToFloat64(m.Forwarded.WithLabelValues(metrics.ForwardFailed)); n != 0 {
				t.Errorf("forwarded %v; want nothing", n)
			}
		})
	}
}

// downPeer is an address nobody listens on: a replica that is gone.
func downPeer(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	return addr
}

// silentPeer accepts connections and never answers: a replica that hangs.
func silentPeer(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	})
	t.Cleanup(func() {
		_ = ln.Close()
		wg.Wait()
		for _, c := range conns {
			_ = c.Close()
		}
	})
	return ln.Addr().String()
}

func TestPeerThatIsDownNeverFailsTheAdmission(t *testing.T) {
	certs := newStaticCerts(t, peerService)
	cases := []struct {
		name   string
		peer   func(*testing.T) string
		result string
	}{
		{"nobody listens", downPeer, metrics.ForwardFailed},
		{"the peer hangs", silentPeer, metrics.ForwardTimeout},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			live := startReplica(t, certs)
			a := startReplica(t, certs, tc.peer(t), live.addr)
			rc, content := cmUpdate(t, "app")
			start := time.Now()
			a.admit(t, rc)
			t.Logf("admission answered after %s (forward timeout %s)", time.Since(start).Round(time.Millisecond), DefaultForwardTimeout)
			if n := a.forwarded(tc.result); n != 1 {
				t.Errorf("forwarded{result=%s} = %v; want 1", tc.result, n)
			}
			if _, ok := live.store.Author("UPDATE", configMap, "team-a", "app", content); !ok {
				t.Error("the live peer did not get the record")
			}
			if _, ok := a.store.Author("UPDATE", configMap, "team-a", "app", content); !ok {
				t.Error("the replica's own record is missing")
			}
		})
	}
}

// A peer's certificate must chain to the webhook's own CA and name the Service.
func TestPeerWithAnotherCertificateIsNotTrusted(t *testing.T) {
	ca := peerCA(t)
	cases := []struct {
		name string
		peer staticCerts
	}{
		{"another CA", newStaticCerts(t, peerService)},
		{"our CA, another name", servingFrom(t, ca, "other.ops.svc", "127.0.0.1")},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := startReplica(t, tc.peer)
			a := startReplica(t, servingFrom(t, ca, peerService), b.addr)
			rc, _ := cmUpdate(t, "app")
			a.admit(t, rc)
			if n := a.forwarded(metrics.ForwardFailed); n != 1 {
				t.Errorf("forwarded{result=failed} = %v; want 1", n)
			}
			if b.store.Len() != 0 || b.received(metrics.ReceivedImported) != 0 {
				t.Errorf("the untrusted peer got %d records", b.store.Len())
			}
		})
	}
}

// While a rotated certificate reaches the replicas one by one, they still share a key.
func TestRotatedCertificateKeepsPeersTalking(t *testing.T) {
	ca := peerCA(t)
	certs := []staticCerts{servingFrom(t, ca, peerService), servingFrom(t, ca, peerService)}
	type step struct{ sender, receiver int } // which certificate each serves
	cases := []struct {
		name  string
		steps []step
		last  string // the result of the last step; the earlier ones are delivered
	}{
		{"the sender rotates first", []step{{0, 0}, {1, 0}}, metrics.ForwardDelivered},
		{"the receiver rotates first", []step{{0, 0}, {0, 1}}, metrics.ForwardDelivered},
		{"both rotate", []step{{0, 0}, {1, 0}, {1, 1}}, metrics.ForwardDelivered},
		{"a receiver that never had the sender's key refuses", []step{{0, 1}}, metrics.ForwardRefused},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var sender, receiver rotatingCerts
			sender.set(certs[0])
			receiver.set(certs[0])
			b := startReplica(t, &receiver)
			a := startReplica(t, &sender, b.addr)
			for i, s := range tc.steps {
				sender.set(certs[s.sender])
				receiver.set(certs[s.receiver])
				rc, _ := cmUpdate(t, "app-"+strconv.Itoa(i))
				want := metrics.ForwardDelivered
				if i == len(tc.steps)-1 {
					want = tc.last
				}
				before := a.forwarded(want)
				a.admit(t, rc)
				if a.forwarded(want) != before+1 {
					t.Fatalf("step %d (%+v): forwarded{result=%s} = %v; want one more", i, s, want, a.forwarded(want))
				}
			}
		})
	}
}

func TestNoncesRememberWithinTheWindowAndStayBounded(t *testing.T) {
	now := time.Date(2025, 10, 20, 12, 0, 0, 0, time.UTC)
	n := func(i byte) [16]byte { return [16]byte{i} }
	s := newNonces(3)
	if !s.add(n(1), now) || s.add(n(1), now.Add(time.Second)) {
		t.Fatal("a nonce was not new the first time, or new the second")
	}
	if !s.add(n(1), now.Add(2*maxClockSkew+time.Second)) {
		t.Error("a nonce past the window is still remembered")
	}
	for i := byte(2); i <= 5; i++ {
		s.add(n(i), now.Add(2*maxClockSkew+time.Second))
	}
	if s.len() != 3 {
		t.Errorf("remembers %d nonces; want the limit, 3", s.len())
	}
	if !s.add(n(2), now.Add(2*maxClockSkew+time.Second)) {
		t.Error("the oldest nonce was kept over the limit")
	}
}

// A review a RemoteCluster's apiserver sent is handed over as that cluster's: the peer keeps it in
// the store of that cluster, never in its own cluster's, and drops the record of a cluster it
// keeps no store for.
func TestRecordOfARemoteClusterGoesToThatClustersStore(t *testing.T) {
	certs := newStaticCerts(t, peerService)
	local, m, _ := newTestStore(t, StoreConfig{})
	east, _, _ := newTestStore(t, StoreConfig{})
	b, err := NewPeers(PeersConfig{Store: local, StoreFor: func(c string) *Store {
		if c == "fleet/east" {
			return east
		}
		return nil
	}, Certs: func() CertSource { return certs }, ServerName: peerService, Metrics: m, Log: whLogger()})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("POST "+CorrelationsPath, b)
	t.Cleanup(b.Close)
	srv := serveWebhook(t, certs, mux)
	sender := func(cluster string) http.Handler {
		store, sm, _ := newTestStore(t, StoreConfig{})
		p, err := NewPeers(PeersConfig{Store: store, Addresses: func() []string { return []string{srv.addr} }, Certs: func() CertSource { return certs },
			ServerName: peerService, Metrics: sm, Log: whLogger()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(p.Close)
		var w Watched
		w.Set([]Resource{{GVR: configMaps, Namespaced: true, Namespace: "team-a"}})
		return NewAdmissionHandler(store, &w, sm, nil, WithPeers(p), WithCluster(cluster))
	}
	update, content := cmUpdate(t, "app")
	post(sender("fleet/east"), http.MethodPost, "application/json", update.review(t))
	if got, ok := east.Author("UPDATE", configMap, "team-a", "app", content); !ok || got.Author != aliceSig {
		t.Errorf("east's store: %+v, %v; want alice", got, ok)
	}
	if _, ok := local.Author("UPDATE", configMap, "team-a", "app", content); ok {
		t.Error("a remote cluster's record reached the store of the daemon's own cluster")
	}
	post(sender("fleet/west"), http.MethodPost, "application/json", update.review(t))
	if n := testutil.ToFloat64(m.Received.WithLabelValues(metrics.ReceivedUnknownCluster)); n != 1 {
		t.Errorf("records of an unknown cluster dropped: %v, want 1", n)
	}
	if _, ok := local.Author("UPDATE", configMap, "team-a", "app", content); ok {
		t.Error("an unknown cluster's record reached the store of the daemon's own cluster")
	}
}
