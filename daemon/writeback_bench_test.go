package daemon

import (
	"context"
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/configbutler/gitops-reverser/crds"
	"github.com/configbutler/gitops-reverser/layout"
)

// BenchmarkWriteBack prints how long a sync-now takes to show the proposal of one edited file in
// a destination of 10,000 files, and how long a run that opens and auto-applies 25 proposals
// takes end to end (sync-now → every proposal Applied), and how long an approval takes to be
// applied (the approval's patch → Applied).
// beforeWriteBack are the figures of main before write-back applied as the rules' ServiceAccounts
// (2d0f8b5, two runs on the same machine): impersonation costs nothing measurable, and each
// ServiceAccount's client has its own client-side rate limit, so 25 applies no longer queue behind
// the reads of the run (2.56-2.64 s after, in two runs).
const beforeWriteBack = "before, with the daemon's own rights: visible 50-59ms, 25 applied 3.559-3.571s, approval → applied 78-100ms"

func BenchmarkWriteBack(b *testing.B) {
	planes.Lend(b)
	for range b.N {
		// 10,000 files already in the folder before the baseline (no rule selects their kind, so the
		// mirror leaves them).
		w := newWBWorld(b, fmt.Sprintf("bench-wb-%d", time.Now().UnixNano()%1e6), crds.WriteBack{Enabled: true, AutoApply: true},
			func(w *wbWorld) {
				bulk := map[string]string{}
				for i := range 10000 {
					bulk[layout.Path("live", "example.com", "widgets", w.ns, fmt.Sprintf("w-%05d", i))] = fmt.Sprintf("kind: Widget\nmetadata:\n  name: w-%05d\n", i)
				}
				w.edit(bulk)
			})
		for i := range 25 {
			w.configMap(fmt.Sprintf("tick-%02d", i), map[string]string{"level": "zero"})
		}

		// One edited file.
		w.edit(map[string]string{w.cmPath("seed"): w.replace(w.liveYAML("seed"), "k: v", "k: edited")})
		start := time.Now()
		w.annotateSyncNow()
		visible := w.pollProposals(b, 1, start)

		// 25 files in one commit, auto-applied.
		write := map[string]string{}
		for i := range 25 {
			name := fmt.Sprintf("tick-%02d", i)
			write[w.cmPath(name)] = w.replace(w.liveYAML(name), "level: zero", "level: one")
		}
		w.edit(write)
		start = time.Now()
		w.annotateSyncNow()
		tick := w.pollApplied(b, 26, start)

		// A deleted file: a destroy waits for a person; alice approves it (the apiserver's policy
		// stamps her as the approver).
		w.reviewers("alice")
		grant(b, w.kube, w.ns, "alice")
		w.edit(nil, w.cmPath("tick-00"))
		w.syncNow()
		destroy := w.waitProposal(w.cmPath("tick-00"), "destroy proposal", func(p *crds.Proposal) bool {
			return p.Spec.Change == crds.ChangeDestroy && p.Status.Phase == crds.PhasePending
		})
		start = time.Now()
		w.decide("alice", destroy, crds.DecisionApprove)
		approved := w.pollApplied(b, 27, start)
		b.Logf("write-back: sync-now → proposal visible, 1 edited file of 10,000: %v (goal ≤ 500ms); sync-now → 25 proposals opened and applied: %v; "+
			"approval → applied: %v (%s)", visible.Round(time.Millisecond), tick.Round(time.Millisecond), approved.Round(time.Millisecond), beforeWriteBack)
		b.ReportMetric(float64(visible.Milliseconds()), "ms-proposal-visible")
		b.ReportMetric(float64(tick.Milliseconds()), "ms-25-applied")
		b.ReportMetric(float64(approved.Milliseconds()), "ms-approval-applied")
	}
}

// annotateSyncNow sets a new sync-now value without waiting for it.
func (w *wbWorld) annotateSyncNow() {
	*w.sync++
	w.patch(crds.GitDestinations, "dest", map[string]any{"metadata": map[string]any{"annotations": map[string]any{crds.AnnotationSyncNow: fmt.Sprint(*w.sync)}}})
}

// pollProposals polls without pause until n proposals exist and returns the time since start.
func (w *wbWorld) pollProposals(b *testing.B, n int, start time.Time) time.Duration {
	for time.Since(start) < time.Minute {
		list, err := w.dyn.Resource(crds.Proposals).Namespace(w.ns).List(context.Background(), metav1.ListOptions{})
		if err == nil && len(list.Items) >= n {
			return time.Since(start)
		}
		time.Sleep(2 * time.Millisecond) // pacing the polls, not synchronising
	}
	b.Fatalf("fewer than %d proposals after a minute", n)
	return 0
}

// pollApplied polls until n proposals are Applied and returns the time since start.
func (w *wbWorld) pollApplied(b *testing.B, n int, start time.Time) time.Duration {
	for time.Since(start) < 2*time.Minute {
		applied := 0
		for _, p := range w.proposals() {
			if p.Status.Phase == crds.PhaseApplied {
				applied++
			}
		}
		if applied >= n {
			return time.Since(start)
		}
		time.Sleep(5 * time.Millisecond) // pacing the polls, not synchronising
	}
	b.Fatalf("fewer than %d proposals applied after two minutes", n)
	return 0
}
