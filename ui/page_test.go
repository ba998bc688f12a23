package ui

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/configbutler/gitops-reverser/crds"
	"github.com/configbutler/gitops-reverser/gitops"
	"github.com/configbutler/gitops-reverser/testenv"
	"github.com/configbutler/gitops-reverser/writeback"
)

const sha = "0123456789abcdef0123456789abcdef01234567"

var (
	liveYAML    = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: web\ndata:\n  color: blue # the old one\n"
	desiredYAML = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: web\ndata:\n  color: green\n"
)

// fixtures fills a namespace with a repository, a destination, a SyncRun, a pending proposal
// named "pending" and an applied one named "done", reviewed by carol.
func (w *world) fixtures(ns string) {
	w.t.Helper()
	w.create(crds.GitRepoConfigs, &crds.GitRepoConfig{ObjectMeta: metav1.ObjectMeta{Name: "repo", Namespace: ns},
		Spec: crds.GitRepoConfigSpec{RepoURL: "https://git.example.com/" + ns + ".git", AllowedBranches: []string{"main"}}},
		crds.GitRepoConfigStatus{Status: crds.Status{Conditions: []metav1.Condition{{Type: crds.ConditionReady, Status: metav1.ConditionTrue,
			Reason: "Reachable", Message: "the remote answers", LastTransitionTime: metav1.Now()}}}})
	w.create(crds.GitDestinations, &crds.GitDestination{ObjectMeta: metav1.ObjectMeta{Name: "dest", Namespace: ns},
		Spec: crds.GitDestinationSpec{RepoRef: crds.NamespacedReference{Name: "repo"}, Branch: "main", BaseFolder: "live",
			WriteBack: &crds.WriteBack{Enabled: true}}},
		crds.GitDestinationStatus{Status: crds.Status{Conditions: []metav1.Condition{{Type: crds.ConditionReady, Status: metav1.ConditionFalse,
			Reason: "PushFailing", Message: "pushing fails (retrying)", LastTransitionTime: metav1.Now()}}}})
	started := metav1.NewTime(time.Now().Add(-time.Minute))
	completed := metav1.NewTime(started.Add(1500 * time.Millisecond))
	w.create(crds.SyncRuns, &crds.SyncRun{ObjectMeta: metav1.ObjectMeta{Name: "dest-run1", Namespace: ns, Labels: map[string]string{crds.LabelDestination: "dest"}},
		Spec: crds.SyncRunSpec{DestinationRef: crds.LocalReference{Name: "dest"}, Trigger: crds.TriggerReceiver}},
		crds.SyncRunStatus{Phase: crds.SyncRunPartial, StartedAt: &started, CompletedAt: &completed, DifferenceTotal: 4,
			ProposalsOpened: 2, Applied: 1, RefusedTotal: 1, Error: "1 file refused"})
	w.create(crds.Proposals, proposal(ns, "pending", writeback.UnifiedDiff([]byte(liveYAML), []byte(desiredYAML), "", "")), nil)
	decided := metav1.Now()
	w.create(crds.Proposals, proposal(ns, "done", "--- live\n+++ desired\n@@ -1 +1 @@\n-a: 1\n+a: 2\n"),
		crds.ProposalStatus{Phase: crds.PhaseApplied, Message: "applied", ReviewedBy: &crds.Reviewer{Username: "carol"}, DecidedAt: &decided})
}

func proposal(ns, name, diff string) *crds.Proposal {
	return &crds.Proposal{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{crds.LabelDestination: "dest"}},
		Spec: crds.ProposalSpec{
			DestinationRef: crds.LocalReference{Name: "dest"}, Change: crds.ChangeUpdate,
			Target: crds.ProposalTarget{APIVersion: "v1", Kind: "ConfigMap", Resource: "configmaps", Namespace: ns, Name: "web-" + name},
			Path:   "live/" + ns + "/configmaps/web-" + name + ".yaml", SourceCommit: sha,
			Author:  crds.GitAuthor{Name: "Alice Example", Email: "alice@example.com"},
			Desired: desiredYAML, Diff: diff, LiveResourceVersion: "1", LiveDigest: strings.Repeat("ab", 32),
		},
	}
}

