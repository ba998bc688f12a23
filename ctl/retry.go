package ctl

import (
	"context"
	"errors"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
)

// transientBackoff spaces the retries of a transient answer: from 200ms, half as long again each
// time, nine tries over about ten seconds. Long enough for the apiserver to serve CRDs it has just
// installed, short enough that a cluster without them fails soon.
var transientBackoff = wait.Backoff{Duration: 200 * time.Millisecond, Factor: 1.5, Jitter: 0.1, Steps: 9}

// kindClient is what the commands do with the objects of one configbutler.ai kind.
type kindClient interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions, subresources ...string) (*unstructured.Unstructured, error)
	List(ctx context.Context, opts metav1.ListOptions) (*unstructured.UnstructuredList, error)
	Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, subresources ...string) (*unstructured.Unstructured, error)
}

// ourKind is the client of gvr, one of the configbutler.ai kinds, in the session's namespace. Right
// after the CRDs are installed the apiserver may not serve them yet, so its requests retry a
// transient answer (see transient) for a while; every other answer returns at once.
func (s *session) ourKind(gvr schema.GroupVersionResource) kindClient {
	return retryingClient{api: s.dyn.Resource(gvr).Namespace(s.namespace)}
}

// retryingClient retries each request whose answer is transient, with transientBackoff.
type retryingClient struct{ api dynamic.ResourceInterface }

func (c retryingClient) Get(ctx context.Context, name string, opts metav1.GetOptions, subresources ...string) (*unstructured.Unstructured, error) {
	return retryTransient(ctx, func() (*unstructured.Unstructured, error) { return c.api.Get(ctx, name, opts, subresources...) })
}

func (c retryingClient) List(ctx context.Context, opts metav1.ListOptions) (*unstructured.UnstructuredList, error) {
	return retryTransient(ctx, func() (*unstructured.UnstructuredList, error) { return c.api.List(ctx, opts) })
}

func (c retryingClient) Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, subresources ...string) (*unstructured.Unstructured, error) {
	return retryTransient(ctx, func() (*unstructured.Unstructured, error) {
		return c.api.Patch(ctx, name, pt, data, opts, subresources...)
	})
}

// retryTransient calls call until it succeeds, fails for good, transientBackoff runs out or ctx
// ends; then it returns the last answer. A transient answer means the request did nothing, so a
// patch is as safe to repeat as a read.
func retryTransient[T any](ctx context.Context, call func() (T, error)) (T, error) {
	var out T
	var last error
	err := wait.ExponentialBackoffWithContext(ctx, transientBackoff, func(context.Context) (bool, error) {
		out, last = call()
		switch {
		case last == nil:
			return true, nil
		case transient(last):
			return false, nil
		default:
			return false, last
		}
	})
	if last != nil {
		return out, last
	}
	return out, err
}

// transient reports whether err is how the apiserver answers for a kind it does not serve yet:
// 503 ServiceUnavailable while the CRD's handler starts, or a NotFound of the resource itself.
// A NotFound of a named object is an answer, not a hiccup.
func transient(err error) bool {
	return apierrors.IsServiceUnavailable(err) || kindNotServed(err)
}

// kindNotServed reports whether err is a NotFound of the resource rather than of a named object:
// the apiserver has no handler for the kind (yet), so it names no object. The dynamic client
// names none either when the server answers with its plain 404 page instead of a Status.
func kindNotServed(err error) bool {
	var status apierrors.APIStatus
	if !apierrors.IsNotFound(err) || !errors.As(err, &status) {
		return false
	}
	details := status.Status().Details
	return details == nil || details.Name == ""
}
