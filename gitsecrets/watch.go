package gitsecrets

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"

	"github.com/configbutler/gitops-reverser/gitops"
	"github.com/configbutler/gitops-reverser/kube"
)

// secretWatch follows one credentials Secret, selected by name, so a fixed or rotated Secret
// reaches the workers within seconds instead of at the next refresh.
type secretWatch struct {
	informer cache.SharedIndexInformer
	cancel   context.CancelFunc
}

// watchSecret starts following ref unless it is followed already. Called with r.mu held.
func (r *Repositories) watchSecret(ref SecretRef) {
	if r.secrets[ref] != nil {
		return
	}
	client := kube.For(r.cfg.Dynamic, kube.Secrets, ref.Namespace)
	byName := fields.OneTermEqualSelector("metadata.name", ref.Name).String()
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			opts.FieldSelector = byName
			return client.List(ctx, opts)
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			opts.FieldSelector = byName
			return client.Watch(ctx, opts)
		},
	}
	inf := cache.NewSharedIndexInformer(lw, &unstructured.Unstructured{}, 0, cache.Indexers{})
	changed := func() { r.cfg.OnChange() }
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { changed() },
		UpdateFunc: func(any, any) { changed() },
		DeleteFunc: func(any) { changed() },
	}); err != nil {
		r.log.Warn("watch credentials Secret; it is read at each reconcile instead", "secret", ref.Namespace+"/"+ref.Name, "err", err)
		return
	}
	sw := &secretWatch{informer: inf, cancel: func() {}}
	r.secrets[ref] = sw
	if r.ctx != nil {
		r.startWatch(sw)
	}
}

// startWatch runs a Secret's informer until Run's context ends or the Secret is no longer
// followed. Called with r.mu held, once Run has begun.
func (r *Repositories) startWatch(sw *secretWatch) {
	ctx, cancel := context.WithCancel(r.ctx)
	sw.cancel = cancel
	r.wg.Go(func() { sw.informer.RunWithContext(ctx) })
}

// readSecret returns the Secret from its watch once that has synced, else from the API (the
// daemon may lack list/watch on Secrets: then every reconcile reads it).
func (r *Repositories) readSecret(ctx context.Context, ref SecretRef) (*corev1.Secret, error) {
	if sw := r.secrets[ref]; sw != nil && sw.informer.HasSynced() {
		obj, exists, err := sw.informer.GetStore().GetByKey(ref.Namespace + "/" + ref.Name)
		switch {
		case err != nil:
			return nil, fmt.Errorf("read Secret %s/%s from its watch: %w", ref.Namespace, ref.Name, err)
		case !exists:
			return nil, secretNotFound(ref)
		}
		return kube.Convert[corev1.Secret](obj)
	}
	secret, err := kube.For(r.cfg.Dynamic, kube.Secrets, ref.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, secretNotFound(ref)
	}
	if err != nil {
		return nil, fmt.Errorf("read Secret %s/%s: %w", ref.Namespace, ref.Name, err)
	}
	return secret, nil
}

// fromSecret is what a repository reads from one of its Secrets (its credentials, its signing
// key), as it was last read well.
type fromSecret[T any] struct {
	value   T
	rv      string // resourceVersion of the Secret value was read from
	usable  bool   // nothing is asked for, or value was read
	problem string // the content is unusable (the caller's reason) or SecretUnreadable; "" when fine
	detail  string
}

// secretSource is where a value is read from: the Secret (nil: nothing is asked for), the reason
// given when its content is unusable, and how the value is parsed from it.
type secretSource[T any] struct {
	ref     *SecretRef
	invalid string
	parse   func(*corev1.Secret) (T, error)
}

// loadFromSecret brings st up to date with the Secret ref (nil: nothing is asked for, the zero
// value is usable), parsing it only when it changed. Content parse refuses with an errSecret
// leaves nothing usable, with the reason invalid; a Secret that cannot be read for a passing
// reason keeps the value read before, so workers keep going. Called with r.mu held.
func loadFromSecret[T any](ctx context.Context, r *Repositories, st *fromSecret[T], src secretSource[T]) {
	ref, invalid, parse := src.ref, src.invalid, src.parse
	if ref == nil {
		*st = fromSecret[T]{usable: true}
		return
	}
	secret, err := r.readSecret(ctx, *ref)
	if err == nil && secret.ResourceVersion != "" && secret.ResourceVersion == st.rv && st.problem == "" {
		return // unchanged since it was parsed
	}
	var v T
	if err == nil {
		v, err = parse(secret)
	}
	var bad errSecret
	switch {
	case errors.As(err, &bad):
		*st = fromSecret[T]{problem: invalid, detail: bad.msg}
	case err != nil:
		st.problem, st.detail = "SecretUnreadable", err.Error() // usable and the value stay what they were
	default:
		*st = fromSecret[T]{value: v, rv: secret.ResourceVersion, usable: true}
	}
}

// loadCredentials brings e's credentials up to date with their Secret.
func (r *Repositories) loadCredentials(ctx context.Context, e *repoEntry) {
	loadFromSecret(ctx, r, &e.creds, secretSource[gitops.Credentials]{e.repo.SecretRef, "SecretInvalid", func(s *corev1.Secret) (gitops.Credentials, error) {
		return credentialsFrom(s, r.cfg.WorkDir)
	}})
}

// loadSigner brings e's signing key up to date with its Secret.
func (r *Repositories) loadSigner(ctx context.Context, e *repoEntry) {
	var ref *SecretRef
	if sg := e.repo.Signing; sg != nil {
		ref = &sg.Secret
	}
	loadFromSecret(ctx, r, &e.signing, secretSource[gitops.Signer]{ref, signingKeyInvalid, func(secret *corev1.Secret) (gitops.Signer, error) {
		s, err := signerFrom(e.repo.Signing.Format, secret)
		if err == nil && e.signing.value != nil && e.signing.value.Public().Fingerprint == s.Public().Fingerprint {
			s = e.signing.value // the same key: the workers need not hear of it
		}
		return s, err
	}})
}

func secretNotFound(ref SecretRef) error {
	return errSecret{fmt.Sprintf("Secret %s/%s not found", ref.Namespace, ref.Name)}
}