func TestWithoutATokenOnlyTheSignInFormIsServed(t *testing.T) {
	w := newWorld(t)
	ns := w.namespace("a")
	w.fixtures(ns)
	base := startPage(t, Config{Auth: AuthToken})
	for _, path := range []string{"/", "/proposals/" + ns + "/pending"} {
		r := get(t, base, path, "")
		if r.status != http.StatusOK || !strings.Contains(r.body, `id="sign-in"`) {
			t.Fatalf("GET %s without a token: %d\n%s", path, r.status, r.body)
		}
		for _, secret := range []string{ns, "pending", "git.example.com", "Alice Example"} {
			if strings.Contains(r.body, secret) {
				t.Errorf("GET %s without a token shows %q", path, secret)
			}
		}
		if got := r.header.Get("Content-Security-Policy"); got != contentSecurityPolicy {
			t.Errorf("Content-Security-Policy %q", got)
		}
		if got := r.header.Get("Cache-Control"); got != "no-store" {
			t.Errorf("Cache-Control %q", got)
		}
	}
	bad := send(t, http.MethodGet, base+"/", "", nil, http.Header{"Authorization": {"Bearer not-a-token"}})
	if bad.status != http.StatusUnauthorized || !strings.Contains(bad.body, `id="sign-in"`) || !strings.Contains(bad.body, "not accepted") {
		t.Fatalf("a wrong token: %d\n%s", bad.status, bad.body)
	}
	basic := send(t, http.MethodGet, base+"/", "", nil, http.Header{"Authorization": {"Basic YWxpY2U6czNjcmV0"}})
	if basic.status != http.StatusUnauthorized {
		t.Fatalf("basic auth: %d", basic.status)
	}
}

func TestAViewerSeesOnlyTheNamespacesWhereTheyMayListProposals(t *testing.T) {
	w := newWorld(t)
	mine, theirs := w.namespace("mine"), w.namespace("theirs")
	w.fixtures(mine)
	w.fixtures(theirs)
	w.grant(mine, "alice", "get", "list")
	base := startPage(t, Config{Auth: AuthToken, Progress: func(url, branch string) (gitops.WorkerStatus, bool) {
		return gitops.WorkerStatus{LastPushed: sha, LastPushedAuthor: gitops.Signature{Name: "Bob Builder"}, LastPushTime: time.Now(),
			Pending: 7, Failures: 3, LastError: errString("remote hung up"), FailingSince: time.Now()}, url == "https://git.example.com/"+mine+".git"
	}})
	r := waitFor(t, base, "/", "alice", "/proposals/"+mine+"/pending", mine+"/done")
	for _, want := range []string{
		"https://git.example.com/" + mine + ".git", // the repository
		"PushFailing", "0123456789", "Bob Builder", "7 change(s) waiting", "3 in a row", "remote hung up", // destination and Git progress
		"dest-run1", "receiver", "Partial", "1 file refused", // its last SyncRun
		"Alice Example", ">color<", ">green<", // the pending proposal and its diff
		"carol", "Applied", // the decided one
		`class="approve"`, "alice",
	} {
		if !strings.Contains(r.body, want) {
			t.Errorf("alice's overview lacks %q", want)
		}
	}
	if strings.Contains(r.body, theirs) {
		t.Errorf("alice sees %s, where she may not list proposals", theirs)
	}
	if d := get(t, base, "/proposals/"+theirs+"/pending", "alice"); d.status != http.StatusNotFound || strings.Contains(d.body, "Alice Example") {
		t.Errorf("alice opens a proposal of %s: %d", theirs, d.status)
	}
	if r := get(t, base, "/", "mallory"); r.status != http.StatusOK || strings.Contains(r.body, mine) || !strings.Contains(r.body, "mallory") {
		t.Errorf("mallory, who may list nothing: %d, sees %s: %v", r.status, mine, strings.Contains(r.body, mine))
	}
}

