package webhook

import (
	"bytes"
	"cmp"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/configbutler/gitops-reverser/metrics"
	"github.com/configbutler/gitops-reverser/sanitize"
)

var (
	configMaps  = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	deployments = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}
	deployment  = schema.GroupKind{Group: "apps", Kind: "Deployment"}
)

// reviewCase describes one admission request; review renders it as the apiserver would send it.
type reviewCase struct {
	op, namespace, name, subResource string
	gvr                              schema.GroupVersionResource
	kind                             string
	object, oldObject                map[string]any
	dryRun                           bool
	user                             map[string]any // the userInfo; nil is alice
}

func (rc reviewCase) review(tb testing.TB) []byte {
	tb.Helper()
	gvr, kind := cmp.Or(rc.gvr, configMaps), cmp.Or(rc.kind, "ConfigMap")
	gvk := map[string]any{"group": gvr.Group, "version": gvr.Version, "kind": kind}
	res := map[string]any{"group": gvr.Group, "version": gvr.Version, "resource": gvr.Resource}
	if rc.user == nil {
		rc.user = map[string]any{"username": "alice", "uid": "1", "groups": []any{"devs", "system:authenticated"}}
	}
	req := map[string]any{
		"uid":  "705ab4f5-6393-11e8-b7cc-42010a800002",
		"kind": gvk, "resource": res, "requestKind": gvk, "requestResource": res,
		"namespace": rc.namespace, "name": rc.name, "operation": rc.op,
		"userInfo": rc.user,
		"object":   rc.object, "oldObject": rc.oldObject, "dryRun": rc.dryRun,
		"options": map[string]any{"apiVersion": "meta.k8s.io/v1", "kind": "CreateOptions"},
	}
	if rc.subResource != "" {
		req["subResource"] = rc.subResource
	}
	b, err := json.Marshal(map[string]any{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": req})
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

func cmObject(name string, data map[string]any) map[string]any {
	return map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": name, "namespace": "team-a", "uid": "u-1", "creationTimestamp": "2025-10-20T12:00:00Z"},
		"data":     data}
}

// newTestHandler watches ConfigMaps in team-a (all operations) and Deployment creates and updates
// everywhere.
func newTestHandler(tb testing.TB) (http.Handler, *Store, *metrics.Attribution) {
	tb.Helper()
	s, m, _ := newTestStore(tb, StoreConfig{})
	var w Watched
	w.Set([]Resource{
		{GVR: configMaps, Namespaced: true, Namespace: "team-a"},
		{GVR: deployments, Namespaced: true, Operations: []string{"CREATE", "UPDATE"}},
	})
	return NewAdmissionHandler(s, &w, m, nil), s, m
}

func post(h http.Handler, method, contentType string, body []byte) *httptest.ResponseRecorder {
	req := httptest.NewRequest(method, AdmissionPath, bytes.NewReader(body))
	req.Header.Set("Content-Type", contentType)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

func TestAdmissionAlwaysAllowsAndRecordsOnlyWatchedChanges(t *testing.T) {
	cm := cmObject("app", map[string]any{"k": "v"})
	cases := []struct {
		name    string
		rc      reviewCase
		wantLen int
		wantRes string
	}{
		{"watched create is recorded", reviewCase{op: "CREATE", namespace: "team-a", name: "app", object: cm}, 1, metrics.ReviewRecorded},
		{"watched update is recorded", reviewCase{op: "UPDATE", namespace: "team-a", name: "app", object: cm, oldObject: cm}, 1, metrics.ReviewRecorded},
		{"dry run is not recorded", reviewCase{op: "CREATE", namespace: "team-a", name: "app", object: cm, dryRun: true}, 0, metrics.ReviewDryRun},
		{"unwatched namespace is ignored", reviewCase{op: "CREATE", namespace: "team-b", name: "app", object: cm}, 0, metrics.ReviewIgnored},
		{"unwatched resource is ignored", reviewCase{op: "CREATE", namespace: "team-a", name: "app", object: cm,
			gvr: schema.GroupVersionResource{Version: "v1", Resource: "secrets"}, kind: "Secret"}, 0, metrics.ReviewIgnored},
		{"unwatched version is ignored", reviewCase{op: "CREATE", namespace: "team-a", name: "app", object: cm,
			gvr: schema.GroupVersionResource{Version: "v2", Resource: "configmaps"}}, 0, metrics.ReviewIgnored},
		{"unwatched operation is ignored", reviewCase{op: "DELETE", namespace: "team-b", name: "web", gvr: deployments, kind: "Deployment"}, 0, metrics.ReviewIgnored},
		{"connect is ignored", reviewCase{op: "CONNECT", namespace: "team-a", name: "app"}, 0, metrics.ReviewIgnored},
		{"subresource is ignored", reviewCase{op: "UPDATE", namespace: "team-a", name: "app", object: cm, subResource: "status"}, 0, metrics.ReviewIgnored},
		{"object that is not an object is allowed anyway", reviewCase{op: "CREATE", namespace: "team-a", name: "app"}, 0, metrics.ReviewError},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h, s, m := newTestHandler(t)
			rec := post(h, http.MethodPost, "application/json", tc.rc.review(t))
			if rec.Code != http.StatusOK {
				t.Fatalf("status = %d (%s); want 200", rec.Code, rec.Body)
			}
			var got admissionv1.AdmissionReview
			if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
				t.Fatalf("response is not an AdmissionReview: %v: %s", err, rec.Body)
			}
			if got.APIVersion != "admission.k8s.io/v1" || got.Kind != "AdmissionReview" || got.Response == nil ||
				got.Response.UID != "705ab4f5-6393-11e8-b7cc-42010a800002" || !got.Response.Allowed {
				t.Errorf("response = %s; want allowed with the request's uid", rec.Body)
			}
			if s.Len() != tc.wantLen {
				t.Errorf("store Len = %d; want %d", s.Len(), tc.wantLen)
			}
			if n := testutil.ToFloat64(m.Reviews.WithLabelValues(tc.wantRes)); n != 1 {
				t.Errorf("admission_reviews_total{result=%q} = %v; want 1", tc.wantRes, n)
			}
			if n := testutil.CollectAndCount(m.HandlerDuration); n != 1 {
				t.Errorf("handler duration series = %d; want 1", n)
			}
		})
	}
}

