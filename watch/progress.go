package watch

import (
	"context"
	"errors"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/configbutler/gitops-reverser/crds"
	"github.com/configbutler/gitops-reverser/gitops"
)

// progressInterval is how often the destinations' status.git follows their Git workers: a push
// costs no API request of its own, at most one status write per destination per interval.
const progressInterval = 10 * time.Second

// maxProgressError bounds status.git.lastError, as its schema does.
const maxProgressError = 32 << 10

// reportProgress writes status.git of each destination whose Git worker moved since it was last
// written: the last push and what waits, so `kubectl get` and the CLI show them.
func (m *Manager) reportProgress(ctx context.Context, dests []*destination) error {
	var errs []error
	for _, d := range dests {
		if !d.ours() {
			continue
		}
		st, ok := m.opts.Pool.WorkerStatus(d.repo.obj.Spec.RepoURL, d.obj.Lane())
		if !ok {
			continue
		}
		if err := m.reportRequest(ctx, d, st); err != nil {
			errs = append(errs, err)
		}
		want := progressOf(st)
		if m.opts.Shards != nil {
			want.Owner = m.opts.Shards.Owner(d.shard())
		}
		last, reported := m.progress[d.name()]
		if !reported && d.obj.Status.Git != nil {
			last, reported = *d.obj.Status.Git, true
		}
		if reported && sameProgress(last, want) {
			continue
		}
		if err := m.reporter.patchStatusField(ctx, destinationKind, d.obj, "git", want); err != nil {
			errs = append(errs, err)
			continue
		}
		m.progress[d.name()] = want
	}
	m.countRequests(dests)
	return errors.Join(errs...)
}

// progressOf is what status.git says of a worker.
func progressOf(st gitops.WorkerStatus) crds.GitProgress {
	p := crds.GitProgress{LastPushedCommit: st.LastPushed, Pending: st.Pending, Failures: st.Failures}
	if !st.LastPushTime.IsZero() {
		p.LastPushTime = &metav1.Time{Time: st.LastPushTime.Truncate(time.Second)} // what the API keeps
		p.LastPushAuthor = st.LastPushedAuthor.Name
		if st.LastPushedAuthor.Email != "" {
			p.LastPushAuthor += " <" + st.LastPushedAuthor.Email + ">"
		}
	}
	if st.LastError != nil {
		p.LastError = st.LastError.Error()
		if len(p.LastError) > maxProgressError {
			p.LastError = p.LastError[:maxProgressError]
		}
	}
	return p
}

func sameProgress(a, b crds.GitProgress) bool {
	at, bt := a.LastPushTime, b.LastPushTime
	a.LastPushTime, b.LastPushTime = nil, nil
	return a == b && at.Equal(bt) // Equal takes nil for nil
}