type errString string

func (e errString) Error() string { return string(e) }

func TestAProposalShowsItsDiffUnifiedAndSideBySide(t *testing.T) {
	w := newWorld(t)
	ns := w.namespace("a")
	w.fixtures(ns)
	w.grant(ns, "alice", "get", "list")
	base := startPage(t, Config{Auth: AuthToken})
	unified := waitFor(t, base, "/proposals/"+ns+"/pending", "alice", "diff unified", `<tr class="del">`, `<tr class="add">`)
	if !strings.Contains(unified.body, `<span class="tc"># the old one</span>`) {
		t.Errorf("the comment of the removed line is not highlighted:\n%s", unified.body)
	}
	split := waitFor(t, base, "/proposals/"+ns+"/pending?view=split", "alice", "diff split", `class="code del"`, `class="code add"`)
	if strings.Contains(split.body, "diff unified") {
		t.Error("the side-by-side view also shows the unified one")
	}
}

func TestADecisionIsMadeWithTheViewersOwnToken(t *testing.T) {
	w := newWorld(t)
	ns := w.namespace("a")
	w.fixtures(ns)
	w.grant(ns, "alice", "get", "list", "patch")
	w.grant(ns, "mallory", "get", "list")
	base := startPage(t, Config{Auth: AuthToken})
	waitFor(t, base, "/", "mallory", ns+"/pending")
	decision := base + "/proposals/" + ns + "/pending/decision"

	// mallory may look but not decide: the apiserver refuses her patch, although the daemon
	// (whose client the page also holds) could make it.
	r := send(t, http.MethodPost, decision, "mallory", url.Values{"decision": {"Approve"}}, nil)
	if r.status != http.StatusForbidden || !strings.Contains(r.body, "mallory") {
		t.Fatalf("mallory approves: %d %s", r.status, r.body)
	}
	if got := w.proposal(ns, "pending").Spec.Decision; got != crds.DecisionNone {
		t.Fatalf("after mallory's refused approval the decision is %q", got)
	}

	// Another origin's page cannot make alice's browser decide, even with her token.
	for name, h := range map[string]http.Header{
		"cross-site fetch": {"Sec-Fetch-Site": {"cross-site"}},
		"foreign origin":   {"Origin": {"https://evil.example"}},
	} {
		if r := send(t, http.MethodPost, decision, "alice", url.Values{"decision": {"Approve"}}, h); r.status != http.StatusForbidden {
			t.Errorf("%s: %d %s", name, r.status, r.body)
		}
	}
	if got := w.proposal(ns, "pending").Spec.Decision; got != crds.DecisionNone {
		t.Fatalf("after cross-origin posts the decision is %q", got)
	}

	for name, c := range map[string]struct {
		user, decision string
		want           int
	}{
		"no token":         {"", "Approve", http.StatusUnauthorized},
		"unknown decision": {"alice", "Merge", http.StatusBadRequest},
	} {
		if r := send(t, http.MethodPost, decision, c.user, url.Values{"decision": {c.decision}}, nil); r.status != c.want {
			t.Errorf("%s: %d %s, want %d", name, r.status, r.body, c.want)
		}
	}
	big := url.Values{"decision": {"Approve"}, "pad": {strings.Repeat("x", 2*maxDecisionBytes)}}
	if r := send(t, http.MethodPost, decision, "alice", big, nil); r.status != http.StatusRequestEntityTooLarge {
		t.Errorf("an oversized body: %d %s", r.status, r.body)
	}

	same := http.Header{"Origin": {base}, "Sec-Fetch-Site": {"same-origin"}}
	if r := send(t, http.MethodPost, decision, "alice", url.Values{"decision": {"Approve"}}, same); r.status != http.StatusOK {
		t.Fatalf("alice approves: %d %s", r.status, r.body)
	}
	if got := w.proposal(ns, "pending").Spec.Decision; got != crds.DecisionApprove {
		t.Fatalf("after alice's approval the decision is %q", got)
	}
}

