package ui

import (
	"cmp"
	"net/url"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"

	"github.com/configbutler/gitops-reverser/crds"
)

// What the overview shows at most at once; the rest is a page away.
const (
	pendingPerPage = 25
	historyPerPage = 50
	runsPerDest    = 5
)

// condView is a Ready condition as shown: its status, reason and message, and a class for its colour.
type condView struct {
	Status, Reason, Message, Class string
}

func readyOf(conds []metav1.Condition) condView {
	c := meta.FindStatusCondition(conds, crds.ConditionReady)
	if c == nil {
		return condView{Status: "Unknown", Reason: "NotReported", Message: "the daemon has not reported on it yet", Class: "unknown"}
	}
	class := "bad"
	switch c.Status {
	case metav1.ConditionTrue:
		class = "ok"
	case metav1.ConditionUnknown:
		class = "unknown"
	}
	return condView{Status: string(c.Status), Reason: c.Reason, Message: c.Message, Class: class}
}

type repoView struct {
	Namespace, Name, URL string
	Ready                condView
}

// clusterView is a RemoteCluster as the overview lists it: what the daemon last saw of it.
type clusterView struct {
	Namespace, Name, Server string
	Ready                   condView
	Watches                 int
	// Attribution is the status's word for it; AttributionClass colours it ("ok", "bad" or "").
	Attribution, AttributionClass string
	LastEvent                     time.Time // zero when no watch has delivered a change yet
}

// channelView is a NotifyChannel as the overview lists it: whether its messages get through.
type channelView struct {
	Namespace, Name, Type string
	Ready                 condView
	LastSent              time.Time // zero when it has sent nothing since the daemon started
	Sent, Failed, Dropped int64
}

// gitView is the progress of a destination's Git worker.
type gitView struct {
	LastPushed, Author string
	PushedAt           time.Time
	Queue              int
	Failing            string
	FailingSince       time.Time
	Failures           int
}

type runView struct {
	Name, Trigger, Phase, Error string
	Started                     time.Time
	Duration                    string
	Differences, Opened         int
	Applied, Refused            int
}

type destView struct {
	Namespace, Name, RepoURL, Branch, Folder string
	Cluster                                  string // the RemoteCluster's namespace/name; "" for the daemon's own
	Ready                                    condView
	Git                                      *gitView // nil when this process does not push it
	WriteBack                                bool
	Pending                                  int
	LastSync                                 time.Time
	Runs                                     []runView
	Request                                  *requestView // nil when it pushes directly
}

// requestView is the pull request that delivers a destination's changes, as the page shows it.
type requestView struct {
	Number int64  // 0 when no request is open
	State  string // open, merged or closed
	// URL is the request's page as the status names it, shown as text when Link is empty.
	URL string
	// Link is URL when it is an absolute http(s) URL, the only kind the page links to.
	Link       string
	HeadBranch string
	Waiting    int
	OpenedAt   time.Time
}

// proposalView is a Proposal as the page lists it; Lines is set where its diff is shown.
type proposalView struct {
	Namespace, Name, Destination  string
	Change, Path, Commit, Author  string
	Kind, TargetNamespace, Target string
	Phase, Message, Decision      string
	ReviewedBy                    string
	AutoApplied                   bool
	Created, Decided              time.Time
	Diff                          string
	Lines                         []diffLine
	Split                         []splitRow
}

// snapshot is what the caches hold in the namespaces a viewer may see.
type snapshot struct {
	repos     []repoView
	clusters  []clusterView
	channels  []channelView
	dests     []destView
	proposals []proposalView // newest first
}

// namespaces lists the namespaces that hold any object the page shows, sorted.
func (p *Page) namespaces() []string {
	seen := map[string]bool{}
	for _, inf := range p.stores {
		for _, key := range inf.GetStore().ListKeys() {
			if ns, _, err := cache.SplitMetaNamespaceKey(key); err == nil {
				seen[ns] = true
			}
		}
	}
	out := make([]string, 0, len(seen))
	for ns := range seen {
		out = append(out, ns)
	}
	slices.Sort(out)
	return out
}

// list returns the cached objects of gvr in the given namespaces (nil: in all), converted to T.
func list[T any](p *Page, gvr schema.GroupVersionResource, namespaces map[string]bool) []*T {
	var out []*T
	for _, obj := range p.stores[gvr].GetStore().List() {
		u, ok := obj.(*unstructured.Unstructured)
		if !ok || namespaces != nil && !namespaces[u.GetNamespace()] {
			continue
		}
		t, err := crds.FromUnstructured[T](u)
		if err != nil {
			p.cfg.Log.Warn("operator page: skip an object it cannot read", "err", err)
			continue
		}
		out = append(out, t)
	}
	return out
}

