package ctl

import (
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/configbutler/gitops-reverser/crds"
)

// TestProposalsListShowsTheProposalsOfTheContextsNamespace: alice, whose kubeconfig context
// names the namespace, lists its Proposals without -n, in a kubectl-style table;
// another namespace's are not listed, and --phase and --destination filter.
func TestProposalsListShowsTheProposalsOfTheContextsNamespace(t *testing.T) {
	w := newWorld(t)
	w.grant("alice")
	other := newWorld(t) // the same objects in a namespace alice may not read
	kubeconfig := w.kubeconfig("alice", w.ns)

	r := runCLI(t, "proposals", "list", "--kubeconfig", kubeconfig)
	if r.err != nil {
		t.Fatal(r.err)
	}
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if len(lines) != 4 {
		t.Fatalf("want a header and 3 proposals, got:\n%s", r.stdout)
	}
	if got := strings.Fields(lines[0]); !slices.Equal(got, []string{"NAME", "DESTINATION", "CHANGE", "KIND", "TARGET", "PHASE", "DECISION", "AGE"}) {
		t.Errorf("header = %q", got)
	}
	// Created within a second or two, so in no telling order.
	rows := lines[1:]
	slices.Sort(rows)
	want := [][]string{
		{"api-replicas", "prod", "update", "Deployment", "team-a/api", "Pending", "<none>"},
		{"old-change", "prod", "update", "Deployment", "team-a/old", "Applied", "<none>"},
		{"web-replicas", "prod", "update", "Deployment", "team-a/web", "Pending", "<none>"},
	}
	for i, row := range want {
		if got := strings.Fields(rows[i]); len(got) != 8 || !slices.Equal(got[:7], row) {
			t.Errorf("row %q, want %q and an age", got, row)
		}
	}
	if strings.Contains(r.stdout, other.ns) {
		t.Errorf("another namespace's proposals were listed")
	}

	r = runCLI(t, "proposals", "list", "--kubeconfig", kubeconfig, "--phase", "Pending", "-o", "wide")
	if r.err != nil || strings.Contains(r.stdout, "old-change") || !strings.Contains(r.stdout, "web-replicas") ||
		!strings.Contains(r.stdout, "Alice Example") || !strings.Contains(r.stdout, "aaaaaaa ") {
		t.Errorf("--phase Pending -o wide: err %v, stdout:\n%s", r.err, r.stdout)
	}
	r = runCLI(t, "proposals", "list", "--kubeconfig", kubeconfig, "--destination", "staging")
	if r.err != nil || r.stdout != "" || r.stderr != "No resources found in "+w.ns+" namespace.\n" {
		t.Errorf("--destination staging: err %v, stdout %q, stderr %q", r.err, r.stdout, r.stderr)
	}
}

// TestProposalsDiffPrintsTheDiff: the diff alone, as the daemon computed it, ready for a pager;
// the flags may come after the name, as with kubectl.
func TestProposalsDiffPrintsTheDiff(t *testing.T) {
	w := newWorld(t)
	w.grant("alice")
	r := runCLI(t, "proposals", "diff", "web-replicas", "-n", w.ns, "--kubeconfig", w.kubeconfig("alice", ""))
	if r.err != nil {
		t.Fatal(r.err)
	}
	if r.stdout != diffOf("web") {
		t.Errorf("stdout = %q, want the proposal's diff %q", r.stdout, diffOf("web"))
	}
	r = runCLI(t, "proposals", "diff", "--kubeconfig", w.kubeconfig("alice", w.ns))
	if r.exitCode() != exitUsage || !strings.Contains(r.err.Error(), "NAME") {
		t.Errorf("diff without a name: exit %d, err %v; want 2 and the missing NAME", r.exitCode(), r.err)
	}
}