func TestWithoutSignInEverythingIsShownReadOnly(t *testing.T) {
	w := newWorld(t)
	ns := w.namespace("a")
	w.fixtures(ns)
	base := startPage(t, Config{Auth: AuthNone})
	r := waitFor(t, base, "/", "", ns+"/pending", "Alice Example")
	if strings.Contains(r.body, `class="decide"`) || strings.Contains(r.body, `id="sign-in"`) {
		t.Errorf("the read-only page offers decisions or a sign-in form")
	}
	if r := send(t, http.MethodPost, base+"/proposals/"+ns+"/pending/decision", "alice", url.Values{"decision": {"Approve"}}, nil); r.status != http.StatusForbidden {
		t.Errorf("a decision on the read-only page: %d %s", r.status, r.body)
	}
	if got := w.proposal(ns, "pending").Spec.Decision; got != crds.DecisionNone {
		t.Fatalf("the read-only page set the decision %q", got)
	}
}

func TestStaticFilesAreServed(t *testing.T) {
	base := startPage(t, Config{Auth: AuthToken})
	for path, typ := range map[string]string{"/static/app.js": "text/javascript", "/static/app.css": "text/css"} {
		r := get(t, base, path, "")
		if r.status != http.StatusOK || !strings.HasPrefix(r.header.Get("Content-Type"), typ) || r.header.Get("Content-Security-Policy") == "" {
			t.Errorf("GET %s: %d %s", path, r.status, r.header.Get("Content-Type"))
		}
	}
	if r := get(t, base, "/static/nothing.js", ""); r.status != http.StatusNotFound {
		t.Errorf("a missing file: %d", r.status)
	}
}

// TestPageShowsTheOwnersProgressOfABranchWrittenElsewhere: with shards, the replica serving the
// page may run no Git worker for a destination's branch; the page then shows the progress the
// branch's owner wrote into the destination's status.git.
func TestPageShowsTheOwnersProgressOfABranchWrittenElsewhere(t *testing.T) {
	w := newWorld(t)
	ns := w.namespace("elsewhere")
	w.create(crds.GitRepoConfigs, &crds.GitRepoConfig{ObjectMeta: metav1.ObjectMeta{Name: "repo", Namespace: ns},
		Spec: crds.GitRepoConfigSpec{RepoURL: "https://git.example.com/" + ns + ".git", AllowedBranches: []string{"main"}}}, nil)
	pushed := metav1.NewTime(time.Now().Add(-time.Minute).Truncate(time.Second))
	w.create(crds.GitDestinations, &crds.GitDestination{ObjectMeta: metav1.ObjectMeta{Name: "dest", Namespace: ns},
		Spec: crds.GitDestinationSpec{RepoRef: crds.NamespacedReference{Name: "repo"}, Branch: "main", BaseFolder: "live"}},
		crds.GitDestinationStatus{Git: &crds.GitProgress{LastPushedCommit: sha, LastPushTime: &pushed,
			LastPushAuthor: "Carol Owner <carol@example.com>", Pending: 5, Owner: "replica-b_0a1b2c3d"}})
	w.grant(ns, "alice", "get", "list")
	base := startPage(t, Config{Auth: AuthToken, Progress: func(string, string) (gitops.WorkerStatus, bool) {
		return gitops.WorkerStatus{}, false // no worker here: another replica owns every branch
	}})
	r := waitFor(t, base, "/", "alice", "0123456789", "Carol Owner", "5 change(s) waiting")
	if strings.Contains(r.body, "carol@example.com") {
		t.Errorf("the page shows the author's email, where it shows names only")
	}
}

