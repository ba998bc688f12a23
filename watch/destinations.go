package watch

import (
	"context"
	"fmt"
	"path"
	"slices"
	"strings"

	"github.com/configbutler/gitops-reverser/crds"
	"github.com/configbutler/gitops-reverser/gitops"
	"github.com/configbutler/gitops-reverser/gitsecrets"
	"github.com/configbutler/gitops-reverser/shard"
)

// condition is the Ready condition the daemon reports on one of its objects.
type condition struct {
	ready   bool
	reason  string
	message string
	// waiting: not ready only because something every start goes through has not happened yet (a
	// cache filled, a first probe): its Event is Normal, since nothing is wrong.
	waiting bool
}

func notReady(reason, format string, args ...any) condition {
	return condition{reason: reason, message: fmt.Sprintf(format, args...)}
}

// waitingFor is notReady for a step every start goes through.
func waitingFor(reason, format string, args ...any) condition {
	c := notReady(reason, format, args...)
	c.waiting = true
	return c
}

// after is notReady because of cause, and waiting when cause is.
func after(cause condition, reason, format string, args ...any) condition {
	c := notReady(reason, format, args...)
	c.waiting = cause.waiting
	return c
}

// repo is a GitRepoConfig with the pool's verdict on its credentials and remote. An unreachable
// remote is only reported: workers keep retrying until it answers again, so a passing outage
// neither stops them nor drops what they have not pushed yet. Unusable credentials stop them.
type repo struct {
	obj     *crds.GitRepoConfig
	credsOK bool
	cond    condition
	checked bool               // the remote answered or failed: cond is worth reporting
	signing *gitops.SigningKey // for status.signingKey
}

// destination is a GitDestination resolved to a repository, a branch and a folder. Usable ones
// get a Git worker; cond is what its status says.
type destination struct {
	obj    *crds.GitDestination
	repo   *repo
	usable bool
	cond   condition
	// admittedRepo is the GitRepoConfig ("namespace/name") the destination may use: its own
	// namespace's, or one whose accessPolicy admits it; "" when not (yet) found to be so.
	admittedRepo string
	// recipients are the age recipients its Secrets are encrypted for; nil leaves Secrets out.
	recipients []string
	// encryption is why spec.encryption cannot be used; zero when it can or is not set.
	encryption condition
	// cluster is the RemoteCluster it mirrors, and what its last probe found; nil for the
	// daemon's own cluster.
	cluster      *remote
	clusterState remoteState
	// elsewhere says another replica owns the destination's shard: it runs its watches and
	// worker and reports its status.
	elsewhere bool
}

func (d *destination) name() string { return d.obj.Namespace + "/" + d.obj.Name }

// shard is the (repository, branch) the destination pushes to (its head branch when it delivers
// by pull request); only for a usable one.
func (d *destination) shard() shard.Key {
	return shard.Key{URL: d.repo.obj.Spec.RepoURL, Branch: d.obj.Lane()}
}

// ours says whether this replica writes the destination: it is usable and not owned elsewhere.
func (d *destination) ours() bool { return d.usable && !d.elsewhere }

// resolveDestinations checks every destination against its repository: the repository exists,
// admits the destination's namespace (refusal), and is ready, the branch is allowed, and no other
// destination on the same repository and branch owns an overlapping folder (the older destination
// keeps it; the newer is refused).
func resolveDestinations(objs []*crds.GitDestination, repos map[string]*repo, refusal refusalFunc) []*destination {
	slices.SortFunc(objs, func(a, b *crds.GitDestination) int {
		if c := a.CreationTimestamp.Compare(b.CreationTimestamp.Time); c != 0 {
			return c
		}
		return strings.Compare(a.Namespace+"/"+a.Name, b.Namespace+"/"+b.Name)
	})
	var out []*destination
	for _, obj := range objs {
		d := &destination{obj: obj}
		out = append(out, d)
		repoName := obj.Spec.RepoRef.NamespaceOr(obj.Namespace) + "/" + obj.Spec.RepoRef.Name
		r, ok := repos[repoName]
		switch {
		case !ok:
			d.cond = notReady("RepoNotFound", "GitRepoConfig %s not found", repoName)
			continue
		}
		if why := refusal("spec.repoRef", obj.Namespace, crds.KindGitRepoConfig, r.obj.Namespace, r.obj.Name, r.obj.Spec.AccessPolicy); why != "" {
			d.cond = notReady(ReasonReferenceNotAllowed, "%s", why)
			continue
		}
		d.admittedRepo = repoName
		switch {
		case !r.credsOK:
			d.cond = notReady("RepoNotReady", "GitRepoConfig %s is not ready: %s", repoName, r.cond.message)
			continue
		case !slices.Contains(r.obj.Spec.AllowedBranches, obj.Spec.Branch):
			d.cond = notReady("BranchNotAllowed", "branch %q is not in allowedBranches %v of GitRepoConfig %s",
				obj.Spec.Branch, r.obj.Spec.AllowedBranches, repoName)
			continue
		}
		d.repo = r
		if other := overlapping(d, out[:len(out)-1]); other != nil {
			d.cond = notReady("BaseFolderOverlap", "baseFolder %q overlaps %q of GitDestination %s on the same repository and branch",
				obj.Spec.BaseFolder, other.obj.Spec.BaseFolder, other.name())
			continue
		}
		if other, branch := headInUse(d, out[:len(out)-1]); other != nil {
			d.cond = notReady(ReasonHeadBranchInUse, "branch %q is the head branch of one GitDestination and written by another (%s) "+
				"on the same repository: the daemon force-pushes a head branch, so it must be the destination's alone", branch, other.name())
			continue
		}
		d.usable = true
		d.cond = condition{ready: true, reason: "Ready", message: fmt.Sprintf("writing %s@%s under %s/",
			r.obj.Spec.RepoURL, obj.Spec.Branch, path.Clean(obj.Spec.BaseFolder))}
		if head := obj.HeadBranch(); head != "" {
			d.cond.message += " through a pull request from " + head
		}
		if !r.cond.ready {
			d.cond = notReady("RepoUnreachable", "GitRepoConfig %s: %s; changes wait and are retried", repoName, r.cond.message)
		}
	}
	return out
}

