package ui

import (
	"net/http"
	"strings"
	"testing"

	"github.com/configbutler/gitops-reverser/testenv"
)

// TestAnUnansweredReviewShowsNoNamespace: a namespace is shown only to whom a review says may
// list its Proposals. While the apiserver does not answer reviews, a viewer it has not answered
// for yet gets an error page that says so, and neither the namespace's content nor its name.
func TestAnUnansweredReviewShowsNoNamespace(t *testing.T) {
	w := newWorld(t)
	ns := w.namespace("a")
	w.fixtures(ns)
	w.grant(ns, "alice", "get", "list")
	w.grant(ns, "carol", "get", "list")
	outage := testenv.Unanswer(testenv.Reviews)
	base := startPage(t, Config{Auth: AuthToken, Kube: outage.Config(cp.AdminConfig())})
	waitFor(t, base, "/", "alice", "/proposals/"+ns+"/pending")

	outage.Set(true)
	r := get(t, base, "/", "carol")
	if r.status != http.StatusBadGateway || !strings.Contains(r.body, "did not answer") {
		t.Errorf("unanswered: status %d, %.300q; want %d saying the Kubernetes API did not answer", r.status, r.body, http.StatusBadGateway)
	}
	for _, hidden := range []string{ns, "Alice Example"} {
		if strings.Contains(r.body, hidden) {
			t.Errorf("unanswered: carol's page shows %q", hidden)
		}
	}
}
