package watch

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/configbutler/gitops-reverser/crds"
	"github.com/configbutler/gitops-reverser/gitsecrets"
	"github.com/configbutler/gitops-reverser/shard"
	"github.com/configbutler/gitops-reverser/testenv"
)

// TestARepositoryIsReportedByTheOwnerOfItsBranchOnly: with shards, a replica that does not own
// the branch a GitRepoConfig's destination writes, and cannot reach its remote, says nothing in
// the repository's status (before, it flipped it to Unreachable under the owner, which pushes
// there); the owner says what it sees.
func TestARepositoryIsReportedByTheOwnerOfItsBranchOnly(t *testing.T) {
	e := newEnv(t)
	blind := &unreachable{}
	e.wrapRepos = func(r Repositories) Repositories { blind.Repositories = r; return blind }
	e.shards = ownsAll(false)
	stop := e.startManager()
	testenv.Eventually(t, time.Minute, "the replica's reconciles", func() (bool, string) {
		return blind.calls.Load() >= 3, fmt.Sprintf("%d reconciles", blind.calls.Load())
	})
	if c := e.readyCondition(crds.GitRepoConfigs, e.ns, "repo"); c != nil {
		t.Errorf("a replica that owns no branch of the repository reported %+v", c)
	}
	stop()

	e.shards = ownsAll(true)
	e.startManager()
	testenv.Eventually(t, time.Minute, "the owner reporting what it sees", func() (bool, string) {
		c := e.readyCondition(crds.GitRepoConfigs, e.ns, "repo")
		return c != nil && c.Reason == "Unreachable", fmt.Sprintf("%+v", c)
	})
}

// unreachable is a replica's view of repositories whose remotes it cannot reach.
type unreachable struct {
	Repositories
	calls atomic.Int64
}

func (u *unreachable) SetRepositories(ctx context.Context, repos []gitsecrets.Repository) map[string]gitsecrets.RepoState {
	states := u.Repositories.SetRepositories(ctx, repos)
	for name, st := range states {
		st.Checked, st.Reachable, st.Reason, st.Message = true, false, "Unreachable", "this replica cannot reach the remote"
		states[name] = st
	}
	u.calls.Add(1)
	return states
}

// ownsAll is a sharing of destinations in which this replica owns every shard, or none.
type ownsAll bool

func (o ownsAll) Want([]shard.Key)       {}
func (o ownsAll) Owns(shard.Key) bool    { return bool(o) }
func (o ownsAll) Owner(shard.Key) string { return "" }