// TestApproveAndRejectNameTheCallerInDecidedBy: alice's approval and rejection reach the
// apiserver with her identity in spec.decidedBy, which the validating approver policy checks;
// a Proposal that already ended is not touched.
func TestApproveAndRejectNameTheCallerInDecidedBy(t *testing.T) {
	w := newWorld(t)
	w.grant("alice")
	kubeconfig := w.kubeconfig("alice", w.ns)

	r := runCLI(t, "proposals", "approve", "web-replicas", "--kubeconfig", kubeconfig)
	if r.err != nil {
		t.Fatal(r.err)
	}
	if r.stdout != "proposal.configbutler.ai/web-replicas approved by alice\n" {
		t.Errorf("stdout = %q", r.stdout)
	}
	p := read[crds.Proposal](w, crds.Proposals, "web-replicas")
	if p.Spec.Decision != crds.DecisionApprove || p.Spec.DecidedBy == nil || p.Spec.DecidedBy.Username != "alice" ||
		!slices.Contains(p.Spec.DecidedBy.Groups, "developers") {
		t.Errorf("after approve: decision %q, decidedBy %+v; want Approve by alice of developers", p.Spec.Decision, p.Spec.DecidedBy)
	}

	r = runCLI(t, "proposal", "reject", "api-replicas", "--kubeconfig", kubeconfig)
	if r.err != nil {
		t.Fatal(r.err)
	}
	p = read[crds.Proposal](w, crds.Proposals, "api-replicas")
	if p.Spec.Decision != crds.DecisionReject || p.Spec.DecidedBy == nil || p.Spec.DecidedBy.Username != "alice" {
		t.Errorf("after reject: decision %q, decidedBy %+v; want Reject by alice", p.Spec.Decision, p.Spec.DecidedBy)
	}

	r = runCLI(t, "proposals", "approve", "old-change", "--kubeconfig", kubeconfig)
	if r.exitCode() != exitFailed || !strings.Contains(r.err.Error(), "is Applied") {
		t.Errorf("approve an applied proposal: exit %d, err %v; want 1 and why", r.exitCode(), r.err)
	}
	if p := read[crds.Proposal](w, crds.Proposals, "old-change"); p.Spec.Decision != crds.DecisionNone {
		t.Errorf("the applied proposal was decided: %q", p.Spec.Decision)
	}
}

// TestMalloryIsRefusedWithTheAPIServersReason: without RBAC, mallory's commands fail with exit
// code 1 and the apiserver's reason, and change nothing; once she may read Proposals, the
// apiserver still refuses her decision.
func TestMalloryIsRefusedWithTheAPIServersReason(t *testing.T) {
	w := newWorld(t)
	kubeconfig := w.kubeconfig("mallory", w.ns)
	for _, args := range [][]string{
		{"proposals", "approve", "web-replicas"},
		{"proposals", "reject", "web-replicas"},
		{"proposals", "list"},
		{"proposals", "diff", "web-replicas"},
		{"status"},
		{"sync", "prod"},
	} {
		r := runCLI(t, append(args, "--kubeconfig", kubeconfig)...)
		if r.exitCode() != exitFailed || !strings.Contains(r.err.Error(), "error from server (Forbidden)") ||
			!strings.Contains(r.err.Error(), `User "mallory" cannot`) {
			t.Errorf("%s: exit %d, err %v; want 1 and the apiserver's Forbidden", strings.Join(args, " "), r.exitCode(), r.err)
		}
	}

	w.grantVerbs("mallory", "get", "list")
	r := runCLI(t, "proposals", "approve", "web-replicas", "--kubeconfig", kubeconfig)
	if r.exitCode() != exitFailed || !strings.Contains(r.err.Error(), `error from server (Forbidden): proposals.configbutler.ai "web-replicas" is forbidden: User "mallory" cannot patch`) {
		t.Errorf("approve as a reader: exit %d, err %v; want 1 and the apiserver's refusal of the patch", r.exitCode(), r.err)
	}
	if p := read[crds.Proposal](w, crds.Proposals, "web-replicas"); p.Spec.Decision != crds.DecisionNone || p.Spec.DecidedBy != nil {
		t.Errorf("mallory's decision reached the proposal: %q by %+v", p.Spec.Decision, p.Spec.DecidedBy)
	}
	if d := read[crds.GitDestination](w, crds.GitDestinations, "prod"); d.Annotations[crds.AnnotationSyncNow] != "" {
		t.Errorf("mallory's sync reached the destination: %v", d.Annotations)
	}
}

