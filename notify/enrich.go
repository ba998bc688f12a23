package notify

import (
	"context"
	"net/url"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/configbutler/gitops-reverser/crds"
)

// lookupTimeout bounds the reads that tell what a notice concerns.
const lookupTimeout = 5 * time.Second

// enricher reads what an Event does not say: the destination it concerns, and for a proposal
// its commit, author, file, diff and repository. It reads with the daemon's own rights, and
// only for a notice some rule selected.
type enricher struct {
	dyn     dynamic.Interface
	pageURL string // the operator page, as people reach it; "" when unknown
}

// enrich fills n in. What cannot be read stays empty: a notice is still worth sending without it,
// but one that names no destination is never read across namespaces (rule.sees).
func (e *enricher) enrich(ctx context.Context, n *Notice) {
	ctx, cancel := context.WithTimeout(ctx, lookupTimeout)
	defer cancel()
	o := n.Object
	switch o.Kind {
	case crds.KindProposal:
		p, ok := get[crds.Proposal](ctx, e.dyn, crds.Proposals, o.Namespace, o.Name)
		if !ok {
			return
		}
		n.Destination, n.Commit, n.File = p.Spec.DestinationRef.Name, p.Spec.SourceCommit, p.Spec.Path
		n.Author = p.Spec.Author.Name
		if p.Spec.Author.Email != "" {
			n.Author += " <" + p.Spec.Author.Email + ">"
		}
		n.Diff = Summarize(p.Spec.Target.Kind, p.Spec.Diff)
		n.Link = e.link("proposals", o.Namespace, o.Name)
		n.Repository = e.repository(ctx, o.Namespace, n.Destination)
	case crds.KindSyncRun:
		if r, ok := get[crds.SyncRun](ctx, e.dyn, crds.SyncRuns, o.Namespace, o.Name); ok {
			n.Destination = r.Spec.DestinationRef.Name
		}
	case crds.KindWatchRule:
		if r, ok := get[crds.WatchRule](ctx, e.dyn, crds.WatchRules, o.Namespace, o.Name); ok &&
			r.Spec.DestinationRef.NamespaceOr(o.Namespace) == o.Namespace {
			n.Destination = r.Spec.DestinationRef.Name
		}
	case crds.KindGitDestination:
		n.Repository = e.repository(ctx, o.Namespace, o.Name)
	}
	if n.Link == "" {
		n.Link = e.link()
	}
}

// repository is the URL of the repository of destination namespace/name, "" when unknown.
func (e *enricher) repository(ctx context.Context, namespace, name string) string {
	d, ok := get[crds.GitDestination](ctx, e.dyn, crds.GitDestinations, namespace, name)
	if !ok {
		return ""
	}
	repo, ok := get[crds.GitRepoConfig](ctx, e.dyn, crds.GitRepoConfigs, d.Spec.RepoRef.NamespaceOr(namespace), d.Spec.RepoRef.Name)
	if !ok {
		return ""
	}
	return repo.Spec.RepoURL
}

// link is the page's URL with the path elements appended; "" when the page's URL is unknown.
func (e *enricher) link(elems ...string) string {
	if e.pageURL == "" {
		return ""
	}
	u, err := url.JoinPath(e.pageURL, elems...)
	if err != nil {
		return ""
	}
	return u
}

func get[T any](ctx context.Context, dyn dynamic.Interface, gvr schema.GroupVersionResource, namespace, name string) (*T, bool) {
	u, err := dyn.Resource(gvr).Namespace(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, false
	}
	obj, err := crds.FromUnstructured[T](u)
	return obj, err == nil
}
