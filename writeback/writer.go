package writeback

import (
	"fmt"
	"slices"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/configbutler/gitops-reverser/crds"
)

// Why write-back writes as a ServiceAccount: a GitDestination, a WatchRule and the files in Git
// are all written by people the daemon must not do more for than they could do themselves. So
// nothing write-back changes in the cluster goes out with the daemon's own rights: every create,
// patch and delete (and the dry run before it) is sent with Kubernetes impersonation of the
// ServiceAccount of the rule that selects the object, and the apiserver enforces that identity's
// RBAC (escalation checks included) and admission. The daemon itself holds only the right to
// impersonate ServiceAccounts; which one a rule may name, and that it agreed, is the watch's to
// check before the rule is admitted.

// Writer is a rule that selects a resource for a destination, with the ServiceAccount its objects
// are written back as (zero: it names none).
type Writer struct {
	Rule           string // as people read it: "WatchRule team-a/apps"
	ServiceAccount crds.ServiceAccountReference
}

// Reasons of ConditionWritesAs, and of a proposal's Applied condition while it waits for one.
const (
	// ReasonServiceAccounts: every selected resource is written back as one ServiceAccount.
	ReasonServiceAccounts = "ServiceAccounts"
	// ReasonNoServiceAccount: a rule names no ServiceAccount (or rules selecting one resource name
	// different ones), so what it selects is not written back; its proposals wait.
	ReasonNoServiceAccount = "NoServiceAccount"
)

// ConditionWritesAs is the condition in a destination's status.writeBack that says which
// ServiceAccounts its proposals are applied as, or what to add so that they can be.
const ConditionWritesAs = "WritesAs"

// maxWriterClients bounds the impersonating clients kept: past it they are built again.
const maxWriterClients = 256

// writerKey is one identity acting as one ServiceAccount: the daemon's own, or a RemoteCluster's
// kubeconfig identity (its *rest.Config, which is never changed), impersonating sa.
type writerKey struct {
	base *rest.Config
	sa   crds.ServiceAccountReference
}

// writerClients keeps one impersonating dynamic client per cluster connection and
// ServiceAccount. Those of one connection share its transport (client-go keys its transports by
// TLS settings, which impersonation does not change); only the impersonation headers differ.
type writerClients struct {
	mu      sync.Mutex
	clients map[writerKey]dynamic.Interface
}

// as is the client that acts as the ServiceAccount sa through base, in base's cluster.
func (w *writerClients) as(base *rest.Config, sa crds.ServiceAccountReference) (dynamic.Interface, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	key := writerKey{base: base, sa: sa}
	if c, ok := w.clients[key]; ok {
		return c, nil
	}
	cfg := rest.CopyConfig(base)
	// A ServiceAccount's username alone: the apiserver adds its groups (system:serviceaccounts and
	// system:serviceaccounts:<namespace>) itself, and asks only that the caller may impersonate
	// serviceaccounts.
	cfg.Impersonate = rest.ImpersonationConfig{UserName: sa.Username()}
	c, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("build a client acting as ServiceAccount %s: %w", sa, err)
	}
	if len(w.clients) >= maxWriterClients {
		clear(w.clients)
	}
	w.clients[key] = c
	return c, nil
}