// TestAPullRequestIsLinkedFromItsDestination: in a real browser, a destination that delivers by
// pull request shows its request as a link to the URL its status names (number and state as the
// text, rel="noopener noreferrer"), the files waiting and the head branch; a request whose URL is
// not http(s) is shown as text, not a link; a Direct destination shows no request.
func TestAPullRequestIsLinkedFromItsDestination(t *testing.T) {
	w := newWorld(t)
	ns := w.namespace("pr")
	w.create(crds.GitRepoConfigs, &crds.GitRepoConfig{ObjectMeta: metav1.ObjectMeta{Name: "repo", Namespace: ns},
		Spec: crds.GitRepoConfigSpec{RepoURL: "https://git.example.com/" + ns + ".git", AllowedBranches: []string{"main"}}}, nil)
	url := "https://git.example.com/" + ns + "/pulls/7"
	opened := metav1.NewTime(time.Now().Add(-2 * time.Hour))
	w.pullRequestDestination(ns, "review", &crds.PullRequestStatus{HeadBranch: "gitops-reverser/" + ns + "/review", Number: 7,
		URL: url, State: "open", ChangesWaiting: 3, OpenedAt: &opened})
	w.pullRequestDestination(ns, "hostile", &crds.PullRequestStatus{HeadBranch: "gitops-reverser/" + ns + "/hostile", Number: 9,
		URL: "javascript:alert(document.domain)", State: "open", ChangesWaiting: 1})
	w.create(crds.GitDestinations, &crds.GitDestination{ObjectMeta: metav1.ObjectMeta{Name: "direct", Namespace: ns},
		Spec: crds.GitDestinationSpec{RepoRef: crds.NamespacedReference{Name: "repo"}, Branch: "main", BaseFolder: "direct"}}, nil)
	base := startPage(t, Config{Auth: AuthNone})
	waitFor(t, base, "/", "", "#7 open", "#9 open", ns+"/direct")

	r := testenv.RunBrowser(t, testenv.BrowserStep{Goto: base + "/"}, testenv.BrowserStep{Eval: `[...document.querySelectorAll('article.dest')].map(d => ({
		id: d.id,
		request: d.querySelector('dd.request')?.innerText ?? null,
		links: [...d.querySelectorAll('dd.request a')].map(a => ({href: a.getAttribute('href'), rel: a.rel, text: a.textContent})),
	}))`})
	var dests []struct {
		ID      string
		Request *string
		Links   []struct{ Href, Rel, Text string }
	}
	if err := json.Unmarshal([]byte(r.Texts[0]), &dests); err != nil {
		t.Fatalf("the destinations %q: %v", r.Texts[0], err)
	}
	seen := map[string]bool{}
	for _, d := range dests {
		name, ok := strings.CutPrefix(d.ID, "dest-"+ns+"-")
		if !ok {
			continue // another test's namespace
		}
		seen[name] = true
		request := ""
		if d.Request != nil {
			request = *d.Request
		}
		switch name {
		case "review":
			if len(d.Links) != 1 || d.Links[0].Href != url || d.Links[0].Text != "#7 open" || d.Links[0].Rel != "noopener noreferrer" {
				t.Errorf("review's request links %+v, want one to %s, #7 open, rel noopener noreferrer", d.Links, url)
			}
			for _, want := range []string{"3 file(s) waiting", "opened 2h ago", "head gitops-reverser/" + ns + "/review"} {
				if !strings.Contains(request, want) {
					t.Errorf("review's request %q lacks %q", request, want)
				}
			}
		case "hostile":
			if len(d.Links) != 0 || !strings.Contains(request, "#9 open javascript:alert(document.domain)") {
				t.Errorf("the javascript: URL: request %q, links %+v; want it as text and no link", request, d.Links)
			}
		case "direct":
			if d.Request != nil {
				t.Errorf("the Direct destination shows a request: %q", request)
			}
		}
	}
	if len(seen) != 3 {
		t.Errorf("the page shows the destinations %v of %s, want direct, hostile and review", seen, ns)
	}
	if len(r.Console) != 0 || len(r.Failed) != 0 {
		t.Errorf("console %q, failed requests %q; want none", r.Console, r.Failed)
	}
}