// TestStatusShowsTheDestinations: Ready and its reason, the last push and the queue, write-back
// on, the pending count, the last run and the write-back Ready condition; a destination without
// write-back says off.
func TestStatusShowsTheDestinations(t *testing.T) {
	w := newWorld(t)
	w.destination("staging", nil, crds.GitDestinationStatus{Status: crds.Status{Conditions: []metav1.Condition{
		{Type: crds.ConditionReady, Status: "False", Reason: "RepoUnreachable", Message: "GitRepoConfig platform: no route; changes wait and are retried",
			LastTransitionTime: metav1.Now()}}}})
	w.grant("alice")
	r := runCLI(t, "status", "--kubeconfig", w.kubeconfig("alice", w.ns))
	if r.err != nil {
		t.Fatal(r.err)
	}
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if len(lines) != 3 {
		t.Fatalf("want a header and 2 destinations, got:\n%s", r.stdout)
	}
	for i, want := range [][]string{
		{"NAME", "READY", "REASON", "LAST", "PUSH", "QUEUE", "WRITE-BACK", "PENDING", "LAST", "RUN", "WB-READY", "WB-REASON"},
		{"prod", "True", "Ready", "(5m ago)", "4", "on", "2", "(3m ago)", "True", "ApproverFromValidatingPolicy"},
		{"staging", "False", "RepoUnreachable", "<none>", "<none>", "off", "<none>", "<none>", "<none>", "<none>"},
	} {
		got := strings.Fields(lines[i])
		if i == 1 && len(got) == len(want) && strings.HasPrefix(got[3], "5m") && strings.HasPrefix(got[7], "3m") {
			got[3], got[7] = want[3], want[7] // ages: how much past 5m and 3m depends on the machine
		}
		if !slices.Equal(got, want) {
			t.Errorf("line %d = %q, want %q", i, got, want)
		}
	}

	r = runCLI(t, "status", "staging", "-o", "wide", "--kubeconfig", w.kubeconfig("alice", w.ns))
	if r.err != nil || !strings.Contains(r.stdout, "no route; changes wait and are retried") || strings.Contains(r.stdout, "prod ") {
		t.Errorf("status staging -o wide: err %v, stdout:\n%s", r.err, r.stdout)
	}
}

// TestStatusShowsTheRemoteClusters: under the destinations, a row per RemoteCluster says whether
// it is Ready and why not, its apiserver, its watches and whether attribution works there; the
// wide output names the cluster each destination mirrors.
func TestStatusShowsTheRemoteClusters(t *testing.T) {
	w := newWorld(t)
	w.create(crds.GitDestinations, &crds.GitDestination{ObjectMeta: metav1.ObjectMeta{Name: "east", Namespace: w.ns},
		Spec: crds.GitDestinationSpec{RepoRef: crds.NamespacedReference{Name: "platform"}, Branch: "main", BaseFolder: "clusters/east",
			ClusterRef: &crds.NamespacedReference{Name: "east"}}}, crds.GitDestinationStatus{})
	w.create(crds.RemoteClusters, &crds.RemoteCluster{ObjectMeta: metav1.ObjectMeta{Name: "east", Namespace: w.ns},
		Spec: crds.RemoteClusterSpec{KubeConfig: crds.KubeConfigReference{SecretRef: crds.SecretKeyReference{Name: "east-kubeconfig"}}}},
		crds.RemoteClusterStatus{Status: crds.Status{Conditions: []metav1.Condition{{Type: crds.ConditionReady, Status: "False", Reason: "Unreachable",
			Message: "https://east:6443 does not answer", LastTransitionTime: metav1.Now()}}},
			Server: "https://east:6443", Watches: 3, Attribution: crds.AttributionFailing})
	w.grant("alice")
	r := runCLI(t, "status", "--kubeconfig", w.kubeconfig("alice", w.ns))
	if r.err != nil {
		t.Fatal(r.err)
	}
	want := []string{"east", "False", "Unreachable", "https://east:6443", "3", "Failing", "<none>"}
	if !slices.ContainsFunc(strings.Split(r.stdout, "\n"), func(l string) bool { return slices.Equal(strings.Fields(l), want) }) {
		t.Errorf("status lacks the row %q:\n%s", want, r.stdout)
	}
	r = runCLI(t, "status", "-o", "wide", "--kubeconfig", w.kubeconfig("alice", w.ns))
	namesCluster := func(l string) bool {
		f := strings.Fields(l)
		i := slices.Index(f, "clusters/east")
		return i >= 0 && i+1 < len(f) && f[i+1] == "east"
	}
	if r.err != nil || !slices.ContainsFunc(strings.Split(r.stdout, "\n"), namesCluster) || !strings.Contains(r.stdout, "does not answer") {
		t.Errorf("status -o wide: err %v, stdout:\n%s", r.err, r.stdout)
	}
}

