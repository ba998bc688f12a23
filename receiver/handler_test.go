package receiver

import (
	"bytes"
	"encoding/json"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/configbutler/gitops-reverser/crds"
	"github.com/configbutler/gitops-reverser/httpserver"
	"github.com/configbutler/gitops-reverser/metrics"
	"github.com/configbutler/gitops-reverser/testenv"
)

// otherRepo is the repoUrl of a destination no recorded payload names.
const otherRepo = "https://github.com/someone/else.git"

// fakeTrigger records the destinations the handler makes reconcile.
type fakeTrigger struct {
	mu    sync.Mutex
	calls []string // namespace/name
}

func (f *fakeTrigger) trigger(namespace, name, why string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if why != TriggerReason {
		panic("trigger reason " + why)
	}
	f.calls = append(f.calls, namespace+"/"+name)
}

func (f *fakeTrigger) got() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.calls)
}

// observed is one call of the Observer.
type observed struct{ key, outcome, message string }

// rig is a handler over an index the test fills, with a recording trigger, observer and metrics.
type rig struct {
	index    *Index
	entries  map[string]*Entry
	trig     *fakeTrigger
	metrics  *metrics.Receiver
	handler  http.Handler
	mu       sync.Mutex
	observed []observed
}

// newRig builds the rig; each option may change the handler's config before it is built.
func newRig(tb testing.TB, options ...func(*HandlerConfig)) *rig {
	tb.Helper()
	r := &rig{index: &Index{}, entries: map[string]*Entry{}, trig: &fakeTrigger{}, metrics: metrics.New().Receiver}
	cfg := HandlerConfig{
		Index:      r.index,
		Deliveries: NewDeliveries(0, 0, nil),
		Trigger:    r.trig.trigger,
		Observe: func(key, outcome, message string) {
			r.mu.Lock()
			defer r.mu.Unlock()
			r.observed = append(r.observed, observed{key, outcome, message})
		},
		Metrics: r.metrics,
	}
	for _, o := range options {
		o(&cfg)
	}
	r.handler = NewHandler(cfg)
	return r
}

// add puts a Receiver in the index and returns its webhook path.
func (r *rig) add(e *Entry) string {
	if e.Token == nil {
		e.Token = testToken
	}
	if e.Namespace == "" {
		e.Namespace = "apps"
	}
	p := WebhookPath(e.Token, e.Name, e.Namespace)
	r.entries[p] = e
	r.index.Set(maps.Clone(r.entries))
	return p
}

// do sends one request straight to the handler.
func (r *rig) do(method, path string, h http.Header, body []byte) *httptest.ResponseRecorder {
	req := httptest.NewRequest(method, path, bytes.NewReader(body))
	for k, v := range h {
		req.Header[k] = v
	}
	rec := httptest.NewRecorder()
	r.handler.ServeHTTP(rec, req)
	return rec
}

func (r *rig) lastObserved() observed {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.observed) == 0 {
		return observed{}
	}
	return r.observed[len(r.observed)-1]
}

// serve runs the rig's handler behind the real server on loopback and returns its base URL.
func (r *rig) serve(tb testing.TB) string {
	tb.Helper()
	s, err := httpserver.Listen(httpserver.Config{Name: "receiver", BindAddress: "127.0.0.1:0", Handler: r.handler})
	if err != nil {
		tb.Fatalf("start server: %v", err)
	}
	testenv.Run(tb, s)
	return "http://" + s.Addr()
}

// post sends a delivery over HTTP and returns the status and body.
func post(tb testing.TB, client *http.Client, u string, h http.Header, body []byte) (int, string) {
	tb.Helper()
	req, err := http.NewRequest(http.MethodPost, u, bytes.NewReader(body))
	if err != nil {
		tb.Fatal(err)
	}
	for k, v := range h {
		req.Header[k] = v
	}
	resp, err := client.Do(req)
	if err != nil {
		tb.Fatalf("POST: %v", err)
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		tb.Fatalf("read answer: %v", err)
	}
	return resp.StatusCode, string(b)
}

// triggeredIn decodes a 202 answer's list of destinations.
func triggeredIn(tb testing.TB, body string) []string {
	tb.Helper()
	var a struct {
		Triggered []string `json:"triggered"`
	}
	if err := json.Unmarshal([]byte(body), &a); err != nil {
		tb.Fatalf("answer %q: %v", body, err)
	}
	return a.Triggered
}

