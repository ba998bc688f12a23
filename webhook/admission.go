package webhook

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/configbutler/gitops-reverser/httpserver"
	"github.com/configbutler/gitops-reverser/metrics"
	"github.com/configbutler/gitops-reverser/sanitize"
)

// AdmissionPath is where the apiserver sends admission reviews.
const AdmissionPath = "/process-validating-webhook"

// MaxReviewBytes caps an admission review body: an UPDATE carries the object and the old object,
// each up to etcd's ~1.5 MiB limit, plus JSON overhead.
const MaxReviewBytes = 6 << 20

// Resource is one resource the mirror watches, as the admission handler and the webhook
// registration need it.
type Resource struct {
	GVR        schema.GroupVersionResource
	Namespaced bool
	Namespace  string   // "" = every namespace
	Operations []string // CREATE | UPDATE | DELETE; empty = all three
}

// changingOperations are the admission operations that change an object.
var changingOperations = []string{"CREATE", "UPDATE", "DELETE"}

// operations are the resource's operations, all that change an object when none are listed.
func (r Resource) operations() []string {
	if len(r.Operations) == 0 {
		return changingOperations
	}
	return r.Operations
}

// Watched is the set of resources the mirror currently watches. Set replaces it whole; readers
// never lock. The zero value (and nil) watches nothing.
type Watched struct {
	index atomic.Pointer[map[watchKey]struct{}]
}

type watchKey struct {
	gvr       schema.GroupVersionResource
	namespace string // "" = every namespace (and cluster-scoped resources)
	op        string
}

// Set replaces the watched resources. Operations other than CREATE, UPDATE and DELETE are dropped.
func (w *Watched) Set(rs []Resource) {
	index := make(map[watchKey]struct{}, 3*len(rs))
	for _, r := range rs {
		ns := r.Namespace
		if !r.Namespaced {
			ns = ""
		}
		for _, op := range r.operations() {
			if slices.Contains(changingOperations, op) {
				index[watchKey{gvr: r.GVR, namespace: ns, op: op}] = struct{}{}
			}
		}
	}
	w.index.Store(&index)
}

// Has reports whether op on a gvr object in namespace ("" for cluster-scoped) is watched.
func (w *Watched) Has(gvr schema.GroupVersionResource, namespace, op string) bool {
	if w == nil {
		return false
	}
	p := w.index.Load()
	if p == nil {
		return false
	}
	if _, ok := (*p)[watchKey{gvr: gvr, op: op}]; ok || namespace == "" {
		return ok
	}
	_, ok := (*p)[watchKey{gvr: gvr, namespace: namespace, op: op}]
	return ok
}

// admissionReview is the part of an admission.k8s.io/v1 AdmissionReview we read. oldObject and
// the rest are skipped by the decoder rather than built, and the object is kept raw: encoding/json
// passes over both with its iterative scanner, so however deep they nest the envelope costs a copy
// of the object's bytes, and record can measure the object's depth before decoding it. Only a
// proposal's review is decoded a second time, for its oldObject (recordDecision).
type admissionReview struct {
	APIVersion string            `json:"apiVersion"`
	Kind       string            `json:"kind"`
	Request    *admissionRequest `json:"request"`
}

type admissionRequest struct {
	UID         string                      `json:"uid"`
	Kind        metav1.GroupVersionKind     `json:"kind"`
	Resource    metav1.GroupVersionResource `json:"resource"`
	SubResource string                      `json:"subResource"`
	Namespace   string                      `json:"namespace"`
	Name        string                      `json:"name"`
	Operation   string                      `json:"operation"`
	UserInfo    authenticationv1.UserInfo   `json:"userInfo"`
	Object      json.RawMessage             `json:"object"`
	DryRun      bool                        `json:"dryRun"`
}

// bodies holds read buffers between requests; one that grew past keepBuffer is left to the GC.
var bodies = sync.Pool{New: func() any { return bytes.NewBuffer(make([]byte, 0, 16<<10)) }}

