package ui

import (
	"context"
	"net/http"
	"strconv"

	"github.com/configbutler/gitops-reverser/crds"
)

// overviewData is what the overview shows.
type overviewData struct {
	Repos        []repoView
	Clusters     []clusterView // none when there is no RemoteCluster the viewer may see
	Channels     []channelView // none when there is no NotifyChannel the viewer may see
	Dests        []destView
	Pending      []proposalView // this page of them, with their diffs
	PendingTotal int
	PendingPage  pager
	History      []proposalView // this page of the decided ones
	HistoryTotal int
	HistoryPage  pager
	Hidden       int // namespaces with objects the viewer may not see
	ReadOnly     bool
}

// pager is one page of a list: which one, and the links to its neighbours.
type pager struct {
	Page, Pages int
	Prev, Next  string // query strings; "" when there is none
}

// paginate cuts items into pages of size; the page number comes from the query parameter param.
func paginate[T any](r *http.Request, param string, items []T, size int) ([]T, pager) {
	pages := max(1, (len(items)+size-1)/size)
	n, err := strconv.Atoi(r.URL.Query().Get(param))
	if err != nil || n < 1 {
		n = 1
	}
	n = min(n, pages)
	pg := pager{Page: n, Pages: pages}
	link := func(to int) string {
		q := r.URL.Query()
		q.Set(param, strconv.Itoa(to))
		return "?" + q.Encode()
	}
	if n > 1 {
		pg.Prev = link(n - 1)
	}
	if n < pages {
		pg.Next = link(n + 1)
	}
	from := (n - 1) * size
	return items[from:min(from+size, len(items))], pg
}

// visibleSnapshot authenticates the viewer and reads what they may see; nil after it answered
// the request itself (sign-in form, loading, error).
func (p *Page) visibleSnapshot(w http.ResponseWriter, r *http.Request) (*viewer, *snapshot, int) {
	v := p.signedIn(w, r)
	if v == nil || p.notReady(w, v) {
		return nil, nil, 0
	}
	ctx, cancel := context.WithTimeout(r.Context(), requestTimeout)
	defer cancel()
	all := p.namespaces()
	namespaces, err := p.auth.visible(ctx, v, all)
	if err != nil {
		// The error names the namespaces asked about, which the viewer may not be allowed to know.
		p.cfg.Log.Error("operator page: check what a viewer may see", "user", v.user.Username, "err", err)
		p.render(w, http.StatusBadGateway, "error", layout{Title: "Error", Viewer: viewerName(v),
			Error: "the Kubernetes API did not answer which namespaces you may see; nothing is shown until it does: reload to try again"}, nil)
		return nil, nil, 0
	}
	s := p.snapshot(namespaces)
	return v, &s, len(all) - len(namespaces)
}

func (p *Page) overview(w http.ResponseWriter, r *http.Request) {
	v, s, hidden := p.visibleSnapshot(w, r)
	if s == nil {
		return
	}
	data := overviewData{Repos: s.repos, Clusters: s.clusters, Channels: s.channels, Dests: s.dests, Hidden: hidden, ReadOnly: v.readOnly()}
	var pending, history []proposalView
	for _, pr := range s.proposals {
		if pr.Phase == string(crds.PhasePending) {
			pending = append(pending, pr)
		} else {
			history = append(history, pr)
		}
	}
	data.PendingTotal, data.HistoryTotal = len(pending), len(history)
	data.Pending, data.PendingPage = paginate(r, "pending", pending, pendingPerPage)
	data.History, data.HistoryPage = paginate(r, "history", history, historyPerPage)
	for i := range data.Pending {
		data.Pending[i].Lines = parseDiff(data.Pending[i].Diff)
	}
	p.render(w, http.StatusOK, "overview", layout{Title: "Overview", Viewer: viewerName(v)}, data)
}

// proposalData is what a proposal's own view shows.
type proposalData struct {
	P        proposalView
	Split    bool
	ReadOnly bool
}

func (p *Page) proposal(w http.ResponseWriter, r *http.Request) {
	v, s, _ := p.visibleSnapshot(w, r)
	if s == nil {
		return
	}
	ns, name := r.PathValue("namespace"), r.PathValue("name")
	for _, pr := range s.proposals {
		if pr.Namespace != ns || pr.Name != name {
			continue
		}
		pr.Lines = parseDiff(pr.Diff)
		split := r.URL.Query().Get("view") == "split"
		if split {
			pr.Split = splitView(pr.Lines)
		}
		p.render(w, http.StatusOK, "proposal", layout{Title: "Proposal " + ns + "/" + name, Viewer: viewerName(v)},
			proposalData{P: pr, Split: split, ReadOnly: v.readOnly()})
		return
	}
	// Not there, or in a namespace the viewer may not see: the same answer, so the page does not
	// tell what exists where.
	p.render(w, http.StatusNotFound, "error", layout{Title: "Not found", Viewer: viewerName(v),
		Error: "there is no proposal " + ns + "/" + name + " that you may see"}, nil)
}
