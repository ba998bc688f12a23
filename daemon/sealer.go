package daemon

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/configbutler/gitops-reverser/crds"
	"github.com/configbutler/gitops-reverser/kube"
	"github.com/configbutler/gitops-reverser/sops"
)

// digestKeyField is the key of the digest key Secret that holds the key.
const digestKeyField = "key"

// digestKeyTimeout bounds one attempt to read (or create) the digest key.
const digestKeyTimeout = 15 * time.Second

// sealer is the watch.Sealer of encrypted Secrets. Its digest key lives in the Secret
// <webhook-service-name>-sops-digest of the daemon's namespace, so that an unchanged Secret gives
// the same file across restarts and replicas; the Secret is read, or created, the first time a
// destination asks for encryption (Ready), and again at each Ready until that works.
type sealer struct {
	secrets *kube.Client[corev1.Secret]
	name    string

	mu     sync.Mutex
	sealer *sops.Sealer // nil until the key is loaded
}

func newSealer(secrets *kube.Client[corev1.Secret], name string) *sealer {
	return &sealer{secrets: secrets, name: name}
}

// Ready loads the digest key if it is not loaded yet.
func (s *sealer) Ready(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.sealer != nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, digestKeyTimeout)
	defer cancel()
	key, err := digestKey(ctx, s.secrets, s.name)
	if err == nil {
		s.sealer, err = sops.NewSealer(key, time.Now)
	}
	if err != nil {
		return fmt.Errorf("the digest key of encrypted Secrets (Secret %s in the daemon's namespace): %w; grant the daemon get and create on Secrets there", s.name, err)
	}
	return nil
}

func (s *sealer) loaded() *sops.Sealer {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sealer
}

func (s *sealer) Seal(plaintext []byte, recipients []string) ([]byte, func([]byte) bool, error) {
	l := s.loaded()
	if l == nil {
		return nil, nil, errors.New("no digest key loaded")
	}
	return l.Seal(plaintext, recipients)
}

func (s *sealer) CheckRecipient(r string) error { return sops.CheckRecipient(r) }

func (s *sealer) CreationRules(recipients []string) []byte { return sops.CreationRules(recipients) }

// digestKey reads the key from the Secret, creating the Secret with a random key when missing.
func digestKey(ctx context.Context, secrets *kube.Client[corev1.Secret], name string) ([]byte, error) {
	for range 2 { // a create that lost a race with another replica reads the winner's key
		s, err := secrets.Get(ctx, name, metav1.GetOptions{})
		if err == nil {
			key := s.Data[digestKeyField]
			if len(key) < sops.MinKeyBytes {
				return nil, fmt.Errorf("key %q has %d bytes, want at least %d", digestKeyField, len(key), sops.MinKeyBytes)
			}
			return key, nil
		}
		if !apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("read: %w", err)
		}
		key := make([]byte, sops.MinKeyBytes)
		if _, err := rand.Read(key); err != nil {
			return nil, err
		}
		fresh := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{crds.LabelManagedBy: crds.ManagedByDaemon}},
			Data:       map[string][]byte{digestKeyField: key},
		}
		if _, err = secrets.Create(ctx, fresh, metav1.CreateOptions{}); err == nil {
			return key, nil
		}
		if !apierrors.IsAlreadyExists(err) {
			return nil, fmt.Errorf("create: %w", err)
		}
	}
	return nil, errors.New("created and deleted concurrently")
}
