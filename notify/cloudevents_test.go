package notify_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"

	"github.com/cloudevents/sdk-go/v2/event"
	cehttp "github.com/cloudevents/sdk-go/v2/protocol/http"

	"github.com/configbutler/gitops-reverser/notify"
	"github.com/configbutler/gitops-reverser/receiver"
)

const ceSource = "gitops-reverser/team-a/ops"

// v041Conformance holds the CDEvents spec's v0.4.1 conformance examples (see testdata/README.md
// at the repository's root).
const v041Conformance = "../testdata/cdevents/v0.4.1/conformance"

// MustSendCloudEvent sends n to a loopback sink and returns the request it received, rebuilt,
// and the CloudEvent the SDK reads from it (validated).
func MustSendCloudEvent(t *testing.T, n notify.Notice) (*http.Request, []byte, *event.Event) {
	t.Helper()
	srv, got := MustChannel(t, http.StatusAccepted, "")
	if err := notify.NewCloudEvents(srv.URL+secretPath, ceSource, srv.Client()).Send(t.Context(), n); err != nil {
		t.Fatalf("Send = %v", err)
	}
	rec := MustReceive(t, got)
	req := httptest.NewRequestWithContext(t.Context(), http.MethodPost, "/", bytes.NewReader(rec.body))
	req.Header = rec.header
	ev, err := cehttp.NewEventFromHTTPRequest(req)
	if err != nil {
		t.Fatalf("the SDK reads no CloudEvent: %v", err)
	}
	if err := ev.Validate(); err != nil {
		t.Fatalf("invalid CloudEvent: %v", err)
	}
	// Binary mode: the attributes are headers, the body is the data alone.
	for h, want := range map[string]string{
		"Ce-Specversion": "1.0", "Ce-Type": ev.Type(), "Ce-Source": ceSource, "Ce-Id": ev.ID(),
		"Content-Type": "application/json",
	} {
		if got := rec.header.Get(h); got != want || got == "" {
			t.Errorf("header %s = %q, want %q", h, got, want)
		}
	}
	return req, rec.body, ev
}

func TestCloudEventTypes(t *testing.T) {
	proposal := func(reason string) notify.Notice {
		n := sampleNotice()
		n.Reason = reason
		return n
	}
	pushFailing := notify.Notice{
		Time:     sampleNotice().Time,
		Severity: notify.SeverityError,
		Reason:   "PushFailing",
		Message:  "rejected: non-fast-forward",
		Object:   notify.Ref{Kind: "GitDestination", Namespace: "team-a", Name: "prod"},
	}
	cases := []struct {
		name, wantType, example string // example: the v0.4.1 conformance example of wantType
		n                       notify.Notice
	}{
		{"a proposal opened is a change created", "dev.cdevents.change.created.0.3.0", "change_created.json", proposal("Opened")},
		{"a proposal applied is a change merged", "dev.cdevents.change.merged.0.2.0", "change_merged.json", proposal("Applied")},
		{"a proposal rejected is a change abandoned", "dev.cdevents.change.abandoned.0.2.0", "change_abandoned.json", proposal("Rejected")},
		{"a stale proposal is a change abandoned", "dev.cdevents.change.abandoned.0.2.0", "change_abandoned.json", proposal("Stale")},
		{"a proposal held for its approver's rights is still open: our own type",
			"ai.configbutler.gitops-reverser.approverforbidden.v1", "", proposal("ApproverForbidden")},
		{"a push failing is our own type", "ai.configbutler.gitops-reverser.pushfailing.v1", "", pushFailing},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req, body, ev := MustSendCloudEvent(t, tc.n)
			if ev.Type() != tc.wantType {
				t.Fatalf("type %q, want %q", ev.Type(), tc.wantType)
			}
			wantSubject := tc.n.Object.Kind + "/" + tc.n.Object.Namespace + "/" + tc.n.Object.Name
			if ev.Source() != ceSource || ev.Subject() != wantSubject || !ev.Time().Equal(tc.n.Time) {
				t.Errorf("source %q subject %q time %v", ev.Source(), ev.Subject(), ev.Time())
			}
			if tc.example == "" {
				var back notify.Notice
				if err := json.Unmarshal(ev.Data(), &back); err != nil || !reflect.DeepEqual(back, tc.n) {
					t.Errorf("the data is not the Notice (%v): %s", err, ev.Data())
				}
				return
			}
			checkCDEvent(t, req, body, ev, tc.n, tc.example)
		})
	}
}

// checkCDEvent checks a CDEvent the way this daemon's cdevents Receiver reads it, and its shape
// against the spec's own example of its type.
func checkCDEvent(t *testing.T, req *http.Request, body []byte, ev *event.Event, n notify.Notice, example string) {
	t.Helper()
	got, err := receiver.ParseCDEvent(req, body, nil)
	if err != nil {
		t.Fatalf("the cdevents Receiver refuses it: %v", err)
	}
	if got.ID != ev.ID() || got.Source != ceSource || got.SubjectID != ev.Subject() ||
		!slices.Contains(got.Repository, n.Repository) {
		t.Errorf("the Receiver reads %+v", got)
	}

	var doc struct {
		Context, Subject map[string]any
		CustomData       notify.Notice
	}
	if err := json.Unmarshal(ev.Data(), &doc); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(doc.CustomData, n) {
		t.Errorf("customData is\n%+v\nwant the Notice\n%+v", doc.CustomData, n)
	}

	raw, err := os.ReadFile(filepath.Join(v041Conformance, example))
	if err != nil {
		t.Fatal(err)
	}
	var spec struct{ Context, Subject map[string]any }
	if err := json.Unmarshal(raw, &spec); err != nil {
		t.Fatal(err)
	}
	// The schemas allow no other fields than their example shows (additionalProperties: false).
	assertKeysWithin(t, "context", doc.Context, spec.Context)
	assertKeysWithin(t, "subject", doc.Subject, spec.Subject)
	content, _ := doc.Subject["content"].(map[string]any)
	specContent, _ := spec.Subject["content"].(map[string]any)
	assertKeysWithin(t, "subject.content", content, specContent)
	for _, f := range []struct {
		name      string
		got, want any
	}{
		{"context.version", doc.Context["version"], spec.Context["version"]},
		{"context.type", doc.Context["type"], spec.Context["type"]},
		{"subject.type", doc.Subject["type"], spec.Subject["type"]},
	} {
		if f.got != f.want {
			t.Errorf("%s %v, want %v as the spec's example", f.name, f.got, f.want)
		}
	}
}

// assertKeysWithin fails for each key of got that want does not have.
func assertKeysWithin(t *testing.T, what string, got, want map[string]any) {
	t.Helper()
	for k := range got {
		if _, ok := want[k]; !ok {
			t.Errorf("%s has %q, which the spec's example of the type does not", what, k)
		}
	}
}

func TestCloudEventIDIsStableAcrossRetries(t *testing.T) {
	_, _, first := MustSendCloudEvent(t, sampleNotice())
	_, _, again := MustSendCloudEvent(t, sampleNotice())
	other := sampleNotice()
	other.Reason = "Applied"
	_, _, next := MustSendCloudEvent(t, other)
	if first.ID() != again.ID() {
		t.Errorf("the same Notice sent again has id %q, then %q: a receiver cannot drop the retry", first.ID(), again.ID())
	}
	if first.ID() == next.ID() {
		t.Errorf("two Notices share the id %q", first.ID())
	}
}