func TestRecordedPayloadsTriggerTheirRepositoryOnly(t *testing.T) {
	r := newRig(t)
	base := r.serve(t)
	for _, tc := range recordedPayloads {
		t.Run(tc.name, func(t *testing.T) {
			path := r.add(&Entry{Name: "rcv-" + tc.name, Type: tc.typ, Targets: []Target{
				{Namespace: "apps", Name: "other-" + tc.name, RepoURL: otherRepo},
				{Namespace: "apps", Name: "match-" + tc.name, RepoURL: tc.repoURL},
			}})
			before := len(r.trig.got())
			body := mustPayload(t, tc.file)
			status, answer := post(t, http.DefaultClient, base+path,
				signed(tc.typ, testToken, body, tc.event, "d-"+tc.name), body)
			calls := r.trig.got()[before:]
			if tc.ping {
				if status != http.StatusOK || strings.TrimSpace(answer) != "pong" || len(calls) != 0 {
					t.Fatalf("ping: %d %q, triggered %v; want 200 pong, nothing", status, answer, calls)
				}
				return
			}
			want := []string{"apps/match-" + tc.name}
			if status != http.StatusAccepted || !slices.Equal(calls, want) || !slices.Equal(triggeredIn(t, answer), want) {
				t.Fatalf("got %d %q, triggered %v; want 202 and %v", status, answer, calls, want)
			}
			if o := r.lastObserved(); o.outcome != crds.OutcomeTriggered || o.key != "apps/rcv-"+tc.name ||
				!strings.Contains(o.message, "triggered 1 destinations") {
				t.Errorf("observed %+v", o)
			}
		})
	}
}

// cdeventRepoURL is a repoUrl that one of refs names, or "" when refs is empty.
func cdeventRepoURL(t *testing.T, refs []string) string {
	t.Helper()
	for _, ref := range refs {
		u := ref
		if !strings.Contains(u, "://") {
			u = "https://git.example/" + ref
		}
		if SameRepository(ref, u) {
			return u
		}
	}
	if len(refs) > 0 {
		t.Fatalf("no repoUrl matches the references %q", refs)
	}
	return ""
}

func TestEveryCDEventsConformanceExampleTriggers(t *testing.T) {
	r := newRig(t)
	base := r.serve(t)
	auth := http.Header{"Authorization": {"Bearer " + string(testToken)}}
	for _, dir := range []string{"conformance", "v0.4.1/conformance"} {
		for _, ex := range MustLoadCDEventExamples(t, dir) {
			cde, err := parseCDEventBinary(ex, ex.raw, nil)
			if err != nil {
				t.Fatalf("%s: %v", ex.name, err)
			}
			for _, mode := range []string{"binary", "structured"} {
				t.Run(ex.name+"/"+mode, func(t *testing.T) {
					targets := []Target{{Namespace: "apps", Name: "a", RepoURL: otherRepo}}
					var want []string
					if u := cdeventRepoURL(t, cde.Repository); u != "" {
						targets = []Target{{Namespace: "apps", Name: "b", RepoURL: u}, targets[0]}
						want = []string{"apps/b"}
					} else {
						targets = append(targets, Target{Namespace: "apps", Name: "b", RepoURL: "https://x.example/y/z"})
						want = []string{"apps/a", "apps/b"}
					}
					path := r.add(&Entry{Name: strings.NewReplacer("/", "-", ".", "-").Replace(ex.name + "-" + mode),
						Type: TypeCDEvents, Targets: targets})
					var req *http.Request
					if mode == "binary" {
						req = cdeventBinaryRequest(ex, ex.raw)
					} else {
						req = cdeventStructuredRequest(cloudEventEnvelope(t, ex, ex.raw, nil))
					}
					h := req.Header.Clone()
					h.Set("Authorization", auth.Get("Authorization"))
					body, _ := io.ReadAll(req.Body)
					before := len(r.trig.got())
					status, answer := post(t, http.DefaultClient, base+path, h, body)
					calls := r.trig.got()[before:]
					if status != http.StatusAccepted || !slices.Equal(calls, want) {
						t.Fatalf("got %d %q, triggered %v; want 202 and %v", status, answer, calls, want)
					}
				})
			}
		}
	}
}

