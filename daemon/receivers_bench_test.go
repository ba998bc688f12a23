package daemon

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/configbutler/gitops-reverser/crds"
	"github.com/configbutler/gitops-reverser/testenv"
)

// BenchmarkReceiverFlood sends 1,000 signed GitHub pushes for one destination within about a
// second and prints how many write-back runs (each one fetch) they caused: a flood must not
// become a flood of fetches.
func BenchmarkReceiverFlood(b *testing.B) {
	planes.Lend(b)
	for range b.N {
		addr := testenv.FreeAddr(b)
		ns := fmt.Sprintf("bench-rcv-%d", time.Now().UnixNano()%1e6)
		w := newWBWorld(b, ns, crds.WriteBack{Enabled: true}, nil, "--receiver-bind-address", addr)
		ctx := context.Background()
		secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "hook", Namespace: ns}, StringData: map[string]string{"token": "flood"}}
		if _, err := w.kube.CoreV1().Secrets(ns).Create(ctx, secret, metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
		w.receiverFor(crds.ReceiverGitHub, "github")
		path := w.receiverPath("github")
		push := w.payload("github-commit-event.json", func(p map[string]any) {
			p["repository"].(map[string]any)["clone_url"] = w.srv.RepoURL("state")
		})
		mac := hmac.New(sha256.New, []byte("flood"))
		mac.Write(push)
		signature := "sha256=" + hex.EncodeToString(mac.Sum(nil))
		before := w.runsBy("receiver")
		// An edit for the first run to find: the second run, which finds none, is then the first
		// without an edit, which is recorded, so the SyncRuns still count the fetches.
		w.pushedByAPerson("flood")

		const pushes, senders = 1000, 8
		var next, accepted atomic.Int64
		var wg sync.WaitGroup
		start := time.Now()
		for range senders {
			wg.Go(func() {
				for i := next.Add(1); i <= pushes; i = next.Add(1) {
					code := w.post(addr, path, push, map[string]string{"X-GitHub-Event": "push",
						"X-GitHub-Delivery": fmt.Sprintf("flood-%d", i), "X-Hub-Signature-256": signature})
					if code == http.StatusAccepted {
						accepted.Add(1)
					}
				}
			})
		}
		wg.Wait()
		sent := time.Since(start)
		w.waitRun("receiver", before)
		runs := w.settledRuns(b, before)
		b.Logf("receiver: %d signed pushes in %v (%d accepted) → %d write-back runs (fetches) for the destination (goal ≤ 2)",
			pushes, sent.Round(time.Millisecond), accepted.Load(), runs)
		b.ReportMetric(float64(runs), "fetches")
	}
}

// settledRuns counts the SyncRuns triggered by receivers beyond the `before` there were, once
// none is running and the count has not moved for two seconds (bounded by 30 s).
func (w *wbWorld) settledRuns(b *testing.B, before int) int {
	count := func() (n int, running bool) {
		for _, r := range w.runs() {
			if r.Spec.Trigger == "receiver" {
				n++
				running = running || r.Status.Phase == crds.SyncRunRunning
			}
		}
		return n - before, running
	}
	last, stableSince := -1, time.Now()
	for end := time.Now().Add(30 * time.Second); time.Now().Before(end); time.Sleep(250 * time.Millisecond) { // pacing the polls
		n, running := count()
		if n != last || running {
			last, stableSince = n, time.Now()
			continue
		}
		if time.Since(stableSince) >= 2*time.Second {
			return n
		}
	}
	b.Fatalf("write-back runs did not settle within 30 s (last count %d)", last)
	return 0
}
