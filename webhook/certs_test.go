package webhook

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// whClock is a settable clock safe to read from Run's goroutine.
type whClock struct{ now atomic.Int64 }

func (c *whClock) Now() time.Time          { return time.Unix(0, c.now.Load()) }
func (c *whClock) Set(t time.Time)         { c.now.Store(t.UnixNano()) }
func (c *whClock) Advance(d time.Duration) { c.Set(c.Now().Add(d)) }

// whSecret returns name and deletes that Secret of ns after the test, so a rerun starts afresh.
func whSecret(t *testing.T, ns, name string) string {
	t.Helper()
	t.Cleanup(func() { _ = whCore(t).Secrets(ns).Delete(context.Background(), name, metav1.DeleteOptions{}) })
	return name
}

func newSelfManagedT(t *testing.T, cfg SelfManagedConfig) *SelfManaged {
	t.Helper()
	s, err := NewSelfManaged(cfg, whLogger())
	if err != nil {
		t.Fatalf("NewSelfManaged: %v", err)
	}
	if err := s.Sync(context.Background()); err != nil {
		t.Fatalf("Sync: %v", err)
	}
	return s
}

func leafOf(t *testing.T, src CertSource) *x509.Certificate {
	t.Helper()
	cert, err := src.GetCertificate(&tls.ClientHelloInfo{})
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(cert.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	return leaf
}

// verifyFor checks that the CA bundle of src trusts its certificate for every host at now.
func verifyFor(t *testing.T, src CertSource, now time.Time, hosts ...string) {
	t.Helper()
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(src.CABundle()) {
		t.Fatal("CA bundle holds no certificate")
	}
	for _, h := range hosts {
		opts := x509.VerifyOptions{Roots: pool, DNSName: h, CurrentTime: now}
		if _, err := leafOf(t, src).Verify(opts); err != nil {
			t.Errorf("verify for %s: %v", h, err)
		}
	}
}

// runUntilRotated runs s in the background (until the test ends) and waits for its OnRotate.
func runUntilRotated(t *testing.T, s *SelfManaged, rotated <-chan struct{}) {
	t.Helper()
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { _ = s.Run(ctx) })
	t.Cleanup(func() { stop(); wg.Wait() })
	select {
	case <-rotated:
	case <-time.After(10 * time.Second):
		t.Fatal("no rotation near expiry")
	}
}