func TestCDEventsAcceptsGenericHMAC(t *testing.T) {
	r := newRig(t)
	path := r.add(&Entry{Name: "cde", Type: TypeCDEvents, Targets: []Target{{Namespace: "apps", Name: "d"}}})
	ex := MustLoadCDEventExamples(t, "conformance")[0]
	req := cdeventBinaryRequest(ex, ex.raw)
	req.Header.Set("X-Signature", "sha256="+sha256Hex(testToken, ex.raw))
	if rec := r.do(http.MethodPost, path, req.Header, ex.raw); rec.Code != http.StatusAccepted {
		t.Fatalf("got %d %q, want 202", rec.Code, rec.Body)
	}
	if got := r.trig.got(); !slices.Equal(got, []string{"apps/d"}) {
		t.Fatalf("triggered %v", got)
	}
}

// refusalCase is one request the handler must refuse with status, triggering nothing.
type refusalCase struct {
	name    string
	entry   Entry
	method  string
	path    string // "" = the entry's path
	header  http.Header
	body    []byte
	status  int
	outcome string
}

// refusalCases are the deliveries every receiver must refuse.
func refusalCases(t *testing.T) []refusalCase {
	push := mustPayload(t, "github-commit-event.json")
	const repo = "https://github.com/jessesuen/test-repo.git"
	gh := Entry{Name: "gh", Type: TypeGitHub, Targets: []Target{{Namespace: "apps", Name: "d", RepoURL: repo}}}
	gl := Entry{Name: "gl", Type: TypeGitLab, Targets: []Target{{Namespace: "apps", Name: "d", RepoURL: "https://gitlab.com/group/name"}}}
	cdEntry := Entry{Name: "cde", Type: TypeCDEvents, Targets: []Target{{Namespace: "apps", Name: "d"}}}
	gitlab := mustPayload(t, "gitlab-event.json")
	ex := MustLoadCDEventExamples(t, "conformance")[0]
	bearer := func(h http.Header) http.Header {
		h = h.Clone()
		h.Set("Authorization", "Bearer "+string(testToken))
		return h
	}
	tampered := bytes.Replace(push, []byte("jessesuen"), []byte("jessesuex"), 1)
	mismatched := cdeventBinaryRequest(ex, ex.raw).Header
	mismatched.Set("ce-type", "dev.cdevents.other.thing.0.1.0")
	noID := mutateCDEvent(t, ex.raw, func(doc map[string]any) { delete(cdeventField(doc, "context"), "id") })
	huge := append(append([]byte(`{"x":"`), bytes.Repeat([]byte("a"), MaxBodyBytes)...), '"', '}')
	notReady := gh
	notReady.NotReady = "suspended"
	refused := metrics.ReceiverRefused
	return []refusalCase{
		{"TamperedSignature", gh, "", "", signed(TypeGitHub, testToken, push, "push", "1"), tampered, 403, refused},
		{"WrongHMACKey", gh, "", "", signed(TypeGitHub, []byte("other"), push, "push", "1"), push, 403, refused},
		{"MissingSignature", gh, "", "", http.Header{"X-Github-Event": {"push"}}, push, 401, refused},
		{"WrongToken", gl, "", "", signed(TypeGitLab, []byte("other"), gitlab, "Push Hook", "1"), gitlab, 403, refused},
		{"MissingToken", gl, "", "", http.Header{"X-Gitlab-Event": {"Push Hook"}}, gitlab, 401, refused},
		{"CDEventsWithoutAuthorization", cdEntry, "", "", cdeventBinaryRequest(ex, ex.raw).Header, ex.raw, 401, refused},
		{"CDEventsWrongBearer", cdEntry, "", "", func() http.Header {
			h := cdeventBinaryRequest(ex, ex.raw).Header
			h.Set("Authorization", "Bearer nope")
			return h
		}(), ex.raw, 403, refused},
		{"CDEventsBasicAuth", cdEntry, "", "", func() http.Header {
			h := cdeventBinaryRequest(ex, ex.raw).Header
			h.Set("Authorization", "Basic "+string(testToken))
			return h
		}(), ex.raw, 401, refused},
		{"CDEventsTamperedHMAC", cdEntry, "", "", func() http.Header {
			h := bearer(cdeventBinaryRequest(ex, ex.raw).Header)
			h.Set("X-Signature", "sha256="+sha256Hex(testToken, push))
			return h
		}(), ex.raw, 403, refused},
		{"WrongRepository", Entry{Name: "gh2", Type: TypeGitHub, Targets: []Target{{Namespace: "apps", Name: "d", RepoURL: otherRepo}}},
			"", "", signed(TypeGitHub, testToken, push, "push", "1"), push, 403, refused},
		{"MismatchedCEType", cdEntry, "", "", bearer(mismatched), ex.raw, 400, refused},
		{"MissingRequiredField", cdEntry, "", "", bearer(cdeventBinaryRequest(ex, noID).Header), noID, 400, refused},
		{"OversizedBody", gh, "", "", signed(TypeGitHub, testToken, huge, "push", "1"), huge, 413, metrics.ReceiverTooLarge},
		{"WrongMethod", gh, http.MethodGet, "", nil, nil, 405, metrics.ReceiverBadMethod},
		{"UnknownPath", gh, "", "/hook/0000", signed(TypeGitHub, testToken, push, "push", "1"), push, 404, metrics.ReceiverNotFound},
		{"NotReady", notReady, "", "", signed(TypeGitHub, testToken, push, "push", "1"), push, 503, metrics.ReceiverNotReady},
		{"NoDestination", Entry{Name: "empty", Type: TypeGitHub}, "", "", signed(TypeGitHub, testToken, push, "push", "1"), push,
			503, metrics.ReceiverNotReady},
	}
}

