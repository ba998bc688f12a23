package receiver

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/configbutler/gitops-reverser/crds"
	"github.com/configbutler/gitops-reverser/metrics"
)

// withoutRepository re-encodes a recorded payload with its repository objects ("repository",
// and GitLab's "project") removed, or emptied when empty is set.
func withoutRepository(tb testing.TB, body []byte, empty bool) []byte {
	tb.Helper()
	var doc map[string]any
	if err := json.Unmarshal(body, &doc); err != nil {
		tb.Fatalf("decode payload: %v", err)
	}
	for _, k := range []string{"repository", "project"} {
		delete(doc, k)
		if empty {
			doc[k] = map[string]any{}
		}
	}
	out, err := json.Marshal(doc)
	if err != nil {
		tb.Fatal(err)
	}
	return out
}

func TestGitHostDeliveryNamingNoRepositoryIsRefused(t *testing.T) {
	for _, tc := range recordedPayloads {
		if tc.ping {
			continue
		}
		for _, variant := range []string{"absent", "empty"} {
			t.Run(tc.name+"/"+variant, func(t *testing.T) {
				r := newRig(t)
				path := r.add(&Entry{Name: "rcv", Type: tc.typ, Targets: []Target{
					{Namespace: "apps", Name: "match", RepoURL: tc.repoURL},
					{Namespace: "apps", Name: "other", RepoURL: otherRepo},
				}})
				body := withoutRepository(t, mustPayload(t, tc.file), variant == "empty")
				rec := r.do(http.MethodPost, path, signed(tc.typ, testToken, body, tc.event, "d-1"), body)
				if rec.Code != http.StatusForbidden || !strings.Contains(rec.Body.String(), "names no repository") {
					t.Fatalf("got %d %q, want 403 saying the payload names no repository", rec.Code, rec.Body)
				}
				if got := r.trig.got(); len(got) != 0 {
					t.Fatalf("triggered %v", got)
				}
				if n := testutil.ToFloat64(r.metrics.Requests.WithLabelValues(tc.typ, metrics.ReceiverRefused)); n != 1 {
					t.Errorf("requests_total{%s,refused} = %v, want 1", tc.typ, n)
				}
				if n := testutil.ToFloat64(r.metrics.Mismatches.WithLabelValues(tc.typ)); n != 2 {
					t.Errorf("repository_mismatches_total{%s} = %v, want 2 (both destinations)", tc.typ, n)
				}
				if n := testutil.ToFloat64(r.metrics.Triggers); n != 0 {
					t.Errorf("triggers_total = %v, want 0", n)
				}
				if o := r.lastObserved(); o.outcome != crds.OutcomeRefused || !strings.Contains(o.message, "names no repository") {
					t.Errorf("observed %+v, want Refused saying the payload names no repository", o)
				}
				// The same delivery with its repository still triggers: only the repository was missing.
				full := mustPayload(t, tc.file)
				if rec := r.do(http.MethodPost, path, signed(tc.typ, testToken, full, tc.event, "d-2"), full); rec.Code != http.StatusAccepted {
					t.Fatalf("with its repository: %d %q, want 202", rec.Code, rec.Body)
				}
			})
		}
	}
}
