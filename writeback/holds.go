package writeback

import (
	"context"
	"fmt"

	"github.com/configbutler/gitops-reverser/gitops"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/configbutler/gitops-reverser/crds"
)

// LoadHolds holds the file of every waiting proposal, so that the mirror, which writes every
// live object when it starts, leaves them as people wrote them. The daemon calls it before it
// starts the mirror. A proposal whose destination cannot be read is skipped (its file is then
// written from the live state, and the proposal goes Stale when next looked at), quietly when
// the destination no longer exists.
func (c *Controller) LoadHolds(ctx context.Context) (int, error) {
	key, err := c.sealKey(ctx)
	if err != nil {
		return 0, err
	}
	list, err := c.dyn.Resource(crds.Proposals).List(ctx, metav1.ListOptions{})
	if err != nil {
		return 0, fmt.Errorf("list Proposals: %w", err)
	}
	repos := map[string]*crds.GitRepoConfig{}
	held := 0
	for i := range list.Items {
		p, err := crds.FromUnstructured[crds.Proposal](&list.Items[i])
		if err != nil || !waiting(p) || !sealed(key, p) { // one the daemon did not open holds nothing
			continue
		}
		d, err := c.getDestination(ctx, p.Namespace, p.Spec.DestinationRef.Name, repos)
		switch {
		case apierrors.IsNotFound(err): // the destination is gone: there is no file to keep
			c.cfg.Log.Debug("proposal of a missing destination not held", "proposal", p.Namespace+"/"+p.Name, "err", err)
			continue
		case err != nil:
			c.cfg.Log.Warn("proposal's file not held", "proposal", p.Namespace+"/"+p.Name, "err", err)
			continue
		}
		c.cfg.Git.Hold(d.url, d.branch, p.Spec.Path)
		held++
	}
	return held, nil
}

// Enabled reports whether some GitDestination enables write-back, as the apiserver has them now
// (the caches do not run yet): without one there is no proposal to hold, and the mirror waits
// for nothing of write-back's.
func (c *Controller) Enabled(ctx context.Context) (bool, error) {
	list, err := c.dyn.Resource(crds.GitDestinations).List(ctx, metav1.ListOptions{})
	if err != nil {
		return false, fmt.Errorf("list GitDestinations: %w", err)
	}
	for _, u := range list.Items {
		if on, _, _ := unstructured.NestedBool(u.Object, "spec", "writeBack", "enabled"); on {
			return true, nil
		}
	}
	return false, nil
}

// getDestination reads a destination and its repository from the apiserver (the caches are
// not running yet); repos caches the repositories read.
func (c *Controller) getDestination(ctx context.Context, namespace, name string, repos map[string]*crds.GitRepoConfig) (*dest, error) {
	u, err := c.dyn.Resource(crds.GitDestinations).Namespace(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("read GitDestination %s/%s: %w", namespace, name, err)
	}
	obj, err := crds.FromUnstructured[crds.GitDestination](u)
	if err != nil {
		return nil, err
	}
	repoNS := obj.Spec.RepoRef.NamespaceOr(namespace)
	key := repoNS + "/" + obj.Spec.RepoRef.Name
	repo := repos[key]
	if repo == nil {
		ru, err := c.dyn.Resource(crds.GitRepoConfigs).Namespace(repoNS).Get(ctx, obj.Spec.RepoRef.Name, metav1.GetOptions{})
		if err != nil {
			return nil, fmt.Errorf("read GitRepoConfig %s: %w", key, err)
		}
		if repo, err = crds.FromUnstructured[crds.GitRepoConfig](ru); err != nil {
			return nil, err
		}
		repos[key] = repo
	}
	return newDest(obj, repo), nil
}

// release ends p's hold of its file; restore is what the mirror writes there should it have
// nothing newer. A hold is the whole file's: in an adopted folder, where one file holds several
// objects and so may be held by several proposals, one per document, the file stays held while
// another proposal of the destination waits on it.
func (c *Controller) release(ctx context.Context, d *dest, p *crds.Proposal, restore *gitops.Change) {
	if d.obj.Adopted() && c.stillHeld(ctx, d, p) {
		return
	}
	c.cfg.Git.Release(d.url, d.branch, p.Spec.Path, restore)
}

// stillHeld says whether a proposal of d other than p waits on p's file. It asks the apiserver,
// not the cache, which may not have seen the proposals this worker just opened or ended yet;
// when it cannot be asked, the file stays held (until another proposal of it ends, or a
// restart, which holds only what waits).
func (c *Controller) stillHeld(ctx context.Context, d *dest, p *crds.Proposal) bool {
	list, err := c.dyn.Resource(crds.Proposals).Namespace(d.obj.Namespace).List(ctx,
		metav1.ListOptions{LabelSelector: crds.LabelDestination + "=" + d.obj.Name})
	if err != nil {
		c.cfg.Log.Warn("could not list the proposals of a file to release it; it stays held", "proposal", p.Namespace+"/"+p.Name, "err", err)
		return true
	}
	for i := range list.Items {
		o, err := crds.FromUnstructured[crds.Proposal](&list.Items[i])
		if err == nil && o.Name != p.Name && o.Spec.DestinationRef.Name == d.obj.Name && o.Spec.Path == p.Spec.Path && waiting(o) && c.ours(o) {
			return true
		}
	}
	return false
}
