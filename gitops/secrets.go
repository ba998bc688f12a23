package gitops

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
)

// secretWatch follows one credentials Secret, selected by name, so a fixed or rotated Secret
// reaches the workers within seconds instead of at the next refresh.
type secretWatch struct {
	informer cache.SharedIndexInformer
	cancel   context.CancelFunc
}

// watchSecret starts following ref unless it is followed already. Called with p.mu held.
func (p *Pool) watchSecret(ref SecretRef) {
	if p.secrets[ref] != nil {
		return
	}
	client := p.cfg.Secrets.Secrets(ref.Namespace)
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
	inf := cache.NewSharedIndexInformer(lw, &corev1.Secret{}, 0, cache.Indexers{})
	changed := func() { p.cfg.OnChange() }
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { changed() },
		UpdateFunc: func(any, any) { changed() },
		DeleteFunc: func(any) { changed() },
	}); err != nil {
		p.log.Warn("watch credentials Secret; it is read at each reconcile instead", "secret", ref.Namespace+"/"+ref.Name, "err", err)
		return
	}
	ctx, cancel := context.WithCancel(p.ctx)
	p.secrets[ref] = &secretWatch{informer: inf, cancel: cancel}
	p.wg.Go(func() { inf.RunWithContext(ctx) })
}

// readSecret returns the Secret from its watch once that has synced, else from the API (the
// daemon may lack list/watch on Secrets: then every reconcile reads it).
func (p *Pool) readSecret(ctx context.Context, ref SecretRef) (*corev1.Secret, error) {
	if sw := p.secrets[ref]; sw != nil && sw.informer.HasSynced() {
		obj, exists, err := sw.informer.GetStore().GetByKey(ref.Namespace + "/" + ref.Name)
		switch {
		case err != nil:
			return nil, fmt.Errorf("read Secret %s/%s from its watch: %w", ref.Namespace, ref.Name, err)
		case !exists:
			return nil, secretNotFound(ref)
		}
		return obj.(*corev1.Secret), nil
	}
	secret, err := p.cfg.Secrets.Secrets(ref.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, secretNotFound(ref)
	}
	if err != nil {
		return nil, fmt.Errorf("read Secret %s/%s: %w", ref.Namespace, ref.Name, err)
	}
	return secret, nil
}

// loadCredentials brings e's credentials up to date with its Secret. A Secret that cannot be
// read for a passing reason keeps the credentials read before, so workers keep going. Called
// with p.mu held.
func (p *Pool) loadCredentials(ctx context.Context, e *repoEntry) {
	ref := e.repo.SecretRef
	if ref == nil {
		e.creds, e.usable, e.problem, e.detail = credentials{}, true, "", ""
		return
	}
	secret, err := p.readSecret(ctx, *ref)
	if err == nil && secret.ResourceVersion != "" && secret.ResourceVersion == e.credsRV && e.problem == "" {
		return // unchanged since it was parsed
	}
	var creds credentials
	if err == nil {
		creds, err = credentialsFrom(secret, p.cfg.WorkDir)
	}
	var bad errSecret
	switch {
	case errors.As(err, &bad):
		e.creds, e.credsRV, e.usable, e.problem, e.detail = credentials{}, "", false, "SecretInvalid", bad.msg
	case err != nil:
		e.problem, e.detail = "SecretUnreadable", err.Error() // usable stays what it was
	default:
		e.creds, e.credsRV, e.usable, e.problem, e.detail = creds, secret.ResourceVersion, true, "", ""
	}
}

// loadSigner brings e's signing key up to date with its Secret, as loadCredentials does for the
// credentials. Called with p.mu held.
func (p *Pool) loadSigner(ctx context.Context, e *repoEntry) {
	sg := e.repo.Signing
	if sg == nil {
		e.signing = signingState{usable: true}
		return
	}
	secret, err := p.readSecret(ctx, sg.Secret)
	if err == nil && secret.ResourceVersion != "" && secret.ResourceVersion == e.signing.rv && e.signing.problem == "" {
		return // unchanged since it was parsed
	}
	var s signer
	if err == nil {
		s, err = signerFrom(sg.Format, secret)
	}
	var bad errSecret
	switch {
	case errors.As(err, &bad):
		e.signing = signingState{problem: "SigningKeyInvalid", detail: bad.msg}
	case err != nil:
		e.signing.problem, e.signing.detail = "SecretUnreadable", err.Error() // the key read before stays
	default:
		if e.signing.signer != nil && e.signing.signer.id() == s.id() {
			s = e.signing.signer // the same key: the workers need not hear of it
		}
		e.signing = signingState{signer: s, rv: secret.ResourceVersion, usable: true}
	}
}

func secretNotFound(ref SecretRef) error {
	return errSecret{fmt.Sprintf("Secret %s/%s not found", ref.Namespace, ref.Name)}
}