func TestRefusedDeliveriesTriggerNothing(t *testing.T) {
	for _, tc := range refusalCases(t) {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t)
			e := tc.entry
			path := r.add(&e)
			if tc.path != "" {
				path = tc.path
			}
			method := tc.method
			if method == "" {
				method = http.MethodPost
			}
			rec := r.do(method, path, tc.header, tc.body)
			if rec.Code != tc.status {
				t.Fatalf("status %d (%q), want %d", rec.Code, rec.Body, tc.status)
			}
			if got := r.trig.got(); len(got) != 0 {
				t.Fatalf("triggered %v", got)
			}
			typ := e.Type
			if tc.status == http.StatusNotFound {
				typ = "unknown"
			}
			if n := testutil.ToFloat64(r.metrics.Requests.WithLabelValues(typ, tc.outcome)); n != 1 {
				t.Errorf("requests_total{%s,%s} = %v, want 1", typ, tc.outcome, n)
			}
			if n := testutil.ToFloat64(r.metrics.Triggers); n != 0 {
				t.Errorf("triggers_total = %v, want 0", n)
			}
			switch o := r.lastObserved(); {
			case tc.status == http.StatusNotFound && o != (observed{}):
				t.Errorf("an unknown path was observed: %+v", o)
			case tc.status != http.StatusNotFound && (o.outcome != crds.OutcomeRefused || o.key != "apps/"+e.Name):
				t.Errorf("observed %+v, want Refused for apps/%s", o, e.Name)
			}
		})
	}
}

func TestWrongMethodAnswersAllow(t *testing.T) {
	r := newRig(t)
	rec := r.do(http.MethodPut, "/hook/none", nil, nil)
	if rec.Code != http.StatusMethodNotAllowed || rec.Header().Get("Allow") != http.MethodPost {
		t.Fatalf("got %d, Allow %q", rec.Code, rec.Header().Get("Allow"))
	}
}

func TestOversizedChunkedBody(t *testing.T) {
	r := newRig(t)
	path := r.add(&Entry{Name: "gen", Type: TypeGeneric, Targets: []Target{{Namespace: "apps", Name: "d"}}})
	req := httptest.NewRequest(http.MethodPost, path, io.MultiReader(bytes.NewReader(make([]byte, MaxBodyBytes)),
		strings.NewReader("x")))
	req.ContentLength = -1
	rec := httptest.NewRecorder()
	r.handler.ServeHTTP(rec, req)
	if rec.Code != http.StatusRequestEntityTooLarge || len(r.trig.got()) != 0 {
		t.Fatalf("got %d, triggered %v; want 413 and nothing", rec.Code, r.trig.got())
	}
}