// pullRequestDestination creates a GitDestination of the repository repo in namespace that
// delivers by pull request, with pr as its status.pullRequest.
func (w *world) pullRequestDestination(namespace, name string, pr *crds.PullRequestStatus) {
	w.t.Helper()
	w.create(crds.GitDestinations, &crds.GitDestination{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Spec: crds.GitDestinationSpec{RepoRef: crds.NamespacedReference{Name: "repo"}, Branch: "main", BaseFolder: name,
			Push: &crds.Push{Mode: crds.PushPullRequest, PullRequest: &crds.PullRequestPush{Provider: crds.ProviderGitea}}}},
		crds.GitDestinationStatus{PullRequest: pr})
}

// remoteCluster creates a RemoteCluster named name in namespace with status.
func (w *world) remoteCluster(namespace, name string, status crds.RemoteClusterStatus) {
	w.t.Helper()
	w.create(crds.RemoteClusters, &crds.RemoteCluster{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Spec: crds.RemoteClusterSpec{KubeConfig: crds.KubeConfigReference{SecretRef: crds.SecretKeyReference{Name: name + "-kubeconfig"}},
			Namespaces: []string{crds.AllNamespaces}}}, status)
}

// TestAViewerSeesTheRemoteClustersOfTheirNamespacesOnly: the overview lists each RemoteCluster
// of a namespace the viewer may list, with its Ready condition, server, watches, attribution and
// last event, and a destination names the cluster it mirrors; a viewer who sees no RemoteCluster
// gets no section of them.
func TestAViewerSeesTheRemoteClustersOfTheirNamespacesOnly(t *testing.T) {
	w := newWorld(t)
	mine, theirs, plain := w.namespace("mine"), w.namespace("theirs"), w.namespace("plain")
	w.fixtures(plain)
	lastEvent := metav1.NewTime(time.Now().Add(-3 * time.Minute))
	w.remoteCluster(mine, "prod", crds.RemoteClusterStatus{Server: "https://prod.example.com:6443", Watches: 12, LastEventTime: &lastEvent,
		Attribution: crds.AttributionFailing, Status: crds.Status{Conditions: []metav1.Condition{{Type: crds.ConditionReady,
			Status: metav1.ConditionFalse, Reason: "Unreachable", Message: "dial tcp: connection refused", LastTransitionTime: metav1.Now()}}}})
	w.remoteCluster(theirs, "staging", crds.RemoteClusterStatus{Server: "https://staging.example.com:6443", Attribution: crds.AttributionWorking})
	w.create(crds.GitDestinations, &crds.GitDestination{ObjectMeta: metav1.ObjectMeta{Name: "mirror", Namespace: mine},
		Spec: crds.GitDestinationSpec{RepoRef: crds.NamespacedReference{Name: "repo"}, Branch: "main", BaseFolder: "prod",
			ClusterRef: &crds.NamespacedReference{Name: "prod"}}}, nil)
	w.grant(mine, "alice", "get", "list")
	w.grant(plain, "bob", "get", "list")
	base := startPage(t, Config{Auth: AuthToken})

	r := waitFor(t, base, "/", "alice", `id="cluster-`+mine+`-prod"`, mine+"/mirror")
	row := r.body[strings.Index(r.body, `<tr id="cluster-`+mine+`-prod"`):]
	row = row[:strings.Index(row, "</tr>")]
	for _, want := range []string{mine + "/prod", "https://prod.example.com:6443", "False · Unreachable", "dial tcp: connection refused",
		"<td>12</td>", `class="attribution bad">Failing<`, "3m ago"} {
		if !strings.Contains(row, want) {
			t.Errorf("alice's row of the cluster lacks %q:\n%s", want, row)
		}
	}
	if !strings.Contains(r.body, "<dt>Cluster</dt><dd>"+mine+"/prod</dd>") {
		t.Errorf("the destination %s/mirror does not name its cluster", mine)
	}
	if strings.Contains(r.body, theirs) || strings.Contains(r.body, "staging.example.com") {
		t.Errorf("alice sees the RemoteCluster of %s, where she may not list proposals", theirs)
	}

	b := waitFor(t, base, "/", "bob", plain+"/dest")
	if strings.Contains(b.body, `id="clusters"`) || strings.Contains(b.body, "<dt>Cluster</dt>") {
		t.Errorf("bob, who may see no RemoteCluster, gets a section of them or a destination's cluster:\n%s", b.body)
	}
}