// TestStatusShowsTheNotifyChannels: under the destinations, each NotifyChannel with its type,
// readiness and reason, when it last sent, and what it sent, failed and dropped.
func TestStatusShowsTheNotifyChannels(t *testing.T) {
	w := newWorld(t)
	w.create(crds.GitDestinations, &crds.GitDestination{ObjectMeta: metav1.ObjectMeta{Name: "apps", Namespace: w.ns},
		Spec: crds.GitDestinationSpec{RepoRef: crds.NamespacedReference{Name: "platform"}, Branch: "main", BaseFolder: "apps"}}, crds.GitDestinationStatus{})
	w.create(crds.NotifyChannels, &crds.NotifyChannel{ObjectMeta: metav1.ObjectMeta{Name: "reviews", Namespace: w.ns},
		Spec: crds.NotifyChannelSpec{Type: crds.ChannelSlack, SecretRef: crds.LocalReference{Name: "slack"}}},
		crds.NotifyChannelStatus{Status: crds.Status{Conditions: []metav1.Condition{{Type: crds.ConditionReady, Status: "False", Reason: "SendFailing",
			Message: "the last message failed after every retry: HTTP 500", LastTransitionTime: metav1.Now()}}},
			Sent: 12, Failed: 2, Dropped: 1})
	w.grant("alice")
	r := runCLI(t, "status", "--kubeconfig", w.kubeconfig("alice", w.ns))
	if r.err != nil {
		t.Fatal(r.err)
	}
	want := []string{"reviews", "slack", "False", "SendFailing", "<none>", "12", "2", "1"}
	if !slices.ContainsFunc(strings.Split(r.stdout, "\n"), func(l string) bool { return slices.Equal(strings.Fields(l), want) }) {
		t.Errorf("status lacks the row %q:\n%s", want, r.stdout)
	}
}

// TestStatusListsWhatAnAdoptedFolderHolds: under the table, a destination of layout Existing has
// a line for each document whose object the cluster does not have (left in place until prune),
// each file it could not read and each object it did not write, as status.adopted says, without
// the control characters a file name may carry.
func TestStatusListsWhatAnAdoptedFolderHolds(t *testing.T) {
	w := newWorld(t)
	w.adoptedDestination("apps", crds.GitDestinationStatus{Adopted: &crds.AdoptedStatus{
		Absent:    []string{"ConfigMap team-a/legacy (apps/web.yaml, document 4)"},
		Problems:  []string{"apps/broken\x1b[31m.yaml (document 1): does not parse as YAML: line 3: did not find expected key"},
		Unwritten: []string{"Deployment.apps team-a/web: the alias *base is not edited"},
	}})
	w.grant("alice")
	r := runCLI(t, "status", "apps", "--kubeconfig", w.kubeconfig("alice", w.ns))
	if r.err != nil {
		t.Fatal(r.err)
	}
	lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
	want := []string{"",
		"apps: absent from the cluster, left in apps (spec.existing.prune removes it): ConfigMap team-a/legacy (apps/web.yaml, document 4)",
		"apps: problem in apps: apps/broken?[31m.yaml (document 1): does not parse as YAML: line 3: did not find expected key",
		"apps: not written: Deployment.apps team-a/web: the alias *base is not edited"}
	if len(lines) != 2+len(want) || !slices.Equal(lines[2:], want) {
		t.Errorf("status printed:\n%s\nwant under the table:\n%s", r.stdout, strings.Join(want, "\n"))
	}
}

