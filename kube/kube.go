// Package kube reads and writes the few built-in kinds the daemon uses (Secrets, Pods, Events,
// Leases, reviews, webhook configurations, CRDs) as their Go types, over the dynamic client, and
// discovers what the apiserver serves (Discover) over a raw client.
//
// client-go's typed clientsets, its informer factories, its discovery client and its leader
// election all register every API group of Kubernetes in one scheme when the process starts.
// Without them (and without client-go's event recorder) the binary went from 56 to 31 MB and the
// mirror's peak memory from 58 to 43 MiB, for a daemon that reads a handful of kinds. So the daemon links none of them
// (TestDaemonLinksNoAllGroupsScheme): the kinds it uses are converted from and to unstructured
// objects here, and RESTClient serves the raw requests of health checks.
package kube

import (
	"context"
	"fmt"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
)

// Resource is one kind the daemon reads or writes as the Go type T.
type Resource[T any] struct {
	GVR  schema.GroupVersionResource
	Kind string
}

// The kinds the daemon uses.
var (
	Secrets                         = Resource[corev1.Secret]{corev1.SchemeGroupVersion.WithResource("secrets"), "Secret"}
	Pods                            = Resource[corev1.Pod]{corev1.SchemeGroupVersion.WithResource("pods"), "Pod"}
	Namespaces                      = Resource[corev1.Namespace]{corev1.SchemeGroupVersion.WithResource("namespaces"), "Namespace"}
	ServiceAccounts                 = Resource[corev1.ServiceAccount]{corev1.SchemeGroupVersion.WithResource("serviceaccounts"), "ServiceAccount"}
	Events                          = Resource[corev1.Event]{corev1.SchemeGroupVersion.WithResource("events"), "Event"}
	Leases                          = Resource[coordinationv1.Lease]{coordinationv1.SchemeGroupVersion.WithResource("leases"), "Lease"}
	TokenReviews                    = Resource[authenticationv1.TokenReview]{authenticationv1.SchemeGroupVersion.WithResource("tokenreviews"), "TokenReview"}
	SelfSubjectReviews              = Resource[authenticationv1.SelfSubjectReview]{authenticationv1.SchemeGroupVersion.WithResource("selfsubjectreviews"), "SelfSubjectReview"}
	SelfSubjectAccessReviews        = Resource[authorizationv1.SelfSubjectAccessReview]{authorizationv1.SchemeGroupVersion.WithResource("selfsubjectaccessreviews"), "SelfSubjectAccessReview"}
	SubjectAccessReviews            = Resource[authorizationv1.SubjectAccessReview]{authorizationv1.SchemeGroupVersion.WithResource("subjectaccessreviews"), "SubjectAccessReview"}
	ValidatingWebhookConfigurations = Resource[admissionregistrationv1.ValidatingWebhookConfiguration]{
		admissionregistrationv1.SchemeGroupVersion.WithResource("validatingwebhookconfigurations"), "ValidatingWebhookConfiguration"}
	CustomResourceDefinitions = Resource[apiextensionsv1.CustomResourceDefinition]{
		apiextensionsv1.SchemeGroupVersion.WithResource("customresourcedefinitions"), "CustomResourceDefinition"}
)

// Client reads and writes objects of one kind in one namespace ("" for a cluster-scoped kind, or
// for all namespaces).
type Client[T any] struct {
	kind Resource[T]
	api  dynamic.ResourceInterface
}

// For is the client of kind in namespace.
func For[T any](dyn dynamic.Interface, kind Resource[T], namespace string) *Client[T] {
	res := dyn.Resource(kind.GVR)
	if namespace == "" {
		return &Client[T]{kind: kind, api: res}
	}
	return &Client[T]{kind: kind, api: res.Namespace(namespace)}
}

// Get reads one object.
func (c *Client[T]) Get(ctx context.Context, name string, opts metav1.GetOptions) (*T, error) {
	return c.typed(c.api.Get(ctx, name, opts))
}

// Create writes a new object.
func (c *Client[T]) Create(ctx context.Context, obj *T, opts metav1.CreateOptions) (*T, error) {
	u, err := c.unstructured(obj)
	if err != nil {
		return nil, err
	}
	return c.typed(c.api.Create(ctx, u, opts))
}

// Update replaces an object (at its resourceVersion, when it has one).
func (c *Client[T]) Update(ctx context.Context, obj *T, opts metav1.UpdateOptions) (*T, error) {
	u, err := c.unstructured(obj)
	if err != nil {
		return nil, err
	}
	return c.typed(c.api.Update(ctx, u, opts))
}

// Patch changes an object with a patch of type pt.
func (c *Client[T]) Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions) (*T, error) {
	return c.typed(c.api.Patch(ctx, name, pt, data, opts))
}

// Apply server-side applies obj as fieldManager opts.FieldManager.
func (c *Client[T]) Apply(ctx context.Context, obj *T, opts metav1.ApplyOptions) (*T, error) {
	u, err := c.unstructured(obj)
	if err != nil {
		return nil, err
	}
	return c.typed(c.api.Apply(ctx, u.GetName(), u, opts))
}

// Delete removes an object.
func (c *Client[T]) Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error {
	return c.api.Delete(ctx, name, opts)
}

// List reads the objects opts selects, as unstructured objects: a list is what informers take.
func (c *Client[T]) List(ctx context.Context, opts metav1.ListOptions) (*unstructured.UnstructuredList, error) {
	return c.api.List(ctx, opts)
}

// Watch follows the objects opts selects; the events carry unstructured objects (Convert reads one).
func (c *Client[T]) Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	return c.api.Watch(ctx, opts)
}

func (c *Client[T]) typed(u *unstructured.Unstructured, err error) (*T, error) {
	if err != nil {
		return nil, err
	}
	return Convert[T](u)
}

func (c *Client[T]) unstructured(obj *T) (*unstructured.Unstructured, error) {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, fmt.Errorf("encode %s: %w", c.kind.Kind, err)
	}
	u := &unstructured.Unstructured{Object: m}
	u.SetAPIVersion(c.kind.GVR.GroupVersion().String())
	u.SetKind(c.kind.Kind)
	return u, nil
}

// Convert reads an unstructured object (from a Client's List or Watch, or an informer) as T.
func Convert[T any](obj any) (*T, error) {
	out := new(T)
	u, ok := obj.(*unstructured.Unstructured)
	if !ok || u == nil {
		return nil, fmt.Errorf("convert %T to %T: not an unstructured object", obj, out)
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, out); err != nil {
		return nil, fmt.Errorf("convert %s %s/%s to %T: %w", u.GetKind(), u.GetNamespace(), u.GetName(), out, err)
	}
	return out, nil
}

// RESTClient is a client for raw requests (health checks) that knows no kinds.
func RESTClient(cfg *rest.Config) (*rest.RESTClient, error) {
	c := rest.CopyConfig(cfg)
	c.NegotiatedSerializer = serializer.NewCodecFactory(runtime.NewScheme()).WithoutConversion()
	client, err := rest.UnversionedRESTClientFor(c)
	if err != nil {
		return nil, fmt.Errorf("build REST client: %w", err)
	}
	return client, nil
}