// snapshot reads the caches for the given namespaces.
func (p *Page) snapshot(namespaces []string) snapshot {
	in := map[string]bool{}
	for _, ns := range namespaces {
		in[ns] = true
	}
	var s snapshot
	// A destination may reference a repository in a namespace the viewer cannot see; its URL is
	// still shown, as the destination's own status names it.
	repoURLs := map[string]string{}
	for _, r := range list[crds.GitRepoConfig](p, crds.GitRepoConfigs, nil) {
		repoURLs[r.Namespace+"/"+r.Name] = r.Spec.RepoURL
		if in[r.Namespace] {
			s.repos = append(s.repos, repoView{Namespace: r.Namespace, Name: r.Name, URL: r.Spec.RepoURL, Ready: readyOf(r.Status.Conditions)})
		}
	}
	s.clusters = p.clusters(in)
	s.channels = p.channels(in)
	runs := p.runsByDestination(in)
	for _, d := range list[crds.GitDestination](p, crds.GitDestinations, in) {
		v := destView{
			Namespace: d.Namespace, Name: d.Name, Branch: d.Spec.Branch, Folder: d.Spec.BaseFolder, Cluster: clusterOf(d),
			RepoURL: repoURLs[d.Spec.RepoRef.NamespaceOr(d.Namespace)+"/"+d.Spec.RepoRef.Name],
			Ready:   readyOf(d.Status.Conditions), WriteBack: d.Spec.WriteBack != nil && d.Spec.WriteBack.Enabled,
			Runs: runs[d.Namespace+"/"+d.Name],
		}
		if wb := d.Status.WriteBack; wb != nil {
			v.Pending = wb.PendingProposals
			if wb.LastSyncTime != nil {
				v.LastSync = wb.LastSyncTime.Time
			}
		}
		v.Request = requestOf(d)
		v.Git = p.progress(v.RepoURL, v.Branch)
		if v.Git == nil && d.Status.Git != nil {
			v.Git = reported(*d.Status.Git) // another replica owns its branch (--shards=auto)
		}
		s.dests = append(s.dests, v)
	}
	for _, pr := range list[crds.Proposal](p, crds.Proposals, in) {
		s.proposals = append(s.proposals, proposalOf(pr))
	}
	slices.SortFunc(s.repos, func(a, b repoView) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})
	slices.SortFunc(s.dests, func(a, b destView) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})
	slices.SortFunc(s.proposals, func(a, b proposalView) int {
		return cmp.Or(b.Created.Compare(a.Created), cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})
	return s
}

// clusters lists the cached RemoteClusters of the given namespaces, sorted by namespace and name.
func (p *Page) clusters(in map[string]bool) []clusterView {
	var out []clusterView
	for _, c := range list[crds.RemoteCluster](p, crds.RemoteClusters, in) {
		v := clusterView{Namespace: c.Namespace, Name: c.Name, Server: c.Status.Server, Ready: readyOf(c.Status.Conditions),
			Watches: c.Status.Watches, Attribution: c.Status.Attribution, AttributionClass: attributionClass(c.Status.Attribution)}
		if c.Status.LastEventTime != nil {
			v.LastEvent = c.Status.LastEventTime.Time
		}
		out = append(out, v)
	}
	slices.SortFunc(out, func(a, b clusterView) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})
	return out
}

// channels lists the cached NotifyChannels of the given namespaces, sorted by namespace and name.
func (p *Page) channels(in map[string]bool) []channelView {
	var out []channelView
	for _, c := range list[crds.NotifyChannel](p, crds.NotifyChannels, in) {
		st := c.Status
		v := channelView{Namespace: c.Namespace, Name: c.Name, Type: c.Spec.Type, Ready: readyOf(st.Conditions), Sent: st.Sent, Failed: st.Failed, Dropped: st.Dropped}
		if st.LastSentTime != nil {
			v.LastSent = st.LastSentTime.Time
		}
		out = append(out, v)
	}
	slices.SortFunc(out, func(a, b channelView) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})
	return out
}

// attributionClass colours a RemoteCluster's attribution: working is good, failing is bad, and
// off or registered (no review seen yet) are neither.
func attributionClass(attribution string) string {
	switch attribution {
	case crds.AttributionWorking:
		return "ok"
	case crds.AttributionFailing:
		return "bad"
	}
	return ""
}

// clusterOf names the RemoteCluster a destination mirrors as namespace/name; "" when it mirrors
// the daemon's own cluster.
func clusterOf(d *crds.GitDestination) string {
	ref := d.Spec.ClusterRef
	if ref == nil {
		return ""
	}
	return ref.NamespaceOr(d.Namespace) + "/" + ref.Name
}