// TestStatusShowsThePullRequestOfEachDestination: under the table, each destination that
// delivers by pull request has a line with its request's number, state, the files waiting, when
// it was opened and its URL, as the daemon wrote them into status.pullRequest; or, with no
// request open, its head branch. A Direct destination has no such line, even with a request left
// in its status. What the status holds is printed without the control characters it may carry.
func TestStatusShowsThePullRequestOfEachDestination(t *testing.T) {
	w := newWorld(t)
	const url = "https://git.example.com/platform/pulls/7"
	opened := &metav1.Time{Time: time.Now().Add(-10 * 24 * time.Hour)}
	w.pullRequestDestination("review", "", crds.GitDestinationStatus{PullRequest: &crds.PullRequestStatus{
		HeadBranch: "gitops-reverser/" + w.ns + "/review", Number: 7, URL: url, State: "open", ChangesWaiting: 3, OpenedAt: opened}})
	w.pullRequestDestination("fresh", "", crds.GitDestinationStatus{})
	w.pullRequestDestination("merged", "mirror/merged", crds.GitDestinationStatus{PullRequest: &crds.PullRequestStatus{
		HeadBranch: "mirror/merged", Number: 6, URL: url, State: "merged"}})
	w.pullRequestDestination("closed", "", crds.GitDestinationStatus{PullRequest: &crds.PullRequestStatus{
		HeadBranch: "gitops-reverser/" + w.ns + "/closed", Number: 5, URL: url, State: "closed", ChangesWaiting: 1}})
	w.pullRequestDestination("hostile", "", crds.GitDestinationStatus{PullRequest: &crds.PullRequestStatus{
		HeadBranch: "gitops-reverser/" + w.ns + "/hostile", Number: 8, URL: "https://git.example.com/\x1b]8;;https://evil.example\x07x", State: "open"}})
	w.destination("direct", nil, crds.GitDestinationStatus{PullRequest: &crds.PullRequestStatus{
		HeadBranch: "gitops-reverser/" + w.ns + "/direct", Number: 4, URL: url, State: "open", ChangesWaiting: 2}})
	w.grant("alice")
	kubeconfig := w.kubeconfig("alice", w.ns)

	for _, c := range []struct {
		name, destination string
		want              string // the line under the table; "" for none
	}{
		{"an open request shows its number, state, waiting files, age and URL", "review",
			"review: request #7 open (3 files waiting, opened 10d ago): " + url},
		{"a request not opened yet names the default head branch", "fresh",
			"fresh: no request open (head gitops-reverser/" + w.ns + "/fresh)"},
		{"a merged request with nothing waiting is none open", "merged", "merged: no request open (head mirror/merged)"},
		{"a closed request with a file waiting still shows it", "closed", "closed: request #5 closed (1 file waiting): " + url},
		{"control characters of the status are not printed", "hostile",
			"hostile: request #8 open (0 files waiting): https://git.example.com/?]8;;https://evil.example?x"},
		{"a Direct destination shows nothing about requests", "prod", ""},
		{"a Direct destination with a request left in its status shows nothing about it", "direct", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := runCLI(t, "status", c.destination, "--kubeconfig", kubeconfig)
			if r.err != nil {
				t.Fatal(r.err)
			}
			lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
			want := 2 // the header and the destination's row
			if c.want != "" {
				want = 4 // and a blank line and the request's
			}
			if len(lines) != want || !strings.HasPrefix(lines[1], c.destination+" ") {
				t.Fatalf("want %d lines, the second the row of %s; got:\n%s", want, c.destination, r.stdout)
			}
			if c.want == "" {
				if strings.Contains(r.stdout, "request") {
					t.Errorf("a Direct destination shows a request:\n%s", r.stdout)
				}
				return
			}
			if lines[2] != "" || lines[3] != c.want {
				t.Errorf("under the table %q, want a blank line and %q", lines[2:], c.want)
			}
		})
	}

	admin := filepath.Join(w.dir, "admin.kubeconfig")
	if err := cp.WriteKubeconfig(admin); err != nil {
		t.Fatal(err)
	}
	r := runCLI(t, "status", "review", "-n", w.ns, "-o", "wide", "--kubeconfig", admin)
	if r.err != nil || !strings.HasSuffix(r.stdout, "\nreview: request #7 open (3 files waiting, opened 10d ago): "+url+"\n") {
		t.Errorf("status review -o wide: err %v, want the request's line last:\n%s", r.err, r.stdout)
	}
	r = runCLI(t, "status", "-A", "--kubeconfig", admin)
	if r.err != nil || !strings.Contains(r.stdout, "\n"+w.ns+"/review: request #7 open") {
		t.Errorf("status -A: err %v, want the request's line named with its namespace:\n%s", r.err, r.stdout)
	}
}

