package gitops

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/configbutler/gitops-reverser/layout"
	"github.com/configbutler/gitops-reverser/testenv"
)

// Authors of the pending intents in the coalesce tests.
var (
	testAlice = Signature{Name: "alice", Email: "alice@example.com"}
	testBob   = Signature{Name: "bob", Email: "bob@example.com"}
)

// writeItem, deleteItem and syncItem build pending intents; syncItem's scope is clusters/prod/.
func writeItem(author Signature, path, content string) item {
	return item{change: Change{Path: path, Content: []byte(content), Credit: Credit{Author: author}, Summary: "update " + path}}
}

func deleteItem(author Signature, path string) item {
	return item{change: Change{Path: path, Credit: Credit{Author: author}, Summary: "delete " + path}}
}

func syncItem(live ...string) item {
	s := &Sync{Scopes: []string{"clusters/prod/"}, Live: map[string]struct{}{}}
	for _, p := range live {
		s.Live[p] = struct{}{}
	}
	return item{sync: s}
}

func TestCoalesceKeepsLatestContentPerPath(t *testing.T) {
	const a, b, c = "clusters/prod/a.yaml", "clusters/prod/b.yaml", "clusters/prod/c.yaml"
	const staging, notes = "clusters/staging/x.yaml", "clusters/prod/notes.txt"
	cases := []struct {
		name string
		runs []run
		want []string // the one run by the bot, as rendered by render
	}{
		{"latest write per path across authors", []run{
			{author: testAlice, items: []item{writeItem(testAlice, a, "a1"), writeItem(testAlice, b, "b1")}},
			{author: testBob, items: []item{writeItem(testBob, a, "a2"), writeItem(testBob, c, "c1")}},
			{author: testAlice, items: []item{writeItem(testAlice, b, "b2")}},
		}, []string{"a.yaml=a2", "b.yaml=b2", "c.yaml=c1"}},
		{"a delete after writes is kept", []run{
			{author: testAlice, items: []item{writeItem(testAlice, a, "a1"), writeItem(testAlice, b, "b1")}},
			{author: testBob, items: []item{deleteItem(testBob, a)}},
		}, []string{"a.yaml=<delete>", "b.yaml=b1"}},
		{"a write after a delete wins", []run{
			{author: testAlice, items: []item{deleteItem(testAlice, a)}},
			{author: testBob, items: []item{writeItem(testBob, a, "a2")}},
		}, []string{"a.yaml=a2"}},
		{"a sync goes first and turns the writes it orphaned into deletes", []run{
			{author: testAlice, items: []item{writeItem(testAlice, a, "a1"), writeItem(testAlice, b, "b1")}},
			{author: testBot, items: []item{syncItem(b)}},
			{author: testBob, items: []item{writeItem(testBob, c, "c1")}},
		}, []string{"sync[b.yaml]", "a.yaml=<delete>", "b.yaml=b1", "c.yaml=c1"}},
		{"a write after a sync survives it", []run{
			{author: testBot, items: []item{syncItem()}},
			{author: testAlice, items: []item{writeItem(testAlice, a, "a1")}},
			{author: testBot, items: []item{syncItem(a)}},
		}, []string{"sync[]", "sync[a.yaml]", "a.yaml=a1"}},
		{"a sync orphans only yaml files in its scope", []run{
			{author: testAlice, items: []item{writeItem(testAlice, staging, "s1"), writeItem(testAlice, notes, "n1")}},
			{author: testBot, items: []item{syncItem()}},
		}, []string{"sync[]", "clusters/staging/x.yaml=s1", "notes.txt=n1"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := coalesce(tc.runs, testBot)
			if len(got) != 1 || got[0].author != testBot {
				t.Fatalf("coalesce = %s, want one run by the bot", describe(got))
			}
			if items := render(got[0].items); !slices.Equal(items, tc.want) {
				t.Errorf("coalesced run = %q, want %q", items, tc.want)
			}
		})
	}
}

