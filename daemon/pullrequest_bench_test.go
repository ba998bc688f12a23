package daemon

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/configbutler/gitops-reverser/testenv"
)

// BenchmarkPullRequest measures delivery by pull request on a real Gitea, with default batching:
// how long a change after a quiet spell takes to show in the open request, and, under a steady
// stream of updates, the API calls per batch (the goal: at most one write per batch, and none
// while nothing changes).
func BenchmarkPullRequest(b *testing.B) {
	planes.Lend(b)
	for range b.N {
		w := newGiteaWorld(b, fmt.Sprintf("bench-pr-%d", time.Now().UnixNano()%1e6))
		d := startDaemon(b, b.TempDir(), "--pull-request-poll", "1s")
		testenv.Eventually(b, time.Minute, "daemon watching", metricAtLeast(b, d, "gitops_reverser_watches", 1), d.FailFast())
		file := func(i int) string { return fmt.Sprintf("live/%s/configmaps/cm-%d.yaml", w.ns, i) }
		for i := range 30 {
			w.changeAs("", fmt.Sprintf("cm-%d", i), "0")
		}
		w.oneOpen(d, file(29))
		calls := func() (reads, writes float64) {
			for _, op := range []string{"find", "get", "labels"} {
				reads += d.Metric(b, fmt.Sprintf(`gitops_reverser_pull_request_api_calls_total{host="gitea",op=%q}`, op))
			}
			for _, op := range []string{"open", "update", "close"} {
				writes += d.Metric(b, fmt.Sprintf(`gitops_reverser_pull_request_api_calls_total{host="gitea",op=%q}`, op))
			}
			return reads, writes
		}

		settled := func() (reads, writes float64) { // the calls that follow a push have been made
			reads, writes = calls()
			for still := time.Now(); time.Since(still) < 2*time.Second; {
				time.Sleep(100 * time.Millisecond) // pacing the metric reads
				if r, w := calls(); r != reads || w != writes {
					reads, writes, still = r, w, time.Now()
				}
			}
			return reads, writes
		}

		var pushed, shown []time.Duration
		for round := 1; round <= 10; round++ {
			time.Sleep(2 * time.Second) // a quiet spell longer than the 1.5 s quiet period
			start := time.Now()
			want := fmt.Sprintf("v: %q", fmt.Sprint(round))
			w.changeAs("", "cm-0", fmt.Sprint(round))
			testenv.Eventually(b, time.Minute, "head branch pushed", func() (bool, string) {
				w.branch(w.head)
				return strings.Contains(w.run("show", "refs/remotes/origin/"+w.head+":"+file(0)), want), ""
			}, d.FailFast())
			pushed = append(pushed, time.Since(start))
			w.waitRequestShows(b, d, file(0), want)
			shown = append(shown, time.Since(start))
		}
		slices.Sort(pushed)
		slices.Sort(shown)

		reads0, writes0 := settled()
		_, before, _ := w.branch(w.head)
		const updates = 300
		start := time.Now()
		for i := range updates { // 300 updates of 30 objects over about 15 s
			w.changeAs("", fmt.Sprintf("cm-%d", i%30), fmt.Sprint(100+i))
			time.Sleep(50 * time.Millisecond) // pacing the stream, not synchronising
		}
		w.waitRequestShows(b, d, file((updates-1)%30), fmt.Sprintf("v: %q", fmt.Sprint(100+updates-1)))
		streamed := time.Since(start)
		reads1, writes1 := settled()
		_, after, _ := w.branch(w.head)
		batches := len(after) - len(before)

		time.Sleep(5 * time.Second) // five polls with nothing new
		reads2, writes2 := calls()
		report("pull request (Gitea): a change to its head branch pushed: median %v, max %v; to the request showing it: median %v, max %v (10 changes after quiet spells)",
			pushed[len(pushed)/2].Round(time.Millisecond), pushed[len(pushed)-1].Round(time.Millisecond),
			shown[len(shown)/2].Round(time.Millisecond), shown[len(shown)-1].Round(time.Millisecond))
		report("pull request (Gitea): stream of %d updates in %v: %d batches (commits), %.0f API writes (%.2f per batch), %.0f reads",
			updates, streamed.Round(time.Millisecond), batches, writes1-writes0, (writes1-writes0)/float64(max(batches, 1)), reads1-reads0)
		report("pull request (Gitea): idle 5 s with a poll each second: %.0f API calls", reads2-reads1+writes2-writes1)
	}
}

// waitRequestShows polls until the open request's head commit is the head
// branch's tip and that holds want in file.
func (w *giteaWorld) waitRequestShows(tb testing.TB, d *testenv.Daemon, file, want string) {
	tb.Helper()
	testenv.Eventually(tb, time.Minute, "the request shows "+want, func() (bool, string) {
		open := w.open()
		if len(open) != 1 {
			return false, fmt.Sprintf("%d open", len(open))
		}
		w.branch(w.head)
		tip := w.run("rev-parse", "refs/remotes/origin/"+w.head)
		content := w.run("show", tip+":"+file)
		return open[0].Head.Sha == tip && strings.Contains(content, want), fmt.Sprintf("request at %s, head %s", open[0].Head.Sha, tip)
	}, d.FailFast())
}
