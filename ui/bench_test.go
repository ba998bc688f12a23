package ui

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/configbutler/gitops-reverser/crds"
	"github.com/configbutler/gitops-reverser/testenv"
	"github.com/configbutler/gitops-reverser/writeback"
)

// benchProposals is how many proposals the page-load figures are measured with.
const benchProposals = 1000

// BenchmarkPageLoad measures the operator page with 1,000 proposals in four namespaces (half of
// them pending, each with a real diff): the server's answer to a signed-in viewer, first with
// every SubjectAccessReview still to ask and then with them remembered, a proposal's own page,
// and the whole load of the read-only page in headless Chromium, navigation start to the load
// event: in a browser just started (cold) and once more. Figures only; nothing asserts on time.
func BenchmarkPageLoad(b *testing.B) {
	w := newWorld(b)
	var namespaces []string
	for i := range 4 {
		ns := w.namespace(fmt.Sprint(i))
		namespaces = append(namespaces, ns)
		w.fixtures(ns)
		w.grant(ns, "alice", "get", "list")
	}
	created := time.Now()
	fillProposals(w, namespaces, benchProposals-2*len(namespaces))
	b.Logf("created %d proposals in %s", benchProposals, time.Since(created).Round(time.Millisecond))

	base := startPage(b, Config{Auth: AuthToken})
	last := fmt.Sprintf("%s/p%04d", namespaces[0], 0)
	all := fmt.Sprintf(`<span class="count">%d</span>`, benchProposals/2) // pending, and decided
	start := time.Now()
	first := waitFor(b, base, "/", "alice", all)
	b.Logf("until the first complete overview (caches filled, every SubjectAccessReview asked): %s, %.0f KiB", time.Since(start).Round(time.Millisecond), float64(len(first.body))/1024)

	b.Run("overview", func(b *testing.B) {
		for b.Loop() {
			if r := get(b, base, "/", "alice"); r.status != http.StatusOK {
				b.Fatalf("status %d", r.status)
			}
		}
	})
	b.Run("proposal", func(b *testing.B) {
		for b.Loop() {
			if r := get(b, base, "/proposals/"+last+"?view=split", "alice"); r.status != http.StatusOK {
				b.Fatalf("status %d", r.status)
			}
		}
	})
	b.Run("browser", func(b *testing.B) {
		open := startPage(b, Config{Auth: AuthNone})
		waitFor(b, open, "/", "", all)
		for b.Loop() {
			timing := testenv.BrowserStep{Eval: "performance.getEntriesByType('navigation')[0].toJSON()"}
			r := testenv.RunBrowser(b, testenv.BrowserStep{Goto: open + "/"}, timing, testenv.BrowserStep{Goto: open + "/?again"}, timing)
			for i, unit := range []string{"cold-load-ms", "load-ms"} {
				var nav struct{ ResponseEnd, LoadEventEnd float64 }
				if err := json.Unmarshal([]byte(r.Texts[i]), &nav); err != nil {
					b.Fatalf("navigation timing %q: %v", r.Texts[i], err)
				}
				b.ReportMetric(nav.LoadEventEnd, unit)
			}
		}
	})
}

// fillProposals creates n proposals across namespaces, every other one rejected.
func fillProposals(w *world, namespaces []string, n int) {
	live := strings.Repeat("  key: value\n", 20)
	diff := writeback.UnifiedDiff([]byte("data:\n"+live), []byte("data:\n"+strings.Replace(live, "value", "changed", 3)), "", "")
	for i := range n {
		var status any
		if i%2 == 1 {
			status = crds.ProposalStatus{Phase: crds.PhaseRejected, Message: "rejected"}
		}
		w.create(crds.Proposals, proposal(namespaces[i%len(namespaces)], fmt.Sprintf("p%04d", i), diff), status)
	}
}
