package webhook

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/configbutler/gitops-reverser/metrics"
	"github.com/configbutler/gitops-reverser/sanitize"
)

var (
	widgets = schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widgets"}
	widget  = schema.GroupKind{Group: "example.com", Kind: "Widget"}
)

// deepWidget is a Widget, a custom resource with preserved unknown fields, whose JSON nests depth
// levels deep (its own braces are level 1, its spec level 2).
func deepWidget(depth int) map[string]any {
	var spec any = int64(1)
	for range depth - 1 {
		spec = map[string]any{"a": spec}
	}
	return map[string]any{"apiVersion": "example.com/v1", "kind": "Widget",
		"metadata": map[string]any{"name": "deep", "namespace": "team-a"}, "spec": spec}
}

func deepReview(tb testing.TB, depth int) []byte {
	tb.Helper()
	return reviewCase{op: "CREATE", namespace: "team-a", name: "deep", gvr: widgets, kind: "Widget",
		object: deepWidget(depth)}.review(tb)
}

// newWidgetHandler watches Widgets everywhere and logs into the returned buffer.
func newWidgetHandler(tb testing.TB) (http.Handler, *Store, *metrics.Attribution, *bytes.Buffer) {
	tb.Helper()
	s, m, _ := newTestStore(tb, StoreConfig{})
	var w Watched
	w.Set([]Resource{{GVR: widgets, Namespaced: true}})
	var logs bytes.Buffer
	return NewAdmissionHandler(s, &w, m, slog.New(slog.NewTextHandler(&logs, nil))), s, m, &logs
}

// assertAllowed fails unless code and body answer a review from reviewCase: allowed, with its uid.
func assertAllowed(tb testing.TB, code int, body []byte) {
	tb.Helper()
	if code != http.StatusOK {
		tb.Fatalf("status = %d (%s); want 200", code, body)
	}
	var got admissionv1.AdmissionReview
	if err := json.Unmarshal(body, &got); err != nil {
		tb.Fatalf("response is not an AdmissionReview: %v: %s", err, body)
	}
	if got.Response == nil || got.Response.UID != "705ab4f5-6393-11e8-b7cc-42010a800002" || !got.Response.Allowed {
		tb.Errorf("response = %s; want allowed with the request's uid", body)
	}
}

func TestAdmissionAllowsTooDeepObjectsWithoutAttributingThem(t *testing.T) {
	cases := []struct {
		name      string
		depth     int
		recorded  bool
		wantRes   string
		wantWarns int
	}{
		{"just within the limit is recorded", maxObjectDepth, true, metrics.ReviewRecorded, 0},
		{"one level beyond the limit is allowed unrecorded", maxObjectDepth + 1, false, metrics.ReviewError, 1},
		{"9,000 levels deep is allowed unrecorded", 9000, false, metrics.ReviewError, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h, st, m, logs := newWidgetHandler(t)
			rec := post(h, http.MethodPost, "application/json", deepReview(t, tc.depth))
			assertAllowed(t, rec.Code, rec.Body.Bytes())
			if n := testutil.ToFloat64(m.Reviews.WithLabelValues(tc.wantRes)); n != 1 {
				t.Errorf("admission_reviews_total{result=%q} = %v; want 1", tc.wantRes, n)
			}
			warns := strings.Count(logs.String(), "level=WARN")
			if warns != tc.wantWarns || tc.wantWarns > 0 && !strings.Contains(logs.String(), "too deeply nested to attribute") {
				t.Errorf("%d warnings; want %d saying the object is too deeply nested to attribute:\n%s", warns, tc.wantWarns, logs)
			}
			content, err := sanitize.JSON(sanitize.Object(deepWidget(tc.depth)))
			if err != nil {
				t.Fatal(err)
			}
			if _, ok := st.Author("CREATE", widget, "team-a", "deep", content); ok != tc.recorded {
				t.Errorf("Author hit = %v; want %v", ok, tc.recorded)
			}
		})
	}
}

// Three concurrent reviews of a 9,000-deep object (54 KB each) once raised the webhook's RSS by
// 906 MB. Through the real handler behind an HTTP server they must now allocate less than 20 MiB
// in all. TotalAlloc counts every heap byte allocated in the window, freed or not, and the heap
// cannot grow by more than was allocated, so it bounds the heap's share of the RSS rise; the other
// share, goroutine stacks, stays small because the handler no longer decodes the object, the only
// step that recursed once per level.
func TestAdmissionOfDeepObjectsAllocatesLittle(t *testing.T) {
	const reviews, budget = 3, 20 << 20
	h, st, _, _ := newWidgetHandler(t)
	srv := httptest.NewServer(h)
	defer srv.Close()
	body := deepReview(t, 9000)
	t.Logf("review of %d bytes", len(body))

	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	codes, answers := make([]int, reviews), make([][]byte, reviews)
	var wg sync.WaitGroup
	for i := range reviews {
		wg.Go(func() {
			resp, err := srv.Client().Post(srv.URL+AdmissionPath, "application/json", bytes.NewReader(body))
			if err != nil {
				t.Errorf("post review: %v", err)
				return
			}
			defer func() { _ = resp.Body.Close() }()
			var out bytes.Buffer
			if _, err := out.ReadFrom(resp.Body); err != nil {
				t.Errorf("read answer: %v", err)
			}
			codes[i], answers[i] = resp.StatusCode, out.Bytes()
		})
	}
	wg.Wait()
	runtime.ReadMemStats(&after)

	allocated := after.TotalAlloc - before.TotalAlloc
	t.Logf("%d reviews allocated %d bytes", reviews, allocated)
	if allocated >= budget {
		t.Errorf("%d reviews of a 9,000-deep object allocated %d bytes; want less than %d", reviews, allocated, budget)
	}
	for i := range reviews {
		assertAllowed(t, codes[i], answers[i])
	}
	if st.Len() != 0 {
		t.Errorf("store Len = %d; want 0", st.Len())
	}
}