// writerOf is the ServiceAccount a change of target is applied as: the one the rules of the
// destination that select it name. problem says, when there is none, what to add.
func writerOf(d *dest, sels []Selection, target crds.ProposalTarget) (sa crds.ServiceAccountReference, problem string) {
	gv, _ := schema.ParseGroupVersion(target.APIVersion)
	var named, unnamed []Writer
	for _, s := range sels {
		if s.GVR.Group != gv.Group || s.GVR.Resource != target.Resource || !inScope(&s, target.Namespace) {
			continue
		}
		for _, w := range s.Writers {
			switch {
			case w.ServiceAccount == crds.ServiceAccountReference{}:
				unnamed = append(unnamed, w)
			case !slices.ContainsFunc(named, func(n Writer) bool { return n.ServiceAccount == w.ServiceAccount }):
				named = append(named, w)
			}
		}
	}
	switch {
	case len(named) == 1:
		return named[0].ServiceAccount, ""
	case len(named) > 1:
		parts := make([]string, len(named))
		for i, w := range named {
			parts[i] = fmt.Sprintf("%s as %s", w.Rule, w.ServiceAccount)
		}
		return sa, fmt.Sprintf("the rules that select %s name different ServiceAccounts (%s): name the same one in each, so it is clear who writes it",
			targetName(target), strings.Join(parts, ", "))
	case len(unnamed) > 0:
		return sa, fmt.Sprintf("%s is not applied: %s, which selects it, names no ServiceAccount to write it as; %s",
			targetName(target), unnamed[0].Rule, nameAServiceAccount(unnamed[0].Rule))
	}
	return sa, fmt.Sprintf("%s is not applied: no rule of GitDestination %s selects it any more", targetName(target), d.key)
}

// nameAServiceAccount says how a rule (as Writer.Rule names it) gets a ServiceAccount.
func nameAServiceAccount(rule string) string {
	if kind, name, _ := strings.Cut(rule, " "); kind == crds.KindClusterWatchRule {
		return fmt.Sprintf("set spec.serviceAccountRef (name, namespace) on ClusterWatchRule %s to a ServiceAccount that may make the change", name)
	}
	ns, name, _ := strings.Cut(strings.TrimPrefix(rule, crds.KindWatchRule+" "), "/")
	return fmt.Sprintf("set spec.serviceAccountName on WatchRule %s/%s to a ServiceAccount of %s that may make the change, and annotate it "+
		"%s=%s (or start the daemon with --default-service-account); docs/write-back.md has a ready Role", ns, name, ns, crds.AnnotationWatchRules, name)
}

// writersCondition is ConditionWritesAs for a destination's selections.
func writersCondition(sels []Selection) metav1.Condition {
	var as, missing []string
	for _, s := range sels {
		for _, w := range s.Writers {
			entry := w.Rule
			if w.ServiceAccount == (crds.ServiceAccountReference{}) {
				if !slices.Contains(missing, entry) {
					missing = append(missing, entry)
				}
				continue
			}
			if entry += " as " + w.ServiceAccount.Username(); !slices.Contains(as, entry) {
				as = append(as, entry)
			}
		}
	}
	slices.Sort(as)
	slices.Sort(missing)
	c := metav1.Condition{Type: ConditionWritesAs, Status: metav1.ConditionTrue, Reason: ReasonServiceAccounts,
		Message: "proposals are applied as the rules' ServiceAccounts, within their rights: " + strings.Join(as, "; ")}
	switch {
	case len(missing) > 0:
		c.Status, c.Reason = metav1.ConditionFalse, ReasonNoServiceAccount
		c.Message = fmt.Sprintf("%s names no ServiceAccount, so the proposals for what it selects wait: %s", missing[0], nameAServiceAccount(missing[0]))
		if len(missing) > 1 {
			c.Message += fmt.Sprintf(" (%d rules in all: %s)", len(missing), strings.Join(missing, ", "))
		}
	case len(as) == 0:
		c.Message = "no rule selects anything for this destination yet"
	}
	return c
}

// setWritesAs sets ConditionWritesAs in st for what the destination selects now.
// For a destination of a RemoteCluster, they are that cluster's ServiceAccounts.
func (c *Controller) setWritesAs(d *dest, st *crds.WriteBackStatus) {
	cond := writersCondition(c.cfg.Selections(d.key))
	if ref := d.obj.Spec.ClusterRef; ref != nil && cond.Status == metav1.ConditionTrue {
		cond.Message += fmt.Sprintf(" (ServiceAccounts of RemoteCluster %s/%s, impersonated through its kubeconfig's identity)",
			ref.NamespaceOr(d.obj.Namespace), ref.Name)
	}
	meta.SetStatusCondition(&st.Conditions, cond)
}
