package daemon

import (
	"context"
	"crypto/rand"
	"fmt"
	"log/slog"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"

	"github.com/configbutler/gitops-reverser/sops"
	"github.com/configbutler/gitops-reverser/watch"
)

// digestKeyField is the key of the digest key Secret that holds the key.
const digestKeyField = "key"

// digestKeyTimeout bounds reading (or creating) the digest key at the mirror's start.
const digestKeyTimeout = 15 * time.Second

// newSealer returns the Sealer of encrypted Secrets, with the digest key kept in the Secret
// <webhook-service-name>-sops-digest of the daemon's namespace (created on first use), so that an
// unchanged Secret gives the same file across restarts and replicas. Without the key it returns
// nil: destinations with spec.encryption then say EncryptionUnavailable and Secrets stay out.
func newSealer(ctx context.Context, cfg Config, core corev1client.CoreV1Interface, log *slog.Logger) watch.Sealer {
	ctx, cancel := context.WithTimeout(ctx, digestKeyTimeout)
	defer cancel()
	name := cfg.WebhookServiceName + "-sops-digest"
	key, err := digestKey(ctx, core.Secrets(cfg.Namespace), name)
	if err == nil {
		var s *sops.Sealer
		if s, err = sops.NewSealer(key, time.Now); err == nil {
			return s
		}
	}
	log.Error("encrypted Secrets unavailable: no digest key; Secrets are not mirrored", "secret", cfg.Namespace+"/"+name, "err", err,
		"fix", "create the namespace, or grant the daemon get and create on Secrets in it (deploy/rbac.yaml, the Helm chart), then restart")
	return nil
}

// digestKey reads the key from the Secret, creating the Secret with a random key when missing.
func digestKey(ctx context.Context, secrets corev1client.SecretInterface, name string) ([]byte, error) {
	for range 2 { // a create that lost a race with another replica reads the winner's key
		s, err := secrets.Get(ctx, name, metav1.GetOptions{})
		if err == nil {
			key := s.Data[digestKeyField]
			if len(key) < sops.MinKeyBytes {
				return nil, fmt.Errorf("secret %s: key %q has %d bytes, want at least %d", name, digestKeyField, len(key), sops.MinKeyBytes)
			}
			return key, nil
		}
		if !apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("read secret %s: %w", name, err)
		}
		key := make([]byte, sops.MinKeyBytes)
		if _, err := rand.Read(key); err != nil {
			return nil, err
		}
		fresh := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app.kubernetes.io/managed-by": controllerName}},
			Data:       map[string][]byte{digestKeyField: key},
		}
		if _, err = secrets.Create(ctx, fresh, metav1.CreateOptions{}); err == nil {
			return key, nil
		}
		if !apierrors.IsAlreadyExists(err) {
			return nil, fmt.Errorf("create secret %s: %w", name, err)
		}
	}
	return nil, fmt.Errorf("secret %s: created and deleted concurrently", name)
}
