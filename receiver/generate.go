package receiver

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/configbutler/gitops-reverser/crds"
	"github.com/configbutler/gitops-reverser/kube"
)

// GeneratedByLabel marks a Receiver and Secret generated for a GitRepoConfig; its value is the
// GitRepoConfig's name.
const GeneratedByLabel = "configbutler.ai/generated-by"

// generatedSuffix names the Receiver and the Secret generated for a GitRepoConfig.
const generatedSuffix = "-receiver"

// outsideNamespace is the Warning of a GitRepoConfig asking for a Receiver where the daemon may
// not create Secrets.
const outsideNamespace = "generated receivers are created in the daemon's namespace only"

// generate ensures the Receiver and Secret of every GitRepoConfig with spec.receiver, and deletes
// them when spec.receiver is removed.
func (c *Controller) generate(ctx context.Context) error {
	var errs []error
	for _, item := range c.repos.GetStore().List() {
		g, err := crds.FromUnstructured[crds.GitRepoConfig](item.(*unstructured.Unstructured))
		if err != nil {
			continue
		}
		switch {
		case c.cfg.Namespace != "" && g.Namespace != c.cfg.Namespace && g.Spec.Receiver == nil:
			// Nothing was generated there.
		case g.Spec.Receiver == nil:
			err = c.ungenerate(ctx, g)
		case c.cfg.Namespace != "" && g.Namespace != c.cfg.Namespace:
			c.warnOutside(g)
		default:
			err = c.ensureGenerated(ctx, g)
		}
		if err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// warnOutside records, once per GitRepoConfig, why its receiver is not generated.
func (c *Controller) warnOutside(g *crds.GitRepoConfig) {
	c.mu.Lock()
	if c.warned == nil {
		c.warned = map[types.UID]bool{}
	}
	seen := c.warned[g.UID]
	c.warned[g.UID] = true
	c.mu.Unlock()
	if !seen {
		c.cfg.Log.Warn("receivers: not generated", "gitrepoconfig", g.Namespace+"/"+g.Name, "why", outsideNamespace)
		c.recorder.Event(crds.ObjectReference(crds.KindGitRepoConfig, g), corev1.EventTypeWarning, "ReceiverNotGenerated", outsideNamespace)
	}
}

// ensureGenerated creates the Secret once, creates or repairs the Receiver, and reports both in
// the GitRepoConfig's status.receiver.
func (c *Controller) ensureGenerated(ctx context.Context, g *crds.GitRepoConfig) error {
	name := g.Name + generatedSuffix
	token, err := c.ensureSecret(ctx, g, name)
	if err != nil {
		return err
	}
	if err := c.ensureReceiver(ctx, g, name); err != nil {
		return err
	}
	want := &crds.GeneratedReceiverStatus{Name: name, SecretName: name}
	if len(token) > 0 {
		want.WebhookPath = WebhookPath(token, name, g.Namespace)
	}
	if g.Status.Receiver != nil && *g.Status.Receiver == *want {
		return nil
	}
	return c.patchRepoStatus(ctx, g, want)
}

// owner is the ownerReference that makes the GitRepoConfig's generated objects its own.
func owner(g *crds.GitRepoConfig) []metav1.OwnerReference {
	yes := true
	return []metav1.OwnerReference{{
		APIVersion: crds.GroupVersion.String(), Kind: crds.KindGitRepoConfig, Name: g.Name, UID: g.UID,
		Controller: &yes, BlockOwnerDeletion: &yes,
	}}
}

// ensureSecret returns the token of the generated Secret, creating it with a random token when it
// is missing. An existing token is never changed.
func (c *Controller) ensureSecret(ctx context.Context, g *crds.GitRepoConfig, name string) ([]byte, error) {
	secrets := kube.For(c.dyn, kube.Secrets, g.Namespace)
	s, err := secrets.Get(ctx, name, metav1.GetOptions{})
	if err == nil {
		return s.Data[crds.ReceiverTokenKey], nil
	}
	if !apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("read the receiver Secret %s/%s: %w", g.Namespace, name, err)
	}
	raw := make([]byte, 32)
	if _, err := rand.Read(raw); err != nil {
		return nil, fmt.Errorf("generate a receiver token: %w", err)
	}
	token := []byte(hex.EncodeToString(raw))
	s = &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: g.Namespace, Labels: map[string]string{GeneratedByLabel: g.Name},
			OwnerReferences: owner(g),
		},
		Type: corev1.SecretTypeOpaque,
		Data: map[string][]byte{crds.ReceiverTokenKey: token},
	}
	if _, err := secrets.Create(ctx, s, metav1.CreateOptions{FieldManager: crds.FieldManager}); err != nil {
		return nil, fmt.Errorf("create the receiver Secret %s/%s: %w", g.Namespace, name, err)
	}
	c.cfg.Log.Info("receivers: created a token Secret", "secret", g.Namespace+"/"+name)
	return token, nil
}

// generatedSpec is the spec of the Receiver generated for g; suspend is kept as the user set it.
func generatedSpec(g *crds.GitRepoConfig, name string, suspend bool) crds.ReceiverSpec {
	return crds.ReceiverSpec{
		Type: g.Spec.Receiver.Type, Events: g.Spec.Receiver.Events,
		SecretRef: crds.LocalReference{Name: name},
		Resources: []crds.ReceiverResource{{Kind: crds.KindGitRepoConfig, Name: g.Name}},
		Suspend:   suspend,
	}
}