// progress is the Git worker's progress for a repository and branch, nil when unknown here.
func (p *Page) progress(url, branch string) *gitView {
	if p.cfg.Progress == nil || url == "" {
		return nil
	}
	st, ok := p.cfg.Progress(url, branch)
	if !ok {
		return nil
	}
	g := &gitView{LastPushed: st.LastPushed, Author: st.LastPushedAuthor.Name, PushedAt: st.LastPushTime,
		Queue: st.Pending, FailingSince: st.FailingSince, Failures: st.Failures}
	if st.LastError != nil {
		g.Failing = st.LastError.Error()
	}
	return g
}

// reported is the Git progress a destination's status says, as its branch's owner wrote it at
// most 10 seconds ago.
func reported(g crds.GitProgress) *gitView {
	author, _, _ := strings.Cut(g.LastPushAuthor, " <") // "Name <email>": the page shows the name
	v := &gitView{LastPushed: g.LastPushedCommit, Author: author, Queue: g.Pending, Failures: g.Failures, Failing: g.LastError}
	if g.LastPushTime != nil {
		v.PushedAt = g.LastPushTime.Time
	}
	return v
}

// requestOf is the pull request of a destination that delivers by one: the request its status
// names, or none open (Number 0) when it names none or the last one ended with nothing left
// waiting. nil for a destination that pushes directly. The status comes from the cluster, so
// its URL is linked only when it is http(s).
func requestOf(d *crds.GitDestination) *requestView {
	head, pr, ok := d.ShownRequest()
	if !ok {
		return nil
	}
	v := &requestView{HeadBranch: head}
	if d.Status.PullRequest != nil {
		v.Waiting = d.Status.PullRequest.ChangesWaiting
	}
	if pr == nil {
		return v
	}
	v.Number, v.State, v.URL, v.Link = pr.Number, pr.State, pr.URL, webLink(pr.URL)
	if pr.OpenedAt != nil {
		v.OpenedAt = pr.OpenedAt.Time
	}
	return v
}

// webLink is raw when it is an absolute http or https URL with a host, else "": a page may link
// to it without running or loading anything but a web page.
func webLink(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return ""
	}
	return raw
}

// runsByDestination returns the last runs of each destination ("namespace/name"), newest first.
func (p *Page) runsByDestination(in map[string]bool) map[string][]runView {
	all := list[crds.SyncRun](p, crds.SyncRuns, in)
	slices.SortFunc(all, func(a, b *crds.SyncRun) int { return b.CreationTimestamp.Compare(a.CreationTimestamp.Time) })
	out := map[string][]runView{}
	for _, r := range all {
		key := r.Namespace + "/" + r.Spec.DestinationRef.Name
		if len(out[key]) >= runsPerDest {
			continue
		}
		v := runView{Name: r.Name, Trigger: r.Spec.Trigger, Phase: string(r.Status.Phase), Error: r.Status.Error,
			Differences: r.Status.DifferenceTotal, Opened: r.Status.ProposalsOpened, Applied: r.Status.Applied, Refused: r.Status.RefusedTotal}
		if r.Status.StartedAt != nil {
			v.Started = r.Status.StartedAt.Time
			if r.Status.CompletedAt != nil {
				v.Duration = duration(r.Status.CompletedAt.Sub(v.Started))
			}
		}
		out[key] = append(out[key], v)
	}
	return out
}

func proposalOf(pr *crds.Proposal) proposalView {
	v := proposalView{
		Namespace: pr.Namespace, Name: pr.Name, Destination: pr.Spec.DestinationRef.Name,
		Change: string(pr.Spec.Change), Path: pr.Spec.Path, Commit: pr.Spec.SourceCommit, Author: pr.Spec.Author.Name,
		Kind: pr.Spec.Target.Kind, TargetNamespace: pr.Spec.Target.Namespace, Target: pr.Spec.Target.Name,
		Phase: string(pr.Status.Phase), Message: pr.Status.Message, Decision: string(pr.Spec.Decision),
		AutoApplied: pr.Status.AutoApplied, Created: pr.CreationTimestamp.Time, Diff: pr.Spec.Diff,
	}
	if v.Phase == "" {
		v.Phase = string(crds.PhasePending)
	}
	if pr.Status.ReviewedBy != nil {
		v.ReviewedBy = pr.Status.ReviewedBy.Username
	}
	if pr.Status.DecidedAt != nil {
		v.Decided = pr.Status.DecidedAt.Time
	}
	return v
}