// render shows items as sync[live paths] or path=content, paths under clusters/prod/ relative
// to it, with "@author" when a change has one.
func render(items []item) []string {
	out := make([]string, 0, len(items))
	for _, it := range items {
		if it.sync != nil {
			live := slices.Sorted(maps.Keys(it.sync.Live))
			for i := range live {
				live[i] = strings.TrimPrefix(live[i], "clusters/prod/")
			}
			out = append(out, fmt.Sprintf("sync%v", live))
			continue
		}
		s := strings.TrimPrefix(it.change.Path, "clusters/prod/") + "=" + describeContent(it.change.Content)
		if !it.change.Author.IsZero() {
			s += "@" + it.change.Author.Name
		}
		out = append(out, s)
	}
	return out
}

// TestCoalescedRunsReplayToTheSameTree checks coalesce against its contract on random
// histories: applying the one coalesced run gives the tree that replaying every run gives.
func TestCoalescedRunsReplayToTheSameTree(t *testing.T) {
	rnd := rand.New(rand.NewPCG(1, 2))
	for n := range 2000 {
		start, runs := randomHistory(rnd)
		want := replay(start, runs)
		merged := coalesce(runs, testBot)
		if got := replay(start, merged); !maps.Equal(got, want) {
			t.Fatalf("history %d: coalesced tree %v, replayed tree %v\nstart %v\nruns %s\ncoalesced %s",
				n, got, want, start, describe(runs), describe(merged))
		}
	}
}

// TestCoalescingRunByRunMatchesCoalescingAtOnce: past the pending bound the worker coalesces
// again at every new batch, continuing from the run the last coalesce returned. On random
// histories that gives exactly the run that coalescing every run at once gives.
func TestCoalescingRunByRunMatchesCoalescingAtOnce(t *testing.T) {
	rnd := rand.New(rand.NewPCG(3, 4))
	for n := range 2000 {
		_, runs := randomHistory(rnd)
		want := coalesce(runs, testBot)
		got := coalesce(runs[:1], testBot)
		for _, r := range runs[1:] {
			got = coalesce(append(got, r), testBot)
		}
		if !slices.Equal(render(got[0].items), render(want[0].items)) {
			t.Fatalf("history %d: coalesced run by run %s, at once %s\nruns %s", n, describe(got), describe(want), describe(runs))
		}
	}
}

// randomHistory is a random tree of path → content and runs of writes, deletes and syncs.
func randomHistory(rnd *rand.Rand) (map[string]string, []run) {
	pool := []string{cmPath("a"), cmPath("b"), cmPath("c"), cmPath("d"),
		layout.Path("clusters/staging", "", "configmaps", "default", "x"), "clusters/prod/notes.txt"}
	authors := []Signature{testAlice, testBob, {}}
	start := map[string]string{}
	for _, p := range pool {
		if rnd.IntN(2) == 0 {
			start[p] = "seed"
		}
	}
	var runs []run
	for r := range 1 + rnd.IntN(6) {
		author := authors[rnd.IntN(len(authors))]
		var items []item
		for i := range 1 + rnd.IntN(6) {
			p := pool[rnd.IntN(len(pool))]
			switch k := rnd.IntN(10); {
			case k < 6:
				items = append(items, writeItem(author, p, fmt.Sprintf("v%d.%d", r, i)))
			case k < 9:
				items = append(items, deleteItem(author, p))
			default:
				var live []string
				for _, p := range pool {
					if rnd.IntN(2) == 0 {
						live = append(live, p)
					}
				}
				items = append(items, syncItem(live...))
			}
		}
		runs = append(runs, run{author: author, items: items})
	}
	return start, runs
}

// replay applies runs to a tree of path → content the way commits do: item by item, a sync
// deleting the orphans of the tree as it stands.
func replay(start map[string]string, runs []run) map[string]string {
	tree := maps.Clone(start)
	for _, r := range runs {
		for _, it := range r.items {
			switch {
			case it.sync != nil:
				maps.DeleteFunc(tree, func(p, _ string) bool { return orphaned(p, it.sync) })
			case it.change.Content == nil:
				delete(tree, it.change.Path)
			default:
				tree[it.change.Path] = string(it.change.Content)
			}
		}
	}
	return tree
}

// describe renders runs for a failure message.
func describe(runs []run) string {
	var sb strings.Builder
	for _, r := range runs {
		fmt.Fprintf(&sb, "\n  %s: %s", r.author.Name, strings.Join(render(r.items), " "))
	}
	return sb.String()
}

func describeContent(c []byte) string {
	if c == nil {
		return "<delete>"
	}
	return string(c)
}

