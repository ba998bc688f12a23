package writeback

import (
	"fmt"
	"path"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/configbutler/gitops-reverser/crds"
)

// dest is a write-back destination resolved to its repository, branch and folder.
type dest struct {
	obj         *crds.GitDestination
	key         string // namespace/name
	url, folder string
	// branch names the Git worker that reads the destination's history: its target branch, or
	// its head branch when it delivers by pull request (whose worker reads the target as well).
	branch string
}

func (d *dest) writeBack() crds.WriteBack {
	if d.obj.Spec.WriteBack == nil {
		return crds.WriteBack{}
	}
	return *d.obj.Spec.WriteBack
}

func (d *dest) status() crds.WriteBackStatus {
	if d.obj.Status.WriteBack == nil {
		return crds.WriteBackStatus{}
	}
	return *d.obj.Status.WriteBack
}

// destination reads a GitDestination and its GitRepoConfig from the cache.
func (c *Controller) destination(namespace, name string) (*dest, error) {
	key := namespace + "/" + name
	item, ok, err := c.dests.GetStore().GetByKey(key)
	if err != nil || !ok {
		return nil, fmt.Errorf("GitDestination %s: %w", key, errNotWriteBack)
	}
	obj, err := crds.FromUnstructured[crds.GitDestination](item.(*unstructured.Unstructured))
	if err != nil {
		return nil, fmt.Errorf("read GitDestination %s: %w", key, err)
	}
	repoKey := obj.Spec.RepoRef.NamespaceOr(namespace) + "/" + obj.Spec.RepoRef.Name
	repos, ok := c.caches.Indexer(crds.GitRepoConfigs)
	if !ok { // no destination enables write-back
		return nil, fmt.Errorf("GitDestination %s: %w", key, errNotWriteBack)
	}
	item, ok, err = repos.GetByKey(repoKey)
	if err != nil || !ok {
		return nil, fmt.Errorf("GitRepoConfig %s of GitDestination %s not found", repoKey, key)
	}
	repo, err := crds.FromUnstructured[crds.GitRepoConfig](item.(*unstructured.Unstructured))
	if err != nil {
		return nil, fmt.Errorf("read GitRepoConfig %s: %w", repoKey, err)
	}
	return newDest(obj, repo), nil
}

// owns says whether this replica does the destination's write-back: it owns its branch's shard.
func (c *Controller) owns(d *dest) bool {
	return c.cfg.Owns == nil || c.cfg.Owns(d.url, d.branch)
}

// mayWrite asks the fence of d's branch whether this replica may still write for it, as pushes
// and applies do: a replica that lost the branch's shard (or the leadership) writes no SyncRun,
// proposal or status for it, though it has not noticed yet. ErrFenced when it may not.
func (c *Controller) mayWrite(d *dest) error {
	if c.cfg.Fences == nil {
		return nil
	}
	if _, err := c.cfg.Fences(d.url, d.branch)(); err != nil {
		return fmt.Errorf("%w: %w", ErrFenced, err)
	}
	return nil
}

// ownsDestination says whether this replica does the write-back of the destination
// namespace/name; one that is gone, or not usable, is every replica's without shards and none's
// with them.
func (c *Controller) ownsDestination(namespace, name string) bool {
	if c.cfg.Owns == nil {
		return true
	}
	d, err := c.destination(namespace, name)
	return err == nil && c.owns(d)
}

func newDest(obj *crds.GitDestination, repo *crds.GitRepoConfig) *dest {
	return &dest{obj: obj, key: obj.Namespace + "/" + obj.Name, url: repo.Spec.RepoURL, branch: obj.Lane(),
		folder: cleanFolder(obj.Spec.BaseFolder)}
}

// cleanFolder is baseFolder as the gitops package writes under it: no leading, trailing or
// doubled slashes; "" for the repository's root.
func cleanFolder(f string) string {
	c := path.Clean("/" + f)
	if c == "/" {
		return ""
	}
	return c[1:]
}