func TestReplayedDeliveryTriggersOnce(t *testing.T) {
	r := newRig(t)
	body := mustPayload(t, "github-commit-event.json")
	path := r.add(&Entry{Name: "gh", Type: TypeGitHub,
		Targets: []Target{{Namespace: "apps", Name: "d", RepoURL: "https://github.com/jessesuen/test-repo"}}})
	h := signed(TypeGitHub, testToken, body, "push", "delivery-42")

	// A forged copy first: it must not burn the id.
	forged := h.Clone()
	forged.Set("X-Hub-Signature-256", "sha256="+sha256Hex([]byte("other"), body))
	if rec := r.do(http.MethodPost, path, forged, body); rec.Code != http.StatusForbidden {
		t.Fatalf("forged: %d", rec.Code)
	}
	if rec := r.do(http.MethodPost, path, h, body); rec.Code != http.StatusAccepted {
		t.Fatalf("first: %d %q", rec.Code, rec.Body)
	}
	rec := r.do(http.MethodPost, path, h, body)
	if rec.Code != http.StatusOK || strings.TrimSpace(rec.Body.String()) != "duplicate delivery" {
		t.Fatalf("replay: %d %q, want 200 duplicate delivery", rec.Code, rec.Body)
	}
	if got := r.trig.got(); !slices.Equal(got, []string{"apps/d"}) {
		t.Fatalf("triggered %v, want apps/d once", got)
	}
}

func TestCDEventReplayUsesContextID(t *testing.T) {
	r := newRig(t)
	path := r.add(&Entry{Name: "cde", Type: TypeCDEvents, Targets: []Target{{Namespace: "apps", Name: "d"}}})
	ex := MustLoadCDEventExamples(t, "conformance")[0]
	bin := cdeventBinaryRequest(ex, ex.raw).Header
	bin.Set("Authorization", "Bearer "+string(testToken))
	env := cloudEventEnvelope(t, ex, ex.raw, nil)
	structured := cdeventStructuredRequest(env).Header
	structured.Set("Authorization", "Bearer "+string(testToken))
	if rec := r.do(http.MethodPost, path, bin, ex.raw); rec.Code != http.StatusAccepted {
		t.Fatalf("first: %d %q", rec.Code, rec.Body)
	}
	if rec := r.do(http.MethodPost, path, structured, env); rec.Code != http.StatusOK {
		t.Fatalf("the same event in structured mode: %d %q, want 200 duplicate", rec.Code, rec.Body)
	}
	if got := r.trig.got(); len(got) != 1 {
		t.Fatalf("triggered %v, want once", got)
	}
}

func TestFilteredAndPingTriggerNothing(t *testing.T) {
	r := newRig(t)
	push := mustPayload(t, "github-commit-event.json")
	ping := mustPayload(t, "github-ping-event.json")
	path := r.add(&Entry{Name: "gh", Type: TypeGitHub, Events: []string{"release"},
		Targets: []Target{{Namespace: "apps", Name: "d", RepoURL: "jessesuen/test-repo"}}})
	rec := r.do(http.MethodPost, path, signed(TypeGitHub, testToken, push, "push", "1"), push)
	if rec.Code != http.StatusOK || r.lastObserved().outcome != crds.OutcomeFiltered {
		t.Fatalf("filtered: %d %q, observed %+v", rec.Code, rec.Body, r.lastObserved())
	}
	rec = r.do(http.MethodPost, path, signed(TypeGitHub, testToken, ping, "ping", "2"), ping)
	if rec.Code != http.StatusOK || strings.TrimSpace(rec.Body.String()) != "pong" {
		t.Fatalf("ping: %d %q", rec.Code, rec.Body)
	}
	if got := r.trig.got(); len(got) != 0 {
		t.Fatalf("triggered %v", got)
	}
}

func TestGenericTriggersEveryTarget(t *testing.T) {
	r := newRig(t)
	path := r.add(&Entry{Name: "gen", Type: TypeGenericHMAC, Targets: []Target{
		{Namespace: "a", Name: "one", RepoURL: otherRepo}, {Namespace: "b", Name: "two"},
	}})
	body := []byte(`{"anything":true}`)
	rec := r.do(http.MethodPost, path, signed(TypeGenericHMAC, testToken, body, "", ""), body)
	if rec.Code != http.StatusAccepted || rec.Header().Get("Content-Type") != "application/json" {
		t.Fatalf("got %d %q", rec.Code, rec.Body)
	}
	want := []string{"a/one", "b/two"}
	if got := r.trig.got(); !slices.Equal(got, want) || !slices.Equal(triggeredIn(t, rec.Body.String()), want) {
		t.Fatalf("triggered %v, answer %q; want %v", got, rec.Body, want)
	}
}

