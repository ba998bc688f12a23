package daemon

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/configbutler/gitops-reverser/crds"
	"github.com/configbutler/gitops-reverser/testenv"
)

// TestOperatorPageInABrowser drives the operator page of a running daemon in headless Chromium:
// without a token only the sign-in form shows; mallory, who may look but not decide, sees the
// pending proposal and its diff, and her Approve click is refused with nothing changed; alice's
// Approve click applies it, and the page then shows it applied with alice as its reviewer.
// Screenshots of each step are kept as artefacts (go test -artifacts).
func TestOperatorPageInABrowser(t *testing.T) {
	addr := testenv.FreeAddr(t)
	w := newWBWorld(t, "wb-page", crds.WriteBack{Enabled: true}, nil, "--ui-bind-address", addr)
	w.reviewers("alice")
	grant(t, w.kube, w.ns, "alice")
	w.proposalViewers("mallory")
	path, p := w.pendingEdit("page")
	base, shots := "http://"+addr, t.ArtifactDir()
	card := "#proposal-" + w.ns + "-" + p.Name
	signIn := func(user string) []testenv.BrowserStep {
		return []testenv.BrowserStep{
			{Goto: base + "/"},
			{Fill: "#token", Value: cp.UserConfig(user).BearerToken},
			{Click: "#sign-in button"},
			{WaitText: "signed in as " + user},
		}
	}
	noCSPViolation := func(who string, r testenv.BrowserResult) {
		t.Helper()
		for _, msg := range r.Console {
			if strings.Contains(msg, "Content Security Policy") || strings.HasPrefix(msg, "pageerror") {
				t.Errorf("%s's session: %s", who, msg)
			}
		}
	}
	w.d.WaitForStatus(t, base+"/static/app.js", 200)

	r := testenv.RunBrowser(t,
		testenv.BrowserStep{Goto: base + "/"},
		testenv.BrowserStep{WaitText: "Bearer token"},
		testenv.BrowserStep{Text: "main"},
		testenv.BrowserStep{Screenshot: filepath.Join(shots, "1-sign-in.png")},
	)
	if main := r.Texts[0]; strings.Contains(main, p.Name) || strings.Contains(main, path) || strings.Contains(main, w.ns) {
		t.Fatalf("without a token the page shows:\n%s", main)
	}
	noCSPViolation("anonymous", r)

	r = testenv.RunBrowser(t, append(signIn("mallory"),
		testenv.BrowserStep{WaitText: p.Name},
		testenv.BrowserStep{Text: card + " table.diff"},
		testenv.BrowserStep{Click: card + " button.approve"},
		testenv.BrowserStep{WaitText: "forbidden"},
		testenv.BrowserStep{Text: "#flash"},
		testenv.BrowserStep{Screenshot: filepath.Join(shots, "2-mallory-refused.png")},
	)...)
	if diff := r.Texts[0]; !strings.Contains(diff, "color: blue") || !strings.Contains(diff, "color: green") {
		t.Errorf("the diff mallory sees:\n%s", diff)
	}
	if flash := r.Texts[1]; !strings.Contains(flash, "mallory") || !strings.Contains(flash, p.Name) {
		t.Errorf("the refusal mallory sees: %q", flash)
	}
	noCSPViolation("mallory", r)
	if q := w.waitProposal(path, "still pending", func(q *crds.Proposal) bool { return q.Name == p.Name }); q.Spec.Decision != crds.DecisionNone ||
		q.Status.Phase != crds.PhasePending {
		t.Fatalf("after mallory's click: decision %q, phase %s", q.Spec.Decision, q.Status.Phase)
	}
	if got := w.liveColor("page"); got != "blue" {
		t.Fatalf("mallory's click changed the ConfigMap: color %q", got)
	}

	r = testenv.RunBrowser(t, append(signIn("alice"),
		testenv.BrowserStep{WaitText: p.Name},
		testenv.BrowserStep{Screenshot: filepath.Join(shots, "3-alice-pending.png")},
		testenv.BrowserStep{Click: card + " button.approve"},
		testenv.BrowserStep{WaitText: "Nothing waits for review"},
		testenv.BrowserStep{WaitText: "Applied"},
		testenv.BrowserStep{Text: "#history"},
		testenv.BrowserStep{Screenshot: filepath.Join(shots, "4-alice-applied.png")},
	)...)
	if history := r.Texts[0]; !strings.Contains(history, p.Name) || !strings.Contains(history, "Applied") || !strings.Contains(history, "alice") {
		t.Errorf("the history alice sees after her approval:\n%s", history)
	}
	noCSPViolation("alice", r)
	q := w.waitProposal(path, "applied", func(q *crds.Proposal) bool { return q.Name == p.Name && q.Status.Phase == crds.PhaseApplied })
	if q.Status.ReviewedBy == nil || q.Status.ReviewedBy.Username != "alice" {
		t.Errorf("reviewedBy %+v, want alice", q.Status.ReviewedBy)
	}
	if got := w.liveColor("page"); got != "green" {
		t.Errorf("color %q after alice's approval, want green", got)
	}
}

// proposalViewers lets users see the world's proposals, but not decide them.
func (w *wbWorld) proposalViewers(users ...string) {
	w.proposalRole("proposal-viewer", []string{"get", "list", "watch"}, users...)
}
