package receiver

import (
	"context"
	"fmt"
	"slices"
	"sort"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/configbutler/gitops-reverser/crds"
	"github.com/configbutler/gitops-reverser/kube"
)

// Reasons of a Receiver's Ready condition.
const (
	ReasonReady          = "Ready"
	ReasonSecretNotFound = "SecretNotFound"
	ReasonTokenMissing   = "TokenMissing"
	ReasonNoDestination  = "NoDestination"
	ReasonSuspended      = "Suspended"
)

// resolved is one Receiver as the controller resolved it in a sync.
type resolved struct {
	obj    *crds.Receiver
	entry  *Entry
	path   string // "" while the token is unknown
	reason string // ReasonReady or why it is not ready; entry.NotReady holds the message
}

// resolveAll resolves every Receiver in the cache, sorted by key.
func (c *Controller) resolveAll(ctx context.Context) []resolved {
	byRepo := c.destinationsByRepo()
	var out []resolved
	for _, item := range c.receivers.GetStore().List() {
		r, err := crds.FromUnstructured[crds.Receiver](item.(*unstructured.Unstructured))
		if err != nil {
			c.cfg.Log.Warn("receivers: skip an unreadable Receiver", "err", err)
			continue
		}
		out = append(out, c.resolve(ctx, r, byRepo))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].entry.Key() < out[j].entry.Key() })
	return out
}

// resolve reads the Receiver's token and expands its resources into targets.
func (c *Controller) resolve(ctx context.Context, r *crds.Receiver, byRepo map[string][]Target) resolved {
	e := &Entry{Namespace: r.Namespace, Name: r.Name, Type: r.Spec.Type, Events: r.Spec.Events}
	out := resolved{obj: r, entry: e, reason: ReasonReady}
	notReady := func(reason, message string) {
		if out.reason == ReasonReady {
			out.reason, e.NotReady = reason, message
		}
	}
	token, reason, message := c.token(ctx, r.Namespace, r.Spec.SecretRef.Name)
	if reason != "" {
		notReady(reason, message)
	} else {
		e.Token = token
		out.path = WebhookPath(token, r.Name, r.Namespace)
	}
	e.Targets = c.targets(r, byRepo)
	if r.Spec.Suspend {
		notReady(ReasonSuspended, "suspended")
	}
	if len(e.Targets) == 0 {
		notReady(ReasonNoDestination, "no destination")
	}
	return out
}

// token reads key "token" of the Secret with a GET; on failure it returns a reason and message.
func (c *Controller) token(ctx context.Context, namespace, name string) ([]byte, string, string) {
	s, err := kube.For(c.dyn, kube.Secrets, namespace).Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return nil, ReasonSecretNotFound, fmt.Sprintf("Secret %s/%s not found", namespace, name)
	case apierrors.IsForbidden(err):
		return nil, ReasonSecretNotFound, fmt.Sprintf("the daemon may not read Secret %s/%s: put the Receiver in the daemon's namespace or grant get on it", namespace, name)
	case err != nil:
		return nil, ReasonSecretNotFound, fmt.Sprintf("read Secret %s/%s: %v", namespace, name, err)
	}
	token := s.Data[crds.ReceiverTokenKey]
	if len(token) == 0 {
		return nil, ReasonTokenMissing, fmt.Sprintf("Secret %s/%s has no key %q", namespace, name, crds.ReceiverTokenKey)
	}
	return token, "", ""
}

// targets expands the Receiver's resources: a GitDestination is one target, a GitRepoConfig all
// of its destinations. A destination whose GitRepoConfig is missing is left out: it has no
// repository to match an event against.
func (c *Controller) targets(r *crds.Receiver, byRepo map[string][]Target) []Target {
	var out []Target
	for _, res := range r.Spec.Resources {
		ns := res.NamespaceOr(r.Namespace)
		switch res.Kind {
		case crds.KindGitDestination:
			if t, ok := c.destinationTarget(ns + "/" + res.Name); ok {
				out = append(out, t)
			}
		case crds.KindGitRepoConfig:
			out = append(out, byRepo[ns+"/"+res.Name]...)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		return out[i].Namespace+"/"+out[i].Name < out[j].Namespace+"/"+out[j].Name
	})
	return slices.Compact(out)
}

// destinationTarget is the target of one GitDestination, by key, with its repository's URL.
func (c *Controller) destinationTarget(key string) (Target, bool) {
	item, ok, _ := c.dests.GetStore().GetByKey(key)
	if !ok {
		return Target{}, false
	}
	d, err := crds.FromUnstructured[crds.GitDestination](item.(*unstructured.Unstructured))
	if err != nil {
		return Target{}, false
	}
	url, ok := c.repoURL(d.Spec.RepoRef.NamespaceOr(d.Namespace) + "/" + d.Spec.RepoRef.Name)
	return Target{Namespace: d.Namespace, Name: d.Name, RepoURL: url}, ok
}

// repoURL is the spec.repoUrl of a GitRepoConfig, by key.
func (c *Controller) repoURL(key string) (string, bool) {
	item, ok, _ := c.repos.GetStore().GetByKey(key)
	if !ok {
		return "", false
	}
	url, _, _ := unstructured.NestedString(item.(*unstructured.Unstructured).Object, "spec", "repoUrl")
	return url, url != ""
}

// destinationsByRepo maps each GitRepoConfig key to the targets of its destinations.
func (c *Controller) destinationsByRepo() map[string][]Target {
	out := map[string][]Target{}
	for _, item := range c.dests.GetStore().List() {
		d, err := crds.FromUnstructured[crds.GitDestination](item.(*unstructured.Unstructured))
		if err != nil {
			continue
		}
		repo := d.Spec.RepoRef.NamespaceOr(d.Namespace) + "/" + d.Spec.RepoRef.Name
		if url, ok := c.repoURL(repo); ok {
			out[repo] = append(out[repo], Target{Namespace: d.Namespace, Name: d.Name, RepoURL: url})
		}
	}
	return out
}

// indexRepositories records which Receivers target each repository (normalised).
func (c *Controller) indexRepositories(all []resolved) {
	byRepo := map[string][]string{}
	for _, r := range all {
		for _, t := range r.entry.Targets {
			if k, ok := repositoryKey(t.RepoURL); ok && !slices.Contains(byRepo[k], r.entry.Key()) {
				byRepo[k] = append(byRepo[k], r.entry.Key())
			}
		}
	}
	c.mu.Lock()
	c.byRepo = byRepo
	c.mu.Unlock()
}

// ReceiversFor lists the Receivers ("namespace/name") with a destination on the repository at
// repoURL, compared after normalisation (see SameRepository); nil when there are none.
func (c *Controller) ReceiversFor(repoURL string) []string {
	k, ok := repositoryKey(repoURL)
	if !ok {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.byRepo[k])
}

// repositoryKey is the normalised form of a repository URL: host and path.
func repositoryKey(repoURL string) (string, bool) {
	r, ok := parseRepository(repoURL)
	if !ok {
		return "", false
	}
	return r.host + "/" + r.path, true
}