const keepBuffer = 1 << 20

type admissionHandler struct {
	store     *Store
	watched   *Watched
	decisions *Decisions // nil: proposals are reviewed like any other resource
	peers     *Peers     // nil: records stay in this replica's store
	cluster   string     // the RemoteCluster whose apiserver calls this handler; "" for the daemon's own
	log       *slog.Logger
	duration  prometheus.Histogram
	results   map[string]prometheus.Counter
}

// AdmissionOption changes what NewAdmissionHandler's handler records.
type AdmissionOption func(*admissionHandler)

// WithDecisions has the handler record in d who changes a proposal's spec.decision. Reviews of
// ProposalsResource, in any version, then go to d instead of the attribution store, watched or
// not; the registration must include them (WithProposals) for the apiserver to send them. A nil d
// records nothing, and proposals are reviewed like any other resource.
func WithDecisions(d *Decisions) AdmissionOption {
	return func(h *admissionHandler) { h.decisions = d }
}

// NewAdmissionHandler returns the handler of AdmissionPath. It records who asked for each change
// to a watched resource in store and always allows: attribution must never block a write. Only a
// request that is not a well-formed review gets an error status (405, 413, 415 or 400).
func NewAdmissionHandler(store *Store, watched *Watched, m *metrics.Attribution, log *slog.Logger, opts ...AdmissionOption) http.Handler {
	if m == nil {
		m = metrics.New().Attribution
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	h := &admissionHandler{store: store, watched: watched, log: log, duration: m.HandlerDuration,
		results: map[string]prometheus.Counter{}}
	for _, o := range opts {
		o(h)
	}
	for _, r := range []string{metrics.ReviewRecorded, metrics.ReviewDryRun, metrics.ReviewIgnored, metrics.ReviewError} {
		h.results[r] = m.Reviews.WithLabelValues(r)
	}
	return h
}

func (h *admissionHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	h.results[h.serve(w, r)].Inc()
	h.duration.Observe(time.Since(start).Seconds())
}

// serve answers one request and returns its admission_reviews_total result.
func (h *admissionHandler) serve(w http.ResponseWriter, r *http.Request) string {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		http.Error(w, "admission reviews are POSTed", http.StatusMethodNotAllowed)
		return metrics.ReviewError
	}
	if media, _, _ := strings.Cut(r.Header.Get("Content-Type"), ";"); !strings.EqualFold(strings.TrimSpace(media), "application/json") {
		http.Error(w, "admission review must be application/json", http.StatusUnsupportedMediaType)
		return metrics.ReviewError
	}
	buf := bodies.Get().(*bytes.Buffer)
	defer func() {
		if buf.Cap() <= keepBuffer {
			buf.Reset()
			bodies.Put(buf)
		}
	}()
	if !readBody(w, r, buf) {
		return metrics.ReviewError
	}
	var review admissionReview
	if err := json.Unmarshal(buf.Bytes(), &review); err != nil {
		http.Error(w, "decode admission review: "+err.Error(), http.StatusBadRequest)
		return metrics.ReviewError
	}
	if review.APIVersion != "admission.k8s.io/v1" || review.Kind != "AdmissionReview" || review.Request == nil || review.Request.UID == "" {
		http.Error(w, "expected an admission.k8s.io/v1 AdmissionReview with a request and its uid", http.StatusBadRequest)
		return metrics.ReviewError
	}
	result, err := h.record(r.Context(), review.Request, buf.Bytes())
	if err != nil {
		h.log.Warn("admission review not recorded", "uid", review.Request.UID, "operation", review.Request.Operation,
			"kind", review.Request.Kind.Kind, "namespace", review.Request.Namespace, "name", review.Request.Name, "err", err)
	}
	writeAllowed(w, review.Request.UID)
	return result
}