func TestMetricsCountEveryOutcome(t *testing.T) {
	r := newRig(t)
	push := mustPayload(t, "github-commit-event.json")
	ping := mustPayload(t, "github-ping-event.json")
	path := r.add(&Entry{Name: "gh", Type: TypeGitHub, Targets: []Target{
		{Namespace: "apps", Name: "d", RepoURL: "jessesuen/test-repo"},
		{Namespace: "apps", Name: "e", RepoURL: "https://github.com/jessesuen/test-repo.git"},
		{Namespace: "apps", Name: "f", RepoURL: otherRepo},
	}})
	filtered := r.add(&Entry{Name: "ghf", Type: TypeGitHub, Events: []string{"release"},
		Targets: []Target{{Namespace: "apps", Name: "d", RepoURL: otherRepo}}})
	notReady := r.add(&Entry{Name: "nr", Type: TypeGitLab, NotReady: "suspended", Targets: []Target{{Name: "d"}}})
	signedPush := signed(TypeGitHub, testToken, push, "push", "one")
	r.do(http.MethodPost, path, signedPush, push)                                               // triggered 2
	r.do(http.MethodPost, path, signedPush, push)                                               // duplicate
	r.do(http.MethodPost, path, signed(TypeGitHub, testToken, ping, "ping", "p"), ping)         // ping
	r.do(http.MethodPost, path, signed(TypeGitHub, []byte("x"), push, "push", "two"), push)     // refused
	r.do(http.MethodPost, filtered, signed(TypeGitHub, testToken, push, "push", "three"), push) // filtered
	r.do(http.MethodPost, notReady, nil, nil)                                                   // not_ready
	r.do(http.MethodPost, "/hook/nothing", nil, nil)                                            // not_found
	r.do(http.MethodGet, path, nil, nil)                                                        // bad_method

	want := map[[2]string]float64{
		{TypeGitHub, metrics.ReceiverTriggered}: 1, {TypeGitHub, metrics.ReceiverDuplicate}: 1,
		{TypeGitHub, metrics.ReceiverPing}: 1, {TypeGitHub, metrics.ReceiverRefused}: 1,
		{TypeGitHub, metrics.ReceiverFiltered}: 1, {TypeGitLab, metrics.ReceiverNotReady}: 1,
		{"unknown", metrics.ReceiverNotFound}: 1, {TypeGitHub, metrics.ReceiverBadMethod}: 1,
	}
	for k, n := range want {
		if got := testutil.ToFloat64(r.metrics.Requests.WithLabelValues(k[0], k[1])); got != n {
			t.Errorf("receiver_requests_total{type=%q,outcome=%q} = %v, want %v", k[0], k[1], got, n)
		}
	}
	if got := testutil.CollectAndCount(r.metrics.Requests); got != len(want) {
		t.Errorf("%d series of receiver_requests_total, want %d", got, len(want))
	}
	if got := testutil.ToFloat64(r.metrics.Triggers); got != 2 {
		t.Errorf("receiver_triggers_total = %v, want 2", got)
	}
	if got := testutil.ToFloat64(r.metrics.Mismatches.WithLabelValues(TypeGitHub)); got != 1 {
		t.Errorf("receiver_repository_mismatches_total = %v, want 1 (the first push, for apps/f)", got)
	}
}

func TestUnknownTypeIsRefusedAndLabelledUnknown(t *testing.T) {
	r := newRig(t)
	path := r.add(&Entry{Name: "odd", Type: "svn", Targets: []Target{{Namespace: "apps", Name: "d"}}})
	if rec := r.do(http.MethodPost, path, nil, []byte("{}")); rec.Code < 400 || len(r.trig.got()) != 0 {
		t.Fatalf("got %d, triggered %v", rec.Code, r.trig.got())
	}
	if n := testutil.ToFloat64(r.metrics.Requests.WithLabelValues("unknown", metrics.ReceiverRefused)); n != 1 {
		t.Fatalf("requests_total{unknown,refused} = %v", n)
	}
}