func TestSelfManagedCertsPersistAndRotate(t *testing.T) {
	ctx := context.Background()
	ns := whNamespace(t, "webhook-certs")
	secrets := whCore(t).Secrets(ns)
	clock := &whClock{}
	clock.Set(time.Now())
	rotated := make(chan struct{}, 1)
	cfg := SelfManagedConfig{Dynamic: whDynamic(t), Namespace: ns, SecretName: whSecret(t, ns, "persist-rotate"), ServiceName: "gitops-reverser",
		ExtraHosts: []string{"127.0.0.1", "webhook.example.test"}, Now: clock.Now, CheckInterval: 10 * time.Millisecond,
		OnRotate: func() {
			select {
			case rotated <- struct{}{}:
			default:
			}
		}}
	hosts := []string{"gitops-reverser." + ns + ".svc", "gitops-reverser." + ns + ".svc.cluster.local", "127.0.0.1", "webhook.example.test"}

	first := newSelfManagedT(t, cfg)
	verifyFor(t, first, clock.Now(), hosts...)
	secret, err := secrets.Get(ctx, "persist-rotate", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if secret.Type != corev1.SecretTypeTLS || len(secret.Data["ca.key"]) == 0 || len(secret.Data["tls.key"]) == 0 {
		t.Fatalf("secret type %q keys %d, want kubernetes.io/tls with tls.* and ca.*", secret.Type, len(secret.Data))
	}

	second := newSelfManagedT(t, cfg)
	if a, b := leafOf(t, first).SerialNumber, leafOf(t, second).SerialNumber; a.Cmp(b) != 0 {
		t.Fatalf("restart issued a new certificate: serial %s → %s", a, b)
	}

	clock.Advance(servingValidity - 10*24*time.Hour)
	runUntilRotated(t, second, rotated)
	renewed := leafOf(t, second)
	if renewed.SerialNumber.Cmp(leafOf(t, first).SerialNumber) == 0 {
		t.Fatal("rotation kept the old serial")
	}
	if string(second.CABundle()) != string(first.CABundle()) {
		t.Fatal("serving rotation changed the CA")
	}
	verifyFor(t, second, clock.Now(), hosts...)
	secret, err = secrets.Get(ctx, "persist-rotate", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	stored, err := tls.X509KeyPair(secret.Data["tls.crt"], secret.Data["tls.key"])
	if err != nil || stored.Leaf.SerialNumber.Cmp(renewed.SerialNumber) != 0 {
		t.Fatalf("the secret does not hold the rotated certificate (err %v)", err)
	}
	if third := newSelfManagedT(t, cfg); leafOf(t, third).SerialNumber.Cmp(renewed.SerialNumber) != 0 {
		t.Fatal("a restart after rotation did not reuse the rotated certificate")
	}
}

func TestSelfManagedRenewsCAAndKeepsTrustingTheOldOne(t *testing.T) {
	clock := &whClock{}
	clock.Set(time.Now())
	ns := whNamespace(t, "webhook-certs")
	cfg := SelfManagedConfig{Dynamic: whDynamic(t), Namespace: ns, SecretName: whSecret(t, ns, "ca-renewal"),
		ExtraHosts: []string{"127.0.0.1"}, Now: clock.Now}
	old := newSelfManagedT(t, cfg)

	clock.Advance(caValidity - servingValidity)
	renewed := newSelfManagedT(t, cfg)
	verifyFor(t, renewed, clock.Now(), "127.0.0.1")
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(renewed.CABundle())
	// The old CA stays trusted for the certificates it signed, which other replicas may still serve.
	if _, err := leafOf(t, old).Verify(x509.VerifyOptions{Roots: pool, DNSName: "127.0.0.1", CurrentTime: time.Now()}); err != nil {
		t.Fatalf("the renewed bundle no longer trusts certificates of the old CA: %v", err)
	}
	if string(renewed.CABundle()) == string(old.CABundle()) {
		t.Fatal("the CA was not renewed")
	}
}

func TestSelfManagedCreateRaceConverges(t *testing.T) {
	ns := whNamespace(t, "webhook-certs")
	cfg := SelfManagedConfig{Dynamic: whDynamic(t), Namespace: ns, SecretName: whSecret(t, ns, "create-race"),
		ServiceName: "gitops-reverser"}
	const replicas = 4
	serials := make([]string, replicas)
	var wg sync.WaitGroup
	for i := range replicas {
		wg.Go(func() {
			s, err := NewSelfManaged(cfg, whLogger())
			if err == nil {
				err = s.Sync(context.Background())
			}
			if err != nil {
				t.Errorf("replica %d: %v", i, err)
				return
			}
			serials[i] = leafOf(t, s).SerialNumber.String()
		})
	}
	wg.Wait()
	for i := range serials {
		if serials[i] != serials[0] {
			t.Fatalf("replicas serve different certificates: %v", serials)
		}
	}
}

// staticCerts serves one fixed pair, for tests that need TLS but no rotation.
type staticCerts struct {
	cert *tls.Certificate
	ca   []byte
}

func (s staticCerts) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	return s.cert, nil
}
func (s staticCerts) CABundle() []byte { return s.ca }

func newStaticCerts(t testing.TB, hosts ...string) staticCerts {
	t.Helper()
	ca, err := newCA(time.Now())
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := newServing(ca, hosts, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	cert, err := tls.X509KeyPair(leaf.certPEM, leaf.keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	return staticCerts{cert: &cert, ca: ca.certPEM}
}
