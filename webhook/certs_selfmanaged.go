package webhook

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"

	"github.com/configbutler/gitops-reverser/crds"
	"github.com/configbutler/gitops-reverser/kube"
)

// Lifetimes of the self-managed certificates. The serving certificate is renewed well before it
// expires; the CA is renewed once it would no longer outlive a fresh serving certificate.
const (
	servingValidity      = 365 * 24 * time.Hour
	caValidity           = 10 * 365 * 24 * time.Hour
	renewBefore          = 30 * 24 * time.Hour
	defaultCheckInterval = time.Hour
	secretWriteAttempts  = 5
)

// SelfManagedConfig says where the certificates live and which names they must cover.
type SelfManagedConfig struct {
	// Dynamic reads and writes the Secret.
	Dynamic dynamic.Interface
	// Namespace and SecretName locate the kubernetes.io/tls Secret (plus ca.crt and ca.key).
	Namespace, SecretName string
	// ServiceName, if set, adds <service>.<namespace>.svc[.cluster.local] to the names.
	ServiceName string
	// ExtraHosts are further names or IP addresses, e.g. the host of --webhook-url when the
	// daemon runs outside the cluster.
	ExtraHosts []string
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// OnRotate runs on Run's goroutine after Run picked up a new serving certificate or CA, e.g.
	// to have the caBundle of the webhook registration refreshed. It must not block.
	OnRotate func()
	// CheckInterval is how often Run looks at the Secret; 0 means one hour.
	CheckInterval time.Duration
}

// SelfManaged is a CertSource that needs no cert-manager: it keeps its own CA and serving
// certificate in a Secret, so every replica and every restart serves the same ones.
type SelfManaged struct {
	cfg     SelfManagedConfig
	hosts   []string
	log     *slog.Logger
	current atomic.Pointer[selfManagedState]
}

type selfManagedState struct {
	cert     *tls.Certificate
	caBundle []byte
}

// NewSelfManaged checks cfg and fills in its defaults. It does no I/O: Sync (or Run) reads the
// Secret, so a daemon whose namespace or permissions are not there yet still starts.
func NewSelfManaged(cfg SelfManagedConfig, log *slog.Logger) (*SelfManaged, error) {
	if cfg.Dynamic == nil || cfg.Namespace == "" || cfg.SecretName == "" {
		return nil, errors.New("self-managed webhook certificates: client, namespace and secret name are required")
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if cfg.CheckInterval <= 0 {
		cfg.CheckInterval = defaultCheckInterval
	}
	s := &SelfManaged{cfg: cfg, log: log}
	if cfg.ServiceName != "" {
		svc := cfg.ServiceName + "." + cfg.Namespace + ".svc"
		s.hosts = append(s.hosts, svc, svc+".cluster.local")
	}
	s.hosts = append(s.hosts, cfg.ExtraHosts...)
	if len(s.hosts) == 0 {
		return nil, errors.New("self-managed webhook certificates: no service name or extra hosts to certify")
	}
	return s, nil
}

// Sync loads the certificates from the Secret, creating or renewing them first when they are
// missing, expiring, or do not cover the configured names, and serves them. Until a Sync has
// succeeded there is nothing to serve: GetCertificate fails and CABundle is nil.
func (s *SelfManaged) Sync(ctx context.Context) error {
	first := s.current.Load() == nil
	if _, err := s.sync(ctx); err != nil {
		return err
	}
	if first {
		leaf := s.current.Load().cert.Leaf
		s.log.Info("webhook certificate ready", "secret", s.cfg.Namespace+"/"+s.cfg.SecretName,
			"hosts", s.hosts, "serial", leaf.SerialNumber.Text(16), "notAfter", leaf.NotAfter)
	}
	return nil
}

// GetCertificate returns the current serving certificate, or an error before the first Sync.
func (s *SelfManaged) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	cur := s.current.Load()
	if cur == nil {
		return nil, errors.New("no webhook certificate loaded yet")
	}
	return cur.cert, nil
}

// CABundle returns the PEM CA certificates the apiserver must trust: the current CA, then a
// previous one while certificates signed by it may still be served by other replicas. It is nil
// before the first Sync.
func (s *SelfManaged) CABundle() []byte {
	cur := s.current.Load()
	if cur == nil {
		return nil
	}
	return cur.caBundle
}

// Run renews the certificates when due and adopts those another replica wrote, every
// CheckInterval until ctx ends; call it once Sync has succeeded. A failed check keeps the current
// certificate in service; it is logged and retried at the next check.
func (s *SelfManaged) Run(ctx context.Context) error {
	tick := time.NewTicker(s.cfg.CheckInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		changed, err := s.sync(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			s.log.Error("webhook certificate check failed; retrying later", "secret", s.cfg.SecretName, "err", err)
			continue
		}
		if changed {
			s.log.Info("webhook certificate rotated", "secret", s.cfg.SecretName,
				"notAfter", s.current.Load().cert.Leaf.NotAfter)
			if s.cfg.OnRotate != nil {
				s.cfg.OnRotate()
			}
		}
	}
}

