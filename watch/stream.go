package watch

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/go-json-experiment/json/jsontext"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
)

// streamClient is a raw client for the lists and watches of the mirror, and for discovery: it asks
// for JSON unless a request says otherwise, and turns an error answer into the apiserver's Status,
// as the dynamic client does.
func streamClient(cfg *rest.Config) (rest.Interface, error) {
	c := dynamic.ConfigFor(cfg)
	c.AcceptContentTypes = "application/json"
	client, err := rest.UnversionedRESTClientFor(c)
	if err != nil {
		return nil, fmt.Errorf("build REST client: %w", err)
	}
	return client, nil
}

// collection lists and watches one resource in one namespace ("" = all or cluster-scoped) over a
// streamClient, decoding each object once as it arrives (decodeObject): a page of a list is never
// held whole, as text or as objects.
type collection struct {
	client           rest.Interface
	path             string // of the collection, as the dynamic client builds it
	apiVersion, kind string // of its objects, which a list's items may leave out
	// fieldSets keeps the field sets of managedFields, which only adopted folders read (who
	// changed what); else they are skipped unread.
	fieldSets bool
}

func newCollection(client rest.Interface, gvr schema.GroupVersionResource, kind, namespace string) collection {
	p := "/apis/" + gvr.Group + "/" + gvr.Version
	if gvr.Group == "" {
		p = "/api/" + gvr.Version
	}
	if namespace != "" {
		p += "/namespaces/" + namespace
	}
	return collection{client: client, path: p + "/" + gvr.Resource, apiVersion: gvr.GroupVersion().String(), kind: kind}
}

// listOptions are the parameters of a list or watch the watcher uses.
type listOptions struct {
	labelSelector string
	limit         int64
	continueToken string
	// A watch:
	resourceVersion string
	timeout         time.Duration
}

func (r collection) request(o listOptions) *rest.Request {
	req := r.client.Get().AbsPath(r.path)
	if o.labelSelector != "" {
		req.Param("labelSelector", o.labelSelector)
	}
	if o.limit > 0 {
		req.Param("limit", strconv.FormatInt(o.limit, 10))
	}
	if o.continueToken != "" {
		req.Param("continue", o.continueToken)
	}
	if o.timeout > 0 {
		req.Param("watch", "true").Param("allowWatchBookmarks", "true").
			Param("resourceVersion", o.resourceVersion).
			Param("timeoutSeconds", strconv.Itoa(int(o.timeout.Seconds())))
	}
	return req
}

// list reads one page of the list, handing each item to each as it is decoded, and returns the
// list's resourceVersion and continue token.
func (r collection) list(ctx context.Context, o listOptions, each func(*unstructured.Unstructured) error) (rv, next string, err error) {
	body, err := r.request(o).Stream(ctx)
	if err != nil {
		return "", "", err // the apiserver's Status, for apierrors: the caller wraps it
	}
	defer func() { _ = body.Close() }()
	dec := newDecoder(body)
	if tok, err := dec.ReadToken(); err != nil || tok.Kind() != '{' {
		return "", "", fmt.Errorf("read list: %w", unexpected("list", tok, err))
	}
	for dec.PeekKind() != '}' {
		name, err := dec.ReadToken()
		if err != nil {
			return "", "", fmt.Errorf("read list: %w", unexpected("list", name, err))
		}
		switch name.String() {
		case "metadata":
			meta, err := readObject(dec, nil)
			if err != nil {
				return "", "", fmt.Errorf("read list: %w", err)
			}
			rv, _ = meta["resourceVersion"].(string)
			next, _ = meta["continue"].(string)
		case "items":
			if err := r.items(dec, each); err != nil {
				return "", "", err
			}
		default:
			if err := dec.SkipValue(); err != nil {
				return "", "", fmt.Errorf("read list: %w", err)
			}
		}
	}
	return rv, next, nil
}

// items decodes the items of a list one by one and hands each to each. The apiserver leaves the
// apiVersion and kind out of the items of a list of built-in objects: they are set as client-go
// sets them.
func (r collection) items(dec *jsontext.Decoder, each func(*unstructured.Unstructured) error) error {
	if dec.PeekKind() == 'n' { // "items": null, an empty list
		return dec.SkipValue()
	}
	if tok, err := dec.ReadToken(); err != nil || tok.Kind() != '[' {
		return fmt.Errorf("read list: %w", unexpected("items", tok, err))
	}
	for dec.PeekKind() != ']' {
		obj, err := decodeObject(dec, r.fieldSets)
		if err != nil {
			return fmt.Errorf("read list: %w", err)
		}
		if obj["apiVersion"] == nil && obj["kind"] == nil {
			obj["apiVersion"], obj["kind"] = r.apiVersion, r.kind
		}
		if err := each(&unstructured.Unstructured{Object: obj}); err != nil {
			return err
		}
	}
	if _, err := dec.ReadToken(); err != nil {
		return fmt.Errorf("read list: %w", err)
	}
	return nil
}

// eventStream is an open watch: a sequence of {"type": ..., "object": {...}} documents.
type eventStream struct {
	body io.ReadCloser
	dec  *jsontext.Decoder
	// fieldSets: see collection.
	fieldSets bool
}

// watch opens a watch from o.resourceVersion, which the apiserver ends after o.timeout.
func (r collection) watch(ctx context.Context, o listOptions) (*eventStream, error) {
	body, err := r.request(o).Stream(ctx)
	if err != nil {
		return nil, err // the apiserver's Status, for apierrors: the caller wraps it
	}
	return &eventStream{body: body, dec: newDecoder(body), fieldSets: r.fieldSets}, nil
}

func (s *eventStream) Close() error { return s.body.Close() }

// next reads the next event. At the stream's end it returns io.EOF. An ERROR event is returned as
// the error its Status says (apierrors).
func (s *eventStream) next() (watch.EventType, *unstructured.Unstructured, error) {
	if s.dec.PeekKind() == 0 {
		if _, err := s.dec.ReadToken(); err != nil {
			return "", nil, err // io.EOF is the stream's end
		}
	}
	var typ watch.EventType
	var obj map[string]any
	_, err := readObject(s.dec, func(dec *jsontext.Decoder, name string) (any, error) {
		switch name {
		case "type":
			v, err := readValue(dec, nil)
			typ = watch.EventType(fmt.Sprint(v))
			return dropped, err
		case "object":
			var err error
			if typ == watch.Error { // a Status, whose status says Failure
				obj, err = readObject(dec, nil)
			} else {
				obj, err = decodeObject(dec, s.fieldSets)
			}
			return dropped, err
		}
		return dropped, dec.SkipValue()
	})
	if err != nil {
		return "", nil, fmt.Errorf("read watch event: %w", err)
	}
	if obj == nil {
		return "", nil, fmt.Errorf("read watch event %q: it has no object", typ)
	}
	u := &unstructured.Unstructured{Object: obj}
	if typ == watch.Error {
		return typ, u, apierrors.FromObject(u)
	}
	return typ, u, nil
}
