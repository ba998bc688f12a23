package watch

import (
	"context"
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing/transport"
	"github.com/go-git/go-git/v5/storage/memory"

	"github.com/configbutler/gitops-reverser/crds"
	"github.com/configbutler/gitops-reverser/gitops"
)

// condition is the Ready condition the daemon reports on one of its objects.
type condition struct {
	ready   bool
	reason  string
	message string
}

func notReady(reason, format string, args ...any) condition {
	return condition{reason: reason, message: fmt.Sprintf(format, args...)}
}

// repo is a GitRepoConfig with its credentials resolved and its remote checked. An unreachable
// remote is only reported: workers keep retrying until it answers again, so a passing outage
// neither stops them nor drops what they have not pushed yet. Unusable credentials stop them.
type repo struct {
	obj     *crds.GitRepoConfig
	creds   credentials
	credsOK bool
	cond    condition
}

// destination is a GitDestination resolved to a repository, a branch and a folder. Usable ones
// get a Git worker; cond is what its status says.
type destination struct {
	obj    *crds.GitDestination
	repo   *repo
	usable bool
	cond   condition
}

func (d *destination) name() string { return d.obj.Namespace + "/" + d.obj.Name }

// workerKey identifies the worker of the destination: one per repository, branch and credentials.
func (d *destination) workerKey() string {
	return gitops.WorkerKey(d.repo.obj.Spec.RepoURL, d.obj.Spec.Branch) + "-" + d.repo.creds.key
}

// reachability caches ls-remote results until the next discovery refresh forgets them, so a
// reconcile does not contact every remote each time the configuration changes. Only the
// manager's goroutine uses it.
type reachability struct {
	results map[string]error
}

func (r *reachability) check(ctx context.Context, url string, creds credentials) error {
	k := url + "\x00" + creds.key
	if err, ok := r.results[k]; ok {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	remote := git.NewRemote(memory.NewStorage(), &config.RemoteConfig{Name: "origin", URLs: []string{url}})
	_, err := remote.ListContext(ctx, &git.ListOptions{Auth: creds.auth})
	if errors.Is(err, transport.ErrEmptyRemoteRepository) {
		err = nil // an empty repository is a fine place to start
	}
	r.results[k] = err
	return err
}

// forget drops cached results so the next check contacts the remote again.
func (r *reachability) forget() { clear(r.results) }

// resolveDestinations checks every destination against its repository: the repository exists and
// is ready, the branch is allowed, and no other destination on the same repository and branch
// owns an overlapping folder (the older destination keeps it; the newer is refused).
func resolveDestinations(objs []*crds.GitDestination, repos map[string]*repo) []*destination {
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
		d.usable = true
		d.cond = condition{ready: true, reason: "Ready", message: fmt.Sprintf("writing %s@%s under %s/",
			r.obj.Spec.RepoURL, obj.Spec.Branch, path.Clean(obj.Spec.BaseFolder))}
		if !r.cond.ready {
			d.cond = notReady("RepoUnreachable", "GitRepoConfig %s: %s; changes wait and are retried", repoName, r.cond.message)
		}
	}
	return out
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

// resolveRepos loads every GitRepoConfig's credentials, checks that its remote answers, and
// reports the result in its status.
func (m *Manager) resolveRepos(ctx context.Context) map[string]*repo {
	out := map[string]*repo{}
	for _, obj := range list[crds.GitRepoConfig](m, crds.GitRepoConfigs) {
		r := &repo{obj: obj}
		out[obj.Namespace+"/"+obj.Name] = r
		r.cond = m.checkRepo(ctx, r)
		if err := m.reporter.report(ctx, crds.GitRepoConfigs, crds.KindGitRepoConfig, obj, obj.Status, r.cond); err != nil {
			m.opts.Log.Warn("report status", "err", err)
		}
	}
	for name := range m.creds {
		if out[name] == nil {
			delete(m.creds, name) // the GitRepoConfig is gone
		}
	}
	return out
}

// checkRepo loads the repository's credentials and checks that its remote answers. When the
// Secret cannot be read for a passing reason (the API is briefly unavailable), the credentials
// last read keep the workers going.
func (m *Manager) checkRepo(ctx context.Context, r *repo) condition {
	name := r.obj.Namespace + "/" + r.obj.Name
	if ref := r.obj.Spec.SecretRef; ref != nil {
		creds, err := loadCredentials(ctx, m.core, r.obj.Namespace, ref.Name, m.opts.WorkDir)
		var bad errSecret
		switch {
		case errors.As(err, &bad):
			delete(m.creds, name)
			return notReady("SecretInvalid", "%s", bad.msg)
		case err != nil:
			last, ok := m.creds[name]
			r.creds, r.credsOK = last, ok
			return notReady("SecretUnreadable", "%v", err)
		}
		r.creds = creds
		m.creds[name] = creds
	}
	r.credsOK = true
	if err := m.reach.check(ctx, r.obj.Spec.RepoURL, r.creds); err != nil {
		return notReady("Unreachable", "cannot list %s: %v", r.obj.Spec.RepoURL, err)
	}
	return condition{ready: true, reason: "Reachable", message: "remote " + r.obj.Spec.RepoURL + " answers"}
}