// sync reads the Secret, creates or renews its content when needed, and serves the result. It
// reports whether the serving certificate or CA bundle changed. Writes use the resourceVersion
// read, so two replicas racing converge on whichever wrote first.
func (s *SelfManaged) sync(ctx context.Context) (bool, error) {
	secrets := kube.For(s.cfg.Dynamic, kube.Secrets, s.cfg.Namespace)
	for range secretWriteAttempts {
		secret, err := secrets.Get(ctx, s.cfg.SecretName, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			secret = &corev1.Secret{
				ObjectMeta: metav1.ObjectMeta{Name: s.cfg.SecretName, Namespace: s.cfg.Namespace},
				Type:       corev1.SecretTypeTLS,
			}
		} else if err != nil {
			return false, fmt.Errorf("read webhook certificate secret %s/%s: %w", s.cfg.Namespace, s.cfg.SecretName, err)
		}
		data, renewed, err := s.renew(secret.Data)
		if err != nil {
			return false, err
		}
		if renewed {
			secret.Data = data
			if secret.Labels == nil {
				secret.Labels = map[string]string{}
			}
			secret.Labels[crds.LabelManagedBy] = crds.ManagedByDaemon // its own: not mirrored, not restored
			if secret.ResourceVersion == "" {
				_, err = secrets.Create(ctx, secret, metav1.CreateOptions{})
			} else {
				_, err = secrets.Update(ctx, secret, metav1.UpdateOptions{})
			}
			if apierrors.IsAlreadyExists(err) || apierrors.IsConflict(err) {
				continue // another replica wrote first: use its certificates
			}
			if err != nil {
				return false, fmt.Errorf("write webhook certificate secret %s/%s: %w", s.cfg.Namespace, s.cfg.SecretName, err)
			}
		}
		return s.serve(data)
	}
	return false, fmt.Errorf("write webhook certificate secret %s/%s: still conflicting after %d attempts",
		s.cfg.Namespace, s.cfg.SecretName, secretWriteAttempts)
}

// renew returns data unchanged when its CA and serving certificate are fine, else new content.
func (s *SelfManaged) renew(data map[string][]byte) (map[string][]byte, bool, error) {
	now := s.cfg.Now()
	ca, caErr := parseKeyPair(data[keyCACert], data[keyCAKey])
	renewCA := caErr != nil || ca.cert.NotBefore.After(now) || ca.cert.NotAfter.Sub(now) < servingValidity+renewBefore
	if !renewCA {
		leaf, err := parseKeyPair(data[keyTLSCert], data[keyTLSKey])
		if err == nil && s.servingValid(leaf, ca, now) {
			return data, false, nil
		}
	} else {
		next, err := newCA(now)
		if err != nil {
			return nil, false, fmt.Errorf("create webhook CA: %w", err)
		}
		if caErr == nil && ca.cert.NotAfter.After(now) {
			// Keep trusting the old CA while other replicas may still serve what it signed.
			next.certPEM = append(next.certPEM, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.cert.Raw})...)
		}
		ca = next
	}
	leaf, err := newServing(ca, s.hosts, now)
	if err != nil {
		return nil, false, fmt.Errorf("issue webhook serving certificate: %w", err)
	}
	return map[string][]byte{
		keyTLSCert: leaf.certPEM, keyTLSKey: leaf.keyPEM,
		keyCACert: ca.certPEM, keyCAKey: ca.keyPEM,
	}, true, nil
}

// servingValid says whether leaf is signed by ca, current for at least renewBefore, and valid for
// every configured name.
func (s *SelfManaged) servingValid(leaf, ca keyPair, now time.Time) bool {
	if leaf.cert.CheckSignatureFrom(ca.cert) != nil || leaf.cert.NotBefore.After(now) ||
		leaf.cert.NotAfter.Sub(now) < renewBefore {
		return false
	}
	for _, h := range s.hosts {
		if leaf.cert.VerifyHostname(h) != nil {
			return false
		}
	}
	return true
}

// serve switches handshakes to the certificate in data and reports whether it differs from the
// one served so far.
func (s *SelfManaged) serve(data map[string][]byte) (bool, error) {
	cert, err := tls.X509KeyPair(data[keyTLSCert], data[keyTLSKey])
	if err != nil {
		return false, fmt.Errorf("load webhook serving certificate: %w", err)
	}
	if cert.Leaf == nil { // only with GODEBUG x509keypairleaf=0
		if cert.Leaf, err = x509.ParseCertificate(cert.Certificate[0]); err != nil {
			return false, fmt.Errorf("parse webhook serving certificate: %w", err)
		}
	}
	next := &selfManagedState{cert: &cert, caBundle: data[keyCACert]}
	prev := s.current.Swap(next)
	changed := prev == nil || !bytes.Equal(prev.cert.Certificate[0], cert.Certificate[0]) ||
		!bytes.Equal(prev.caBundle, next.caBundle)
	return changed, nil
}
