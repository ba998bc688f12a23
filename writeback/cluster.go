package writeback

import (
	"context"
	"fmt"
	"strings"
	"sync"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/configbutler/gitops-reverser/authz"
	"github.com/configbutler/gitops-reverser/crds"
)

// Why a destination of a RemoteCluster is written back in that cluster, and only there: its
// files say what that cluster holds, so the live object is read there, the approver's rights are
// asked there (a SubjectAccessReview that cluster answers for the hub user, under names of the
// hub's own unless the RemoteCluster says the two share identities: approverIn), and
// the change is made there as the rule's ServiceAccount of that cluster, impersonated through the
// kubeconfig's identity, so that cluster's RBAC and admission decide. Its Proposals, SyncRuns and
// status stay on the hub. Nothing falls back to the hub's clients or to the daemon's own rights:
// while the cluster is not connected, or its kubeconfig's identity may not create
// SubjectAccessReviews or impersonate the ServiceAccount there, the proposal waits and says what
// to grant.

// Reasons of a proposal's Applied condition while its RemoteCluster cannot take the change.
const (
	// ReasonClusterNotConnected: the destination's RemoteCluster is not connected (or not, or no
	// longer, admitted to the destination): nothing is read or applied there until it is.
	ReasonClusterNotConnected = "ClusterNotConnected"
	// ReasonClusterForbidden: the RemoteCluster's kubeconfig identity may not create
	// SubjectAccessReviews, or impersonate the ServiceAccount, in that cluster.
	ReasonClusterForbidden = "ClusterForbidden"
)

// maxClusters bounds the remote clusters whose clients are kept: past it they are built again.
const maxClusters = 64

// cluster is where a destination's objects live, as write-back reaches it: the daemon's own
// cluster with its own rights, or a RemoteCluster through its kubeconfig's identity.
type cluster struct {
	name    string            // "namespace/name" of the RemoteCluster; "" for the daemon's own
	config  *rest.Config      // never changed: a rotated kubeconfig comes as another one
	dyn     dynamic.Interface // reads and SubjectAccessReviews, with config's rights
	writers *writerClients    // the applies, impersonating a ServiceAccount through config
}

// remote reports whether the cluster is a RemoteCluster.
func (cl *cluster) remote() bool { return cl.name != "" }

// writer is the client that acts as the ServiceAccount sa in the cluster.
func (cl *cluster) writer(sa crds.ServiceAccountReference) (dynamic.Interface, error) {
	return cl.writers.as(cl.config, sa)
}

// where says, for messages, which cluster a ServiceAccount or an object is in: "" for the
// daemon's own.
func (cl *cluster) where() string {
	if !cl.remote() {
		return ""
	}
	return " in RemoteCluster " + cl.name
}

// remoteClusters keeps the clients of each remote cluster's connection, by its *rest.Config,
// which the watch never changes (a rotated kubeconfig, or new limits, is a new one).
type remoteClusters struct {
	mu       sync.Mutex
	byConfig map[*rest.Config]*cluster
}

// of is the cluster of the RemoteCluster name reached with cfg.
func (r *remoteClusters) of(name string, cfg *rest.Config, writers *writerClients) (*cluster, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if cl, ok := r.byConfig[cfg]; ok && cl.name == name {
		return cl, nil
	}
	dyn, err := dynamic.NewForConfig(rest.CopyConfig(cfg))
	if err != nil {
		return nil, fmt.Errorf("build a client of RemoteCluster %s: %w", name, err)
	}
	if len(r.byConfig) >= maxClusters {
		clear(r.byConfig)
	}
	cl := &cluster{name: name, config: cfg, dyn: dyn, writers: writers}
	r.byConfig[cfg] = cl
	return cl, nil
}

// clusterOf is the cluster d's objects live in; problem says, when write-back cannot reach it,
// why, and the cluster is then nil.
func (c *Controller) clusterOf(d *dest) (_ *cluster, problem string) {
	ref := d.obj.Spec.ClusterRef
	if ref == nil {
		return c.own, ""
	}
	name := ref.NamespaceOr(d.obj.Namespace) + "/" + ref.Name
	if c.cfg.Cluster == nil {
		return nil, fmt.Sprintf("GitDestination %s mirrors RemoteCluster %s, which this daemon does not write back to: nothing is read or applied there", d.key, name)
	}
	cfg, err := c.cfg.Cluster(d.obj)
	if err == nil {
		var cl *cluster
		if cl, err = c.remotes.of(name, cfg, c.writers); err == nil {
			return cl, ""
		}
	}
	return nil, fmt.Sprintf("RemoteCluster %s of GitDestination %s cannot be reached (%v): nothing is read or applied there until it is "+
		"connected (its Ready condition says why); the proposal waits", name, d.key, err)
}