// ReasonHeadBranchInUse: a destination's head branch is another's head branch or target.
const ReasonHeadBranchInUse = "HeadBranchInUse"

// headInUse finds an earlier destination on the same repository that pushes to the branch d
// writes as a head branch, or writes as a head branch the one d pushes to.
func headInUse(d *destination, earlier []*destination) (*destination, string) {
	for _, o := range earlier {
		if !o.usable || o.repo.obj.Spec.RepoURL != d.repo.obj.Spec.RepoURL {
			continue
		}
		dh, oh := d.obj.HeadBranch(), o.obj.HeadBranch()
		switch {
		case dh != "" && (dh == oh || dh == o.obj.Spec.Branch):
			return o, dh
		case oh != "" && oh == d.obj.Spec.Branch:
			return o, oh
		}
	}
	return nil, ""
}

func overlapping(d *destination, earlier []*destination) *destination {
	folder := path.Clean(d.obj.Spec.BaseFolder) + "/"
	for _, o := range earlier {
		if !o.usable || o.repo.obj.Spec.RepoURL != d.repo.obj.Spec.RepoURL || o.obj.Spec.Branch != d.obj.Spec.Branch {
			continue
		}
		other := path.Clean(o.obj.Spec.BaseFolder) + "/"
		if strings.HasPrefix(folder, other) || strings.HasPrefix(other, folder) {
			return o
		}
	}
	return nil
}

// resolveRepos hands every GitRepoConfig to Repos, which loads its credentials and signing key,
// and to the pool, which checks its remote (reportRepos says the result).
func (m *Manager) resolveRepos(ctx context.Context) map[string]*repo {
	objs := list[crds.GitRepoConfig](m, crds.GitRepoConfigs)
	specs := make([]gitsecrets.Repository, 0, len(objs))
	for _, obj := range objs {
		r := gitsecrets.Repository{Name: obj.Namespace + "/" + obj.Name, URL: obj.Spec.RepoURL}
		if ref := obj.Spec.SecretRef; ref != nil {
			r.SecretRef = &gitsecrets.SecretRef{Namespace: obj.Namespace, Name: ref.Name}
		}
		if cs := obj.Spec.CommitSigning; cs != nil {
			r.Signing = &gitsecrets.Signing{Format: cs.Format, Secret: gitsecrets.SecretRef{Namespace: obj.Namespace, Name: cs.SecretRef.Name}}
		}
		specs = append(specs, r)
	}
	states := m.opts.Repos.SetRepositories(ctx, specs)
	out := map[string]*repo{}
	for _, obj := range objs {
		name := obj.Namespace + "/" + obj.Name
		st := states[name]
		r := &repo{obj: obj, credsOK: st.Usable, checked: st.Reason != "Checking", signing: st.SigningKey}
		if st.Reason == "Reachable" || !r.checked {
			r.cond = condition{ready: true, reason: st.Reason, message: st.Message}
		} else {
			r.cond = notReady(st.Reason, "%s", st.Message)
		}
		out[name] = r
	}
	return out
}

// reportRepos writes the status of each GitRepoConfig: its signing key, and once its remote
// answered or failed, its condition. With shards, only the owner of the first of its branches
// that usable destinations ask for writes it, so a replica that cannot reach the remote never
// flips what the owner, which pushes there, says; one no destination uses is every replica's.
func (m *Manager) reportRepos(ctx context.Context, repos map[string]*repo, dests []*destination) {
	first := map[*repo]shard.Key{}
	if m.opts.Shards != nil {
		for _, d := range dests {
			if k, seen := first[d.repo]; d.usable && (!seen || d.shard().Branch < k.Branch) {
				first[d.repo] = d.shard()
			}
		}
	}
	for _, r := range repos {
		if k, shared := first[r]; shared && !m.opts.Shards.Owns(k) {
			continue // its owner reports it
		}
		if err := m.reporter.reportSigningKey(ctx, r.obj, r.signing); err != nil {
			m.opts.Log.Warn("report status", "err", err)
		}
		if !r.checked {
			continue // nothing to say until the remote answered or failed
		}
		if err := m.reporter.report(ctx, repoConfigKind, r.obj, r.obj.Status.Status, r.cond); err != nil {
			m.opts.Log.Warn("report status", "err", err)
		}
	}
}