// TestOutputYAMLAndJSONAreTheObjects: -o json and -o yaml print the objects as the apiserver
// has them (a List, or the object itself when one was named), without managed fields.
func TestOutputYAMLAndJSONAreTheObjects(t *testing.T) {
	w := newWorld(t)
	w.grant("alice")
	kubeconfig := w.kubeconfig("alice", w.ns)

	r := runCLI(t, "proposals", "list", "-ojson", "--kubeconfig", kubeconfig)
	var list struct {
		Kind  string                      `json:"kind"`
		Items []unstructured.Unstructured `json:"items"`
	}
	if r.err != nil || json.Unmarshal([]byte(r.stdout), &list) != nil {
		t.Fatalf("-o json: err %v, stdout:\n%s", r.err, r.stdout)
	}
	if list.Kind != "List" || len(list.Items) != 3 || list.Items[0].GetKind() != crds.KindProposal {
		t.Errorf("-o json: kind %q, %d items", list.Kind, len(list.Items))
	}
	if strings.Contains(r.stdout, "managedFields") {
		t.Error("-o json printed managedFields")
	}

	r = runCLI(t, "status", "prod", "-o", "yaml", "--kubeconfig", kubeconfig)
	var d crds.GitDestination
	if r.err != nil || yaml.Unmarshal([]byte(r.stdout), &d) != nil {
		t.Fatalf("-o yaml: err %v, stdout:\n%s", r.err, r.stdout)
	}
	if d.Kind != crds.KindGitDestination || d.Name != "prod" || d.Status.WriteBack == nil || d.Status.WriteBack.PendingProposals != 2 {
		t.Errorf("status prod -o yaml = %+v", d)
	}
}

// TestSyncSetsTheSyncNowAnnotation: each sync sets a new value, which the daemon takes as a
// request for a run; on a destination without write-back it also warns that nothing will run.
func TestSyncSetsTheSyncNowAnnotation(t *testing.T) {
	w := newWorld(t)
	w.destination("staging", nil, crds.GitDestinationStatus{})
	w.grant("alice")
	kubeconfig := w.kubeconfig("alice", w.ns)

	var values []string
	for range 2 {
		r := runCLI(t, "sync", "prod", "--kubeconfig", kubeconfig)
		if r.err != nil || !strings.HasPrefix(r.stdout, "gitdestination.configbutler.ai/prod sync requested") || r.stderr != "" {
			t.Fatalf("sync prod: err %v, stdout %q, stderr %q", r.err, r.stdout, r.stderr)
		}
		v := read[crds.GitDestination](w, crds.GitDestinations, "prod").Annotations[crds.AnnotationSyncNow]
		if _, err := time.Parse(time.RFC3339Nano, v); err != nil {
			t.Fatalf("annotation %s = %q: %v", crds.AnnotationSyncNow, v, err)
		}
		values = append(values, v)
	}
	if values[0] == values[1] {
		t.Errorf("two syncs set the same value %q: the second asks for nothing", values[0])
	}

	r := runCLI(t, "sync", "staging", "--kubeconfig", kubeconfig)
	if r.err != nil || !strings.Contains(r.stderr, "write-back is off") {
		t.Errorf("sync staging: err %v, stderr %q; want a warning that write-back is off", r.err, r.stderr)
	}
}