// readBody reads the request body, up to MaxReviewBytes, into buf. When it fails it has answered
// the request (413 or 400) and returns false.
func readBody(w http.ResponseWriter, r *http.Request, buf *bytes.Buffer) bool {
	err := httpserver.ReadBody(w, r, buf, MaxReviewBytes)
	switch {
	case errors.Is(err, httpserver.ErrBodyTooLarge):
		http.Error(w, fmt.Sprintf("admission review is larger than %d bytes", MaxReviewBytes), http.StatusRequestEntityTooLarge)
	case err != nil:
		http.Error(w, "read admission review: "+err.Error(), http.StatusBadRequest)
	default:
		return true
	}
	return false
}

// record stores the author of a watched change, or who changed a proposal's decision, and returns
// the review's result. body is the whole review, for what its first decode skipped.
func (h *admissionHandler) record(ctx context.Context, req *admissionRequest, body []byte) (string, error) {
	gvr := schema.GroupVersionResource{Group: req.Resource.Group, Version: req.Resource.Version, Resource: req.Resource.Resource}
	switch {
	case req.DryRun:
		return metrics.ReviewDryRun, nil
	case req.SubResource != "":
		return metrics.ReviewIgnored, nil
	case h.decisions != nil && isProposals(gvr):
		return h.recordDecision(req, body)
	case !h.watched.Has(gvr, req.Namespace, req.Operation):
		return metrics.ReviewIgnored, nil // CONNECT is never watched
	}
	gk := schema.GroupKind{Group: req.Kind.Group, Kind: req.Kind.Kind}
	if req.Operation == "DELETE" {
		h.note(ctx, Change{Op: req.Operation, GK: gk, Namespace: req.Namespace, Name: req.Name}, req.UserInfo)
		return metrics.ReviewRecorded, nil
	}
	// Measured on the raw bytes first: the decode below recurses and allocates per level.
	if depth := jsonDepth(req.Object); depth > maxObjectDepth {
		return metrics.ReviewError, fmt.Errorf("%w: %d levels, at most %d are attributed", errTooDeep, depth, maxObjectDepth)
	}
	// A plain decode into a map, as sanitize expects: numbers become float64, which sanitize.JSON
	// renders like the dynamic client's int64, so both sides hash the same bytes.
	var obj map[string]any
	if err := json.Unmarshal(req.Object, &obj); err != nil {
		return metrics.ReviewError, fmt.Errorf("decode object: %w", err)
	}
	if obj == nil {
		return metrics.ReviewError, errors.New("request has no object")
	}
	name := req.Name
	if name == "" { // generateName: the apiserver named the object after the request was made
		meta, _ := obj["metadata"].(map[string]any)
		name, _ = meta["name"].(string)
	}
	content, err := sanitize.JSON(sanitize.Object(obj))
	if err != nil {
		return metrics.ReviewError, fmt.Errorf("sanitize object: %w", err)
	}
	h.note(ctx, Change{Op: req.Operation, GK: gk, Namespace: req.Namespace, Name: name, Content: content}, req.UserInfo)
	return metrics.ReviewRecorded, nil
}

// note records the change and hands the record to the peer replicas, before the review is
// answered: a peer's watch cannot see the change before the apiserver has the answer.
func (h *admissionHandler) note(ctx context.Context, c Change, user authenticationv1.UserInfo) {
	if rec, ok := h.store.Record(c, user); ok {
		rec.Cluster = h.cluster
		h.peers.Forward(ctx, rec)
	}
}

const (
	allowedPrefix = `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","response":{"uid":`
	allowedSuffix = `,"allowed":true}}`
)

// writeAllowed answers that the request may proceed, echoing its uid as the apiserver requires.
func writeAllowed(w http.ResponseWriter, uid string) {
	quoted, err := json.Marshal(uid)
	if err != nil { // a string always marshals; keep the response valid regardless
		quoted = []byte(`""`)
	}
	out := make([]byte, 0, len(allowedPrefix)+len(quoted)+len(allowedSuffix))
	out = append(append(append(out, allowedPrefix...), quoted...), allowedSuffix...)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(out)
}
