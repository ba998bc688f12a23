package daemon

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/configbutler/gitops-reverser/crds"
	"github.com/configbutler/gitops-reverser/layout"
	"github.com/configbutler/gitops-reverser/testenv"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestOperatorPageInABrowser drives the operator page of a running daemon in headless Chromium:
// without a token only the sign-in form shows; mallory, who may look but not decide, sees the
// pending proposal and its diff, and her Approve click is refused with nothing changed; alice's
// Approve click applies it, and the page then shows it applied with alice as its reviewer.
// Screenshots of each step are kept as artefacts (go test -artifacts).
func TestOperatorPageInABrowser(t *testing.T) {
	cp := planes.Lend(t)
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

// TestOperatorPageThatCannotListenDegradesAndTheMirrorRuns: the page's port is taken, so the page
// is degraded and retries, while the mirror writes as ever; once the port is free it serves.
func TestOperatorPageThatCannotListenDegradesAndTheMirrorRuns(t *testing.T) {
	planes.Lend(t)
	const ns = "ui-port-taken"
	srv, kube := mirrorSetup(t, ns)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "app-config", Namespace: ns}, Data: map[string]string{"k": "v"}}
	if _, err := kube.CoreV1().ConfigMaps(ns).Create(context.Background(), cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := taken.Addr().String()
	d := startDaemon(t, t.TempDir(), "--ui-bind-address", addr)
	testenv.Eventually(t, time.Minute, "the mirror writes while the page cannot listen", remoteHas(srv, layout.Path("live", "", "configmaps", ns, "app-config")), d.FailFast())
	testenv.Eventually(t, time.Minute, "the page degraded", metricAtLeast(t, d, `gitops_reverser_degraded{part="ui"}`, 1), d.FailFast())
	if err := taken.Close(); err != nil {
		t.Fatal(err)
	}
	d.WaitForStatus(t, "http://"+addr+"/static/app.css", http.StatusOK)
	testenv.Eventually(t, time.Minute, "the page recovered", func() (bool, string) {
		v := d.Metric(t, `gitops_reverser_degraded{part="ui"}`)
		return v == 0, fmt.Sprint(v)
	}, d.FailFast())
}
