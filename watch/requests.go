package watch

import (
	"context"
	"errors"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/configbutler/gitops-reverser/crds"
	"github.com/configbutler/gitops-reverser/gitops"
)

// requestSettings are how the pool opens the destination's pull request; nil when it pushes
// directly.
func requestSettings(d *destination) *gitops.RequestSettings {
	pr := d.obj.PullRequest()
	if pr == nil {
		return nil
	}
	return &gitops.RequestSettings{
		Head: d.obj.HeadBranch(), Provider: pr.Provider, APIURL: pr.APIURL, Labels: pr.Labels, Draft: pr.Draft,
		Destination: d.name(), Folder: d.obj.Spec.BaseFolder,
	}
}

// pushFailing is the Ready condition of a destination whose worker's last push, or last call of
// its Git host's API, failed. A host's answer names its own reason (PullRequestUnauthorized,
// PullRequestRateLimited, ...), with what to do in the message.
func pushFailing(d *destination, err error) condition {
	var host *gitops.DeliveryError
	if errors.As(err, &host) {
		reason := "HostFailing"
		var named interface{ ConditionReason() string }
		if errors.As(host.Err, &named) && named.ConditionReason() != "" {
			reason = named.ConditionReason()
		}
		return notReady("PullRequest"+reason, "the pull request from %s into %s cannot be delivered (retrying; the commits wait on %s): %v",
			d.obj.HeadBranch(), d.obj.Spec.Branch, d.obj.HeadBranch(), err)
	}
	return notReady("PushFailing", "pushing to %s@%s fails (retrying): %v", d.repo.obj.Spec.RepoURL, d.obj.Lane(), err)
}

// requestStatus is what status.pullRequest says of a worker with a head branch; nil without.
func requestStatus(st gitops.WorkerStatus) *crds.PullRequestStatus {
	if st.Head == "" {
		return nil
	}
	s := &crds.PullRequestStatus{HeadBranch: st.Head, ChangesWaiting: st.Waiting}
	if r := st.Request; r != nil {
		s.Number, s.URL, s.State, s.HeadCommit = r.Number, r.URL, r.State, r.HeadCommit
		if !r.OpenedAt.IsZero() {
			s.OpenedAt = &metav1.Time{Time: r.OpenedAt.Truncate(time.Second)}
		}
	}
	return s
}

// reportRequest writes status.pullRequest of a destination when it says something new.
func (m *Manager) reportRequest(ctx context.Context, d *destination, st gitops.WorkerStatus) error {
	want := requestStatus(st)
	if want == nil {
		return nil
	}
	last, reported := m.requests[d.name()]
	if !reported && d.obj.Status.PullRequest != nil {
		last, reported = *d.obj.Status.PullRequest, true
	}
	if reported && sameRequest(last, *want) {
		m.requests[d.name()] = last
		return nil
	}
	if err := m.reporter.patchStatusField(ctx, destinationKind, d.obj, "pullRequest", want); err != nil {
		return err
	}
	m.requests[d.name()] = *want
	if reason, what := requestEvent(last, *want, reported); reason != "" {
		m.reporter.recorder.Eventf(crds.ObjectReference(crds.KindGitDestination, d.obj), corev1.EventTypeNormal, reason,
			"pull request #%d from %s into %s %s: %s", want.Number, want.HeadBranch, d.obj.Spec.Branch, what, want.URL)
	}
	return nil
}

// requestEvent is the Event a change of status.pullRequest from last to now makes, if any.
func requestEvent(last, now crds.PullRequestStatus, reported bool) (reason, what string) {
	switch {
	case now.Number == 0:
		return "", ""
	case (!reported || last.Number != now.Number) && now.State == gitops.RequestOpen:
		return "PullRequestOpened", "opened"
	case last.Number != now.Number || last.State == now.State && last.HeadCommit == now.HeadCommit:
		return "", ""
	case now.State == gitops.RequestMerged:
		return "PullRequestMerged", "merged"
	case now.State == gitops.RequestClosed:
		return "PullRequestClosed", "closed"
	case last.HeadCommit != now.HeadCommit:
		return "PullRequestUpdated", "updated with " + strconv.Itoa(now.ChangesWaiting) + " files changed"
	}
	return "", ""
}

// countRequests sets the gauges of the open requests from the statuses of the destinations
// this replica writes.
func (m *Manager) countRequests(dests []*destination) {
	if m.opts.Requests == nil {
		return
	}
	var open int
	var oldest time.Time
	for _, d := range dests {
		r, ok := m.requests[d.name()]
		if !ok || !d.ours() || r.State != gitops.RequestOpen {
			continue
		}
		open++
		if r.OpenedAt != nil && (oldest.IsZero() || r.OpenedAt.Before(&metav1.Time{Time: oldest})) {
			oldest = r.OpenedAt.Time
		}
	}
	m.opts.Requests.Open.Set(float64(open))
	if oldest.IsZero() {
		m.opts.Requests.OldestOpened.Set(0)
	} else {
		m.opts.Requests.OldestOpened.Set(float64(oldest.Unix()))
	}
}

func sameRequest(a, b crds.PullRequestStatus) bool {
	at, bt := a.OpenedAt, b.OpenedAt
	a.OpenedAt, b.OpenedAt = nil, nil
	return a == b && at.Equal(bt) // Equal takes nil for nil
}