// TestAViewerSeesTheNotifyChannelsOfTheirNamespacesOnly: the overview lists each NotifyChannel
// of a namespace the viewer may list, with its type, Ready condition and counts; not another's.
func TestAViewerSeesTheNotifyChannelsOfTheirNamespacesOnly(t *testing.T) {
	w := newWorld(t)
	mine, theirs := w.namespace("mine"), w.namespace("theirs")
	w.fixtures(mine)
	sent := metav1.NewTime(time.Now().Add(-2 * time.Minute))
	for ns, name := range map[string]string{mine: "reviews", theirs: "their-alerts"} {
		w.create(crds.NotifyChannels, &crds.NotifyChannel{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec: crds.NotifyChannelSpec{Type: crds.ChannelSlack, SecretRef: crds.LocalReference{Name: "slack"}}},
			crds.NotifyChannelStatus{LastSentTime: &sent, Sent: 7, Failed: 2, Dropped: 1, Status: crds.Status{Conditions: []metav1.Condition{{
				Type: crds.ConditionReady, Status: metav1.ConditionFalse, Reason: "SendFailing", Message: "HTTP 500 from https://hooks.slack.com/…",
				LastTransitionTime: metav1.Now()}}}})
	}
	w.grant(mine, "alice", "get", "list")
	base := startPage(t, Config{Auth: AuthToken})
	r := waitFor(t, base, "/", "alice", `id="channel-`+mine+`-reviews"`)
	row := r.body[strings.Index(r.body, `<tr id="channel-`+mine+`-reviews"`):]
	row = row[:strings.Index(row, "</tr>")]
	for _, want := range []string{mine + "/reviews", "<td>slack</td>", "False · SendFailing", "HTTP 500", "2m ago", "<td>7</td><td>2</td><td>1</td>"} {
		if !strings.Contains(row, want) {
			t.Errorf("alice's row of the channel lacks %q:\n%s", want, row)
		}
	}
	if strings.Contains(r.body, "their-alerts") {
		t.Errorf("alice sees the NotifyChannel of %s, where she may not list proposals", theirs)
	}
}

// TestThePageDoesNotWaitForAKindTheApiserverDoesNotServe: on a cluster whose CRDs predate an
// optional kind (as RemoteClusters are), the page answers once the other kinds are cached,
// rather than "still reading" for ever.
func TestThePageDoesNotWaitForAKindTheApiserverDoesNotServe(t *testing.T) {
	w := newWorld(t)
	ns := w.namespace("a")
	w.fixtures(ns)
	p, err := New(Config{Kube: cp.AdminConfig(), Auth: AuthNone})
	if err != nil {
		t.Fatal(err)
	}
	missing := crds.GroupVersion.WithResource("notinstalleds")
	if err := p.cacheOptional(missing); err != nil {
		t.Fatal(err)
	}
	testenv.Run(t, p)
	srv := httptest.NewServer(p)
	t.Cleanup(srv.Close)
	waitFor(t, srv.URL, "/", "", ns+"/dest")
	if !p.notServed(missing) || p.stores[missing].HasSynced() {
		t.Errorf("the kind that is not served: notServed %v, synced %v", p.notServed(missing), p.stores[missing].HasSynced())
	}
}