// ensureReceiver creates the generated Receiver, or repairs its spec, label and owner.
func (c *Controller) ensureReceiver(ctx context.Context, g *crds.GitRepoConfig, name string) error {
	client := c.dyn.Resource(crds.Receivers).Namespace(g.Namespace)
	item, ok, _ := c.receivers.GetStore().GetByKey(g.Namespace + "/" + name)
	if !ok {
		r := &crds.Receiver{
			ObjectMeta: metav1.ObjectMeta{
				Name: name, Namespace: g.Namespace, Labels: map[string]string{GeneratedByLabel: g.Name},
				OwnerReferences: owner(g),
			},
			Spec: generatedSpec(g, name, false),
		}
		u, err := crds.ToUnstructured(r)
		if err != nil {
			return err
		}
		unstructured.RemoveNestedField(u.Object, "status")
		_, err = client.Create(ctx, u, metav1.CreateOptions{FieldManager: crds.FieldManager})
		if err != nil && !apierrors.IsAlreadyExists(err) { // AlreadyExists: the cache lags
			return fmt.Errorf("create the generated Receiver %s/%s: %w", g.Namespace, name, err)
		}
		c.cfg.Log.Info("receivers: generated a Receiver", "receiver", g.Namespace+"/"+name)
		return nil
	}
	r, err := crds.FromUnstructured[crds.Receiver](item.(*unstructured.Unstructured))
	if err != nil {
		return err
	}
	want := generatedSpec(g, name, r.Spec.Suspend)
	if sameSpec(r.Spec, want) && r.Labels[GeneratedByLabel] == g.Name && ownedBy(r.OwnerReferences, g.UID) {
		return nil
	}
	u := item.(*unstructured.Unstructured).DeepCopy()
	spec, err := crds.ToUnstructured(want)
	if err != nil {
		return err
	}
	u.Object["spec"] = spec.Object
	labels := u.GetLabels()
	if labels == nil {
		labels = map[string]string{}
	}
	labels[GeneratedByLabel] = g.Name
	u.SetLabels(labels)
	u.SetOwnerReferences(owner(g))
	if _, err := client.Update(ctx, u, metav1.UpdateOptions{FieldManager: crds.FieldManager}); err != nil {
		return fmt.Errorf("repair the generated Receiver %s/%s: %w", g.Namespace, name, err)
	}
	c.cfg.Log.Info("receivers: repaired a generated Receiver", "receiver", g.Namespace+"/"+name)
	return nil
}

// sameSpec compares Receiver specs, an empty list equal to none.
func sameSpec(a, b crds.ReceiverSpec) bool {
	return a.Type == b.Type && a.SecretRef == b.SecretRef && a.Suspend == b.Suspend &&
		slices.Equal(a.Events, b.Events) && slices.Equal(a.Resources, b.Resources)
}

// ownedBy reports whether refs hold a controller reference to uid.
func ownedBy(refs []metav1.OwnerReference, uid types.UID) bool {
	return slices.ContainsFunc(refs, func(r metav1.OwnerReference) bool {
		return r.UID == uid && r.Controller != nil && *r.Controller
	})
}

// ungenerate deletes the Receiver and Secret generated for g, once spec.receiver is removed, and
// clears its status.receiver. Objects of that name it did not generate are left alone.
func (c *Controller) ungenerate(ctx context.Context, g *crds.GitRepoConfig) error {
	name := g.Name + generatedSuffix
	item, found, _ := c.receivers.GetStore().GetByKey(g.Namespace + "/" + name)
	if found {
		u := item.(*unstructured.Unstructured)
		if ownedBy(u.GetOwnerReferences(), g.UID) || u.GetLabels()[GeneratedByLabel] == g.Name {
			err := c.dyn.Resource(crds.Receivers).Namespace(g.Namespace).Delete(ctx, name, metav1.DeleteOptions{})
			if err != nil && !apierrors.IsNotFound(err) {
				return fmt.Errorf("delete the generated Receiver %s/%s: %w", g.Namespace, name, err)
			}
		}
	}
	if !found && g.Status.Receiver == nil {
		return nil
	}
	secrets := kube.For(c.dyn, kube.Secrets, g.Namespace)
	s, err := secrets.Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		return fmt.Errorf("read the receiver Secret %s/%s: %w", g.Namespace, name, err)
	case ownedBy(s.OwnerReferences, g.UID) || s.Labels[GeneratedByLabel] == g.Name:
		if err := secrets.Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("delete the receiver Secret %s/%s: %w", g.Namespace, name, err)
		}
	}
	if g.Status.Receiver == nil {
		return nil
	}
	return c.patchRepoStatus(ctx, g, nil)
}

// patchRepoStatus sets (or, when st is nil, removes) status.receiver of a GitRepoConfig with a
// merge patch that touches nothing else: its conditions are another component's.
func (c *Controller) patchRepoStatus(ctx context.Context, g *crds.GitRepoConfig, st *crds.GeneratedReceiverStatus) error {
	body, err := json.Marshal(map[string]any{"status": map[string]any{"receiver": st}})
	if err != nil {
		return fmt.Errorf("encode status.receiver: %w", err)
	}
	_, err = c.dyn.Resource(crds.GitRepoConfigs).Namespace(g.Namespace).Patch(ctx, g.Name, types.MergePatchType, body,
		metav1.PatchOptions{FieldManager: crds.FieldManager}, "status")
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("update status.receiver of GitRepoConfig %s/%s: %w", g.Namespace, g.Name, err)
	}
	return nil
}