func TestAdmissionRejectsWhatIsNotAReview(t *testing.T) {
	valid := reviewCase{op: "CREATE", namespace: "team-a", name: "app", object: cmObject("app", nil)}.review(t)
	cases := []struct {
		name, method, contentType string
		body                      []byte
		chunked                   bool // no Content-Length: only the read itself finds the size
		want                      int
	}{
		{"GET is not allowed", http.MethodGet, "application/json", nil, false, http.StatusMethodNotAllowed},
		{"other content type", http.MethodPost, "text/plain", valid, false, http.StatusUnsupportedMediaType},
		{"body too big", http.MethodPost, "application/json", bytes.Repeat([]byte(" "), MaxReviewBytes+1), false, http.StatusRequestEntityTooLarge},
		{"chunked body too big", http.MethodPost, "application/json", bytes.Repeat([]byte(" "), MaxReviewBytes+1), true, http.StatusRequestEntityTooLarge},
		{"malformed JSON", http.MethodPost, "application/json", []byte(`{"apiVersion":`), false, http.StatusBadRequest},
		{"not an AdmissionReview", http.MethodPost, "application/json", []byte(`{"apiVersion":"v1","kind":"ConfigMap"}`), false, http.StatusBadRequest},
		{"review without a request", http.MethodPost, "application/json", []byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}`), false, http.StatusBadRequest},
		{"charset parameter is fine", http.MethodPost, "application/json; charset=utf-8", valid, false, http.StatusOK},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h, _, m := newTestHandler(t)
			var body io.Reader = bytes.NewReader(tc.body)
			if tc.chunked {
				body = io.MultiReader(body) // hides the length from httptest.NewRequest
			}
			req := httptest.NewRequest(tc.method, AdmissionPath, body)
			req.Header.Set("Content-Type", tc.contentType)
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != tc.want {
				t.Errorf("status = %d (%s); want %d", rec.Code, strings.TrimSpace(rec.Body.String()), tc.want)
			}
			if tc.want != http.StatusOK && testutil.ToFloat64(m.Reviews.WithLabelValues(metrics.ReviewError)) != 1 {
				t.Errorf("admission_reviews_total{result=error} not counted")
			}
		})
	}
}

// The watch gets the object from the dynamic client (integers as int64, plus the server's
// bookkeeping); admission decodes the request with encoding/json (float64). Both must agree.
func TestAdmissionRecordIsAnAuthorHitForTheWatchedObject(t *testing.T) {
	admitted := func() map[string]any {
		return map[string]any{"apiVersion": "apps/v1", "kind": "Deployment",
			"metadata": map[string]any{"name": "web", "namespace": "team-b", "uid": "u-2", "labels": map[string]any{"app": "web"},
				"managedFields": []any{map[string]any{"manager": "kubectl", "operation": "Update"}}},
			"spec": map[string]any{"replicas": 3, "progressDeadlineSeconds": 600, "revisionHistoryLimit": 10,
				"selector": map[string]any{"matchLabels": map[string]any{"app": "web"}},
				"template": map[string]any{"metadata": map[string]any{"labels": map[string]any{"app": "web"}},
					"spec": map[string]any{"terminationGracePeriodSeconds": 30, "containers": []any{map[string]any{
						"name": "web", "image": "nginx:1.27", "ports": []any{map[string]any{"containerPort": 8080, "protocol": "TCP"}},
						"resources": map[string]any{"limits": map[string]any{"cpu": "500m", "memory": "128Mi"}}}}}}}}
	}
	for _, op := range []string{"CREATE", "UPDATE"} {
		t.Run(op, func(t *testing.T) {
			h, st, _ := newTestHandler(t)
			rc := reviewCase{op: op, namespace: "team-b", name: "web", gvr: deployments, kind: "Deployment", object: admitted()}
			if op == "UPDATE" {
				rc.oldObject = admitted()
			}
			if rec := post(h, http.MethodPost, "application/json", rc.review(t)); rec.Code != http.StatusOK {
				t.Fatalf("status = %d", rec.Code)
			}
			stored := admitted()
			meta := stored["metadata"].(map[string]any)
			meta["resourceVersion"], meta["generation"], meta["creationTimestamp"] = "4711", 1, "2025-10-20T12:00:00Z"
			stored["status"] = map[string]any{"observedGeneration": 1, "replicas": 3}
			raw, err := json.Marshal(stored)
			if err != nil {
				t.Fatal(err)
			}
			var watched unstructured.Unstructured // as the dynamic client decodes it
			if err := watched.UnmarshalJSON(raw); err != nil {
				t.Fatal(err)
			}
			if r, _, _ := unstructured.NestedFieldNoCopy(watched.Object, "spec", "replicas"); r != int64(3) {
				t.Fatalf("watched replicas = %#v; want int64(3)", r)
			}
			content, err := sanitize.JSON(sanitize.Object(watched.Object))
			if err != nil {
				t.Fatal(err)
			}
			if got, ok := st.Author(op, deployment, "team-b", "web", content); !ok || got.Author != aliceSig {
				t.Errorf("Author = %+v, %v; want %+v, true", got, ok, aliceSig)
			}
		})
	}
}

func TestAdmissionDeleteIsRecordedByIdentity(t *testing.T) {
	h, st, _ := newTestHandler(t)
	rc := reviewCase{op: "DELETE", namespace: "team-a", name: "app", oldObject: cmObject("app", map[string]any{"k": "v"})}
	post(h, http.MethodPost, "application/json", rc.review(t))
	if got, ok := st.Author("DELETE", configMap, "team-a", "app", []byte("whatever the watch saw last\n")); !ok || got.Author != aliceSig {
		t.Errorf("Author = %+v, %v; want %+v, true", got, ok, aliceSig)
	}
}

// With generateName the request carries no name; the apiserver has put it in the object.
func TestAdmissionGeneratedNameComesFromTheObject(t *testing.T) {
	h, st, _ := newTestHandler(t)
	obj := cmObject("app-x7k2p", map[string]any{"k": "v"})
	obj["metadata"].(map[string]any)["generateName"] = "app-"
	post(h, http.MethodPost, "application/json", reviewCase{op: "CREATE", namespace: "team-a", object: obj}.review(t))
	content, err := sanitize.JSON(sanitize.Object(obj))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := st.Author("CREATE", configMap, "team-a", "app-x7k2p", content); !ok {
		t.Error("Author by the generated name is a miss")
	}
}

func TestAdmissionWatchedHas(t *testing.T) {
	var w Watched
	w.Set([]Resource{
		{GVR: configMaps, Namespaced: true, Namespace: "team-a", Operations: []string{"UPDATE"}},
		{GVR: deployments, Namespaced: true},
		{GVR: schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}, Namespace: "ignored-for-cluster-scope"},
	})
	cases := []struct {
		name      string
		gvr       schema.GroupVersionResource
		namespace string
		op        string
		want      bool
	}{
		{"listed operation in its namespace", configMaps, "team-a", "UPDATE", true},
		{"unlisted operation", configMaps, "team-a", "CREATE", false},
		{"other namespace", configMaps, "team-b", "UPDATE", false},
		{"every namespace", deployments, "anywhere", "DELETE", true},
		{"no operations means all three", deployments, "anywhere", "CREATE", true},
		{"connect is never watched", deployments, "anywhere", "CONNECT", false},
		{"cluster-scoped", schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}, "", "CREATE", true},
		{"unknown resource", schema.GroupVersionResource{Version: "v1", Resource: "pods"}, "team-a", "CREATE", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := w.Has(tc.gvr, tc.namespace, tc.op); got != tc.want {
				t.Errorf("Has = %v; want %v", got, tc.want)
			}
		})
	}
	var nothing *Watched
	if nothing.Has(configMaps, "team-a", "UPDATE") || new(Watched).Has(configMaps, "team-a", "UPDATE") {
		t.Error("an unset Watched watches something")
	}
}