// TestKubeconfigContextAndNamespaceChooseUserAndNamespace: $KUBECONFIG may list files, merged
// as kubectl merges them; --context picks another user, -n another namespace, -A every one.
func TestKubeconfigContextAndNamespaceChooseUserAndNamespace(t *testing.T) {
	w := newWorld(t)
	w.grant("alice")
	t.Setenv("KUBECONFIG", w.kubeconfig("alice", "default")+string(filepath.ListSeparator)+w.kubeconfig("mallory", w.ns))

	// The current context is alice's, in the namespace default.
	if r := runCLI(t, "proposals", "list"); r.exitCode() != exitFailed || !strings.Contains(r.err.Error(), `User "alice" cannot list resource "proposals" in API group "configbutler.ai" in the namespace "default"`) {
		t.Errorf("alice in default: exit %d, err %v", r.exitCode(), r.err)
	}
	if r := runCLI(t, "-n", w.ns, "proposals", "list"); r.err != nil || !strings.Contains(r.stdout, "web-replicas") {
		t.Errorf("alice with -n before the command: err %v, stdout %q", r.err, r.stdout)
	}
	if r := runCLI(t, "proposals", "list", "--context", "mallory"); r.exitCode() != exitFailed || !strings.Contains(r.err.Error(), `"mallory"`) {
		t.Errorf("--context mallory: exit %d, err %v; want mallory refused", r.exitCode(), r.err)
	}
	if r := runCLI(t, "proposals", "list", "--context", "nobody"); r.exitCode() != exitFailed || !strings.Contains(r.err.Error(), "nobody") {
		t.Errorf("--context nobody: exit %d, err %v", r.exitCode(), r.err)
	}
	// alice may not list across namespaces: the apiserver says so.
	if r := runCLI(t, "proposals", "list", "-A"); r.exitCode() != exitFailed || !strings.Contains(r.err.Error(), "Forbidden") {
		t.Errorf("-A as alice: exit %d, err %v", r.exitCode(), r.err)
	}
}

// TestAllNamespacesAddsTheNamespaceColumn: the admin lists the Proposals of two namespaces.
func TestAllNamespacesAddsTheNamespaceColumn(t *testing.T) {
	w := newWorld(t)
	admin := filepath.Join(w.dir, "admin.kubeconfig")
	if err := cp.WriteKubeconfig(admin); err != nil {
		t.Fatal(err)
	}
	r := runCLI(t, "proposals", "list", "-A", "--kubeconfig", admin)
	if r.err != nil {
		t.Fatal(r.err)
	}
	lines := strings.Split(r.stdout, "\n")
	if got := strings.Fields(lines[0]); len(got) == 0 || got[0] != "NAMESPACE" {
		t.Errorf("header = %q, want NAMESPACE first", got)
	}
	if !strings.Contains(r.stdout, w.ns+" ") {
		t.Errorf("the world's namespace is not listed:\n%s", r.stdout)
	}
	if r := runCLI(t, "proposals", "list", "web-replicas", "-A", "--kubeconfig", admin); r.exitCode() != exitUsage {
		t.Errorf("a name with -A: exit %d, err %v; want 2", r.exitCode(), r.err)
	}
}

// TestNoKubeconfigIsAClearError: without a kubeconfig the commands say so, and never fall back to
// a Pod's service account.
func TestNoKubeconfigIsAClearError(t *testing.T) {
	t.Setenv("KUBECONFIG", filepath.Join(t.TempDir(), "none"))
	t.Setenv("HOME", t.TempDir())
	t.Setenv("KUBERNETES_SERVICE_HOST", "127.0.0.1") // as in a Pod
	t.Setenv("KUBERNETES_SERVICE_PORT", "1")
	r := runCLI(t, "status")
	if r.exitCode() != exitFailed || !strings.Contains(r.err.Error(), "no kubeconfig found") {
		t.Errorf("exit %d, err %v; want 1 and no kubeconfig found", r.exitCode(), r.err)
	}
}