// missingRights asks a remote cluster (SelfSubjectAccessReviews) whether its kubeconfig's
// identity may create SubjectAccessReviews (to ask the approver's rights there) and, when sa is
// set, impersonate sa (to make the change as it); it says what to grant when not, "" when it may.
// The daemon's own cluster is not asked: the apiserver's refusal of an apply says it.
func (cl *cluster) missingRights(ctx context.Context, sa crds.ServiceAccountReference) (string, error) {
	if !cl.remote() {
		return "", nil
	}
	needs := []*authorizationv1.ResourceAttributes{{Verb: "create", Group: authorizationv1.GroupName, Resource: "subjectaccessreviews"}}
	if sa != (crds.ServiceAccountReference{}) {
		needs = append(needs, &authorizationv1.ResourceAttributes{Verb: "impersonate", Resource: "serviceaccounts", Namespace: sa.Namespace, Name: sa.Name})
	}
	var missing []string
	for _, need := range needs {
		// Fails closed, though that cluster would refuse the act itself: a missing right makes the
		// proposal wait with its decision, while a refused apply clears an approver's decision.
		// Unanswered, nothing is applied and the error has the proposal tried again.
		v := authz.Ask(ctx, cl.dyn, authz.Question{Resource: need}, authz.FailClosed)
		if v.Err != nil {
			return "", fmt.Errorf("RemoteCluster %s: %w", cl.name, v.Err)
		}
		if !v.Allowed {
			missing = append(missing, grantOf(need))
		}
	}
	if len(missing) == 0 {
		return "", nil
	}
	return fmt.Sprintf("the kubeconfig's identity of RemoteCluster %s lacks, in that cluster, %s: write-back checks approvers there "+
		"with SubjectAccessReviews and applies as the rule's ServiceAccount there by impersonation, so grant it that in RemoteCluster %s "+
		"(a ClusterRole or Role and its binding; docs/write-back.md)", cl.name, strings.Join(missing, " and "), cl.name), nil
}

// approverIn is whom cl is asked about for the approver who, and, for the messages that refuse
// them, how it was asked: themselves in the daemon's own cluster and in a RemoteCluster whose
// spec.sharedIdentities says its users are the hub's. In any other RemoteCluster the hub's names
// mean nothing, or worse, someone else: a hub user named like one of its admins, or in a group
// named like one of its groups, must not get their rights there. So the cluster is asked about
// the hub's user under crds.HubUserPrefix, name and groups (hub:alice in hub:developers), which
// its own users never bear, without the hub's uid and extra; its owner binds those names to let
// hub users approve there.
func (c *Controller) approverIn(ctx context.Context, cl *cluster, who authenticationv1.UserInfo) (authenticationv1.UserInfo, string, error) {
	if !cl.remote() {
		return who, "", nil
	}
	ns, name, _ := strings.Cut(cl.name, "/")
	u, err := getByList(ctx, c.dyn.Resource(crds.RemoteClusters).Namespace(ns), name) // the daemon may list them, not get them
	if err != nil {
		return who, "", fmt.Errorf("read RemoteCluster %s: %w", cl.name, err)
	}
	if u != nil { // gone, it shares nothing
		rc, err := crds.FromUnstructured[crds.RemoteCluster](u)
		if err != nil {
			return who, "", fmt.Errorf("read RemoteCluster %s: %w", cl.name, err)
		}
		if rc.Spec.SharedIdentities {
			return who, "", nil
		}
	}
	asked := authenticationv1.UserInfo{Username: crds.HubUserPrefix + who.Username}
	for _, g := range who.Groups {
		asked.Groups = append(asked.Groups, crds.HubUserPrefix+g)
	}
	as := fmt.Sprintf(" (RemoteCluster %s does not share the hub's identities, so it was asked about %s in the groups %s: "+
		"grant that user the right there, or set spec.sharedIdentities on the RemoteCluster if its users are the hub's)",
		cl.name, asked.Username, strings.Join(asked.Groups, ", "))
	return asked, as, nil
}

// grantOf says a permission as people grant it in RBAC.
func grantOf(a *authorizationv1.ResourceAttributes) string {
	what := a.Verb + " on " + a.Resource
	if a.Group != "" {
		what += "." + a.Group
	}
	if a.Name != "" {
		what += fmt.Sprintf(" (resourceNames: %s)", a.Name)
	}
	if a.Namespace != "" {
		what += " in namespace " + a.Namespace
	}
	return what
}