func TestPendingStaysBoundedDuringOutage(t *testing.T) {
	const paths, changes = 300, 3000
	limits := BatchLimits{MaxFiles: 100, MaxWait: time.Hour, Quiet: time.Hour}
	// What a worker holds: the pending runs, merged past maxPendingItems into one change per
	// path, plus the batch being filled.
	bound := max(maxPendingItems, paths) + limits.MaxFiles
	srv := MustGitServer(t)
	w := StartWorker(t, MustRepo(t, srv, "bounded"), "", limits)
	want := map[string]string{}
	change := func(p, round int) Change {
		name := fmt.Sprintf("cm-%03d", p)
		c := Change{Path: cmPath(name), Summary: "update " + name}
		if round == changes/paths-1 && p%10 == 0 {
			delete(want, c.Path)
			return c // the last round deletes every tenth object
		}
		c.Content = configMap(name, fmt.Sprint(round), 200)
		want[c.Path] = testenv.BlobHash(c.Content)
		return c
	}
	for p := range paths {
		MustEnqueue(t, w, change(p, -1))
	}
	MustFlush(t, w)

	srv.SetAvailable(false)
	authors := []Signature{testAlice, testBob, {}}
	peak := 0
	for i := range changes {
		c := change(i%paths, i/paths)
		c.Author = authors[i/paths%len(authors)]
		MustEnqueue(t, w, c)
		peak = max(peak, w.Status().Pending)
	}
	// Once the queue is empty every change was taken by the worker; it reports its status after
	// each push attempt, so after two more failures the status counts them all.
	testenv.Eventually(t, 30*time.Second, "the queue to drain", func() (bool, string) { return w.in.depth() == 0, fmt.Sprint(w.in.depth()) })
	failures := w.metric(t, "push_failures_total")
	testenv.Eventually(t, 30*time.Second, "two more failed pushes", func() (bool, string) {
		return w.metric(t, "push_failures_total") >= failures+2, fmt.Sprint(w.metric(t, "push_failures_total"))
	})
	s := w.Status()
	peak = max(peak, s.Pending)
	if peak > bound {
		t.Errorf("%d changes pending during the outage, want at most %d", peak, bound)
	}
	if s.Pending == 0 || s.LastError == nil {
		t.Errorf("status during outage = %+v, want pending changes and an error", s)
	}

	srv.SetAvailable(true)
	MustFlush(t, w)
	mustTree(t, srv, "bounded", "main", want)
	if s := w.Status(); s.Pending != 0 || s.LastError != nil {
		t.Errorf("status after the outage = %+v, want nothing pending and no error", s)
	}
	testenv.MustFsck(t, srv, "bounded")
}

// TestBotBatchesWaitingForOnePushAreOneCommit: batches by the bot that wait for the same push
// (here the remote is down from the start) become one commit; a batch by someone else between
// them keeps its own, and so does the bot's batch after it.
func TestBotBatchesWaitingForOnePushAreOneCommit(t *testing.T) {
	srv := MustGitServer(t)
	url := MustRepo(t, srv, "joined")
	srv.SetAvailable(false)
	w := StartWorker(t, url, "", BatchLimits{MaxFiles: 5, MaxWait: time.Hour, Quiet: time.Hour, IdleQuiet: time.Hour})
	for i := range 20 {
		c := Change{Path: cmPath(fmt.Sprint(i)), Content: configMap(fmt.Sprint(i), "1", 100)}
		if i >= 10 && i < 15 {
			c.Author = testAlice
		}
		MustEnqueue(t, w, c)
	}
	testenv.Eventually(t, 30*time.Second, "the queue to drain", func() (bool, string) { return w.in.depth() == 0, fmt.Sprint(w.in.depth()) })
	srv.SetAvailable(true)
	MustFlush(t, w)
	var got []string
	for _, c := range testenv.MustLog(t, srv, "joined") { // newest first
		got = append(got, fmt.Sprintf("%s: %s", c.AuthorName, c.Subject))
	}
	want := []string{
		testBot.Name + ": write " + cmPath("15") + " (+4 more)",
		testAlice.Name + ": write " + cmPath("10") + " (+4 more)",
		testBot.Name + ": write " + cmPath("0") + " (+9 more)",
	}
	if !slices.Equal(got, want) {
		t.Errorf("commits = %q, want %q", got, want)
	}
}
