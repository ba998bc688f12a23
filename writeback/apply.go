package writeback

import (
	"context"
	"errors"
	"fmt"
	"strings"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	"github.com/configbutler/gitops-reverser/authz"
	"github.com/configbutler/gitops-reverser/crds"
	"github.com/configbutler/gitops-reverser/gitops"
	"github.com/configbutler/gitops-reverser/kube"
	"github.com/configbutler/gitops-reverser/sanitize"
)

// ErrFenced is why an apply or delete was not made: this replica no longer holds the leader
// Lease, or the Lease of its branch's shard (Config.Fences refused it). The proposal keeps its
// decision; the replica that holds the Lease now applies it.
var ErrFenced = errors.New("apply fenced: this replica does not hold the lease")

// applyAttempts bounds the retries when the object's resourceVersion moves without its content
// changing (a status update between the check and the apply).
const applyAttempts = 3

type outcomeKind int

const (
	outcomeApplied outcomeKind = iota
	outcomeStale               // the live object moved: the proposal no longer says what it would change
	outcomeRefused             // the apiserver refused it (RBAC, validation, admission)
	// outcomeWaits: it cannot be applied yet (no ServiceAccount to apply it as, a RemoteCluster not
	// connected or whose kubeconfig's identity lacks rights there); it waits, and is tried again at
	// every run of its destination.
	outcomeWaits
)

type outcome struct {
	kind            outcomeKind
	reason, message string
	live            *unstructured.Unstructured // for outcomeStale
}

// apply makes the cluster say what the proposal says: server-side apply (field manager
// gitops-reverser, forcing ownership of the fields the file sets) for create and update, delete
// for a destroy, each conditional on the live resourceVersion whose content was checked, each
// only while the fence allows it, and each as the ServiceAccount of the rules that select the
// target (impersonation), in the destination's cluster (its RemoteCluster, through the
// kubeconfig's identity, when it names one). The resulting watch event is credited to credit.
// Only a failure to talk to the apiserver, or a fenced apply (ErrFenced), is an error.
func (c *Controller) apply(ctx context.Context, d *dest, p *crds.Proposal, credit gitops.Credit) (outcome, error) {
	gvr, err := gvrOf(p.Spec.Target)
	if err != nil {
		return outcome{kind: outcomeRefused, reason: reasonApplyFailed, message: err.Error()}, nil
	}
	cl, sa, waits, err := c.writeAs(ctx, d, p)
	switch {
	case err != nil:
		return outcome{}, err
	case waits != nil:
		return *waits, nil
	}
	as, err := cl.writer(sa)
	if err != nil {
		return outcome{}, err
	}
	gk := schema.GroupKind{Group: gvr.Group, Kind: p.Spec.Target.Kind}
	for range applyAttempts {
		live, err := cl.live(ctx, p)
		if err != nil {
			return outcome{}, err
		}
		if why := staleness(p, live); why != "" {
			return outcome{kind: outcomeStale, message: why, live: live}, nil
		}
		if p.Spec.Change == crds.ChangeDestroy {
			err = c.delete(ctx, d, p, as, live, credit, cl.name, gk)
		} else {
			err = c.serverSideApply(ctx, d, p, as, live, credit, cl.name, gk)
		}
		switch {
		case errors.Is(err, ErrFenced):
			return outcome{}, err
		case apierrors.IsConflict(err):
			continue // the resourceVersion moved: check the content again
		}
		return classify(cl, p, sa, err)
	}
	return outcome{kind: outcomeRefused, reason: reasonApplyFailed, message: "the object kept changing while it was applied; approve again"}, nil
}

// writeAs is the cluster p's change is made in and the ServiceAccount it is made as there; waits,
// when set, is why it cannot be made yet: no rule names a ServiceAccount, or the destination's
// RemoteCluster is not connected or its kubeconfig's identity may not act as that ServiceAccount.
func (c *Controller) writeAs(ctx context.Context, d *dest, p *crds.Proposal) (*cluster, crds.ServiceAccountReference, *outcome, error) {
	sa, problem := writerOf(d, c.cfg.Selections(d.key), p.Spec.Target)
	if problem != "" {
		return nil, sa, &outcome{kind: outcomeWaits, reason: ReasonNoServiceAccount, message: problem}, nil
	}
	cl, problem := c.clusterOf(d)
	if problem != "" {
		return nil, sa, &outcome{kind: outcomeWaits, reason: ReasonClusterNotConnected, message: problem}, nil
	}
	missing, err := cl.missingRights(ctx, sa)
	if err != nil {
		return nil, sa, nil, err
	}
	if missing != "" {
		return nil, sa, &outcome{kind: outcomeWaits, reason: ReasonClusterForbidden, message: fmt.Sprintf(
			"%s %s is not applied as ServiceAccount %s: %s", verbOf(p.Spec.Change), targetName(p.Spec.Target), sa, missing)}, nil
	}
	return cl, sa, nil, nil
}

// delete deletes the proposal's target at the live resourceVersion, as the writer as, once the
// fence allows it.
func (c *Controller) delete(ctx context.Context, d *dest, p *crds.Proposal, as dynamic.Interface, live *unstructured.Unstructured, credit gitops.Credit, cluster string, gk schema.GroupKind) error {
	gvr, _ := gvrOf(p.Spec.Target)
	client := as.Resource(gvr).Namespace(p.Spec.Target.Namespace)
	rv := live.GetResourceVersion()
	ctx, done, err := c.fence(ctx, d, p)
	if err != nil {
		return err
	}
	defer done()
	c.cfg.Credits.Expect(cluster, gk, p.Spec.Target.Namespace, p.Spec.Target.Name, nil, credit)
	err = client.Delete(ctx, p.Spec.Target.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{ResourceVersion: &rv}})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// fence asks the Fence of the destination's branch whether this replica may still change the cluster. When it may, the
// context it returns ends when the lease may end, so a request still under way then is cut off;
// done releases it. A refusal is counted, and logged once until an apply is allowed again.
func (c *Controller) fence(ctx context.Context, d *dest, p *crds.Proposal) (_ context.Context, done func(), _ error) {
	if c.cfg.Fences == nil {
		return ctx, func() {}, nil
	}
	until, err := c.cfg.Fences(d.url, d.branch)()
	if err != nil {
		c.cfg.Metrics.AppliesFenced.Inc()
		if !c.fenced.Swap(true) {
			c.cfg.Log.Warn("apply not made: this replica no longer holds the lease of its branch; the proposal is left to the replica that does",
				"proposal", p.Namespace+"/"+p.Name, "err", err)
		}
		return ctx, func() {}, fmt.Errorf("%s %s: %w: %w", verbOf(p.Spec.Change), targetName(p.Spec.Target), ErrFenced, err)
	}
	if c.fenced.Swap(false) {
		c.cfg.Log.Info("applies allowed again: this replica holds the lease")
	}
	ctx, cancel := context.WithDeadline(ctx, until)
	return ctx, cancel, nil
}

// serverSideApply applies the proposal's desired object as the writer as. A dry run first gives
// the exact content the watch will see, so the commit recording it is credited before it can
// happen.
func (c *Controller) serverSideApply(ctx context.Context, d *dest, p *crds.Proposal, as dynamic.Interface, live *unstructured.Unstructured, credit gitops.Credit, cluster string, gk schema.GroupKind) error {
	doc, err := ParseDocument([]byte(p.Spec.Desired))
	if err != nil {
		return apierrors.NewBadRequest(err.Error())
	}
	body := &unstructured.Unstructured{Object: sanitize.Object(doc.Object.Object)}
	if body.GetNamespace() == "" && p.Spec.Target.Namespace != "" {
		// A document of an adopted folder that takes its namespace from a kustomization: applied
		// where the proposal says, which the rules' checks were made for.
		body.SetNamespace(p.Spec.Target.Namespace)
	}
	if live != nil {
		body.SetResourceVersion(live.GetResourceVersion())
	}
	data, err := kube.ApplyBody(body.Object)
	if err != nil {
		return apierrors.NewBadRequest(err.Error())
	}
	gvr, _ := gvrOf(p.Spec.Target)
	client := as.Resource(gvr).Namespace(p.Spec.Target.Namespace)
	force := true
	opts := metav1.PatchOptions{FieldManager: crds.FieldManager, Force: &force, DryRun: []string{metav1.DryRunAll}}
	dry, err := client.Patch(ctx, p.Spec.Target.Name, types.ApplyPatchType, data, opts)
	if err != nil {
		return err
	}
	expected, err := sanitize.JSON(sanitize.Object(dry.Object)) // as the watch keys the credit it asks for
	if err != nil {
		return apierrors.NewBadRequest(err.Error())
	}
	ctx, done, err := c.fence(ctx, d, p)
	if err != nil {
		return err
	}
	defer done()
	c.cfg.Credits.Expect(cluster, gk, p.Spec.Target.Namespace, p.Spec.Target.Name, expected, credit)
	opts.DryRun = nil
	applied, err := client.Patch(ctx, p.Spec.Target.Name, types.ApplyPatchType, data, opts)
	if err != nil {
		return err
	}
	if got, err := sanitize.JSON(sanitize.Object(applied.Object)); err == nil && string(got) != string(expected) {
		c.cfg.Credits.Expect(cluster, gk, p.Spec.Target.Namespace, p.Spec.Target.Name, got, credit)
	}
	return nil
}

// classify turns the answer of cl's apiserver to a request made as the ServiceAccount sa into
// an outcome; errors that are not its verdict on the request (a timeout, a lost connection) stay
// errors, to be retried.
func classify(cl *cluster, p *crds.Proposal, sa crds.ServiceAccountReference, err error) (outcome, error) {
	switch {
	case err == nil:
		return outcome{kind: outcomeApplied}, nil
	case apierrors.IsForbidden(err) && strings.Contains(err.Error(), "cannot impersonate"):
		grant := "grant it impersonate on serviceaccounts: deploy/write-back-rbac.yaml, or the chart's writeBack.enabled=true"
		who := "the daemon"
		if cl.remote() {
			who, grant = "the kubeconfig's identity of RemoteCluster "+cl.name, "grant it impersonate on serviceaccounts in that cluster"
		}
		return outcome{kind: outcomeRefused, reason: reasonForbidden, message: fmt.Sprintf(
			"%s may not act as ServiceAccount %s to %s %s (%s): %v", who, sa, verbOf(p.Spec.Change), targetName(p.Spec.Target), grant, err)}, nil
	case apierrors.IsForbidden(err):
		return outcome{kind: outcomeRefused, reason: reasonForbidden, message: fmt.Sprintf(
			"ServiceAccount %s%s, which write-back acts as for this object, may not %s %s (its Role decides; docs/write-back.md): %v",
			sa, cl.where(), verbOf(p.Spec.Change), targetName(p.Spec.Target), err)}, nil
	case apierrors.IsInvalid(err), apierrors.IsBadRequest(err), apierrors.IsNotFound(err), apierrors.IsMethodNotSupported(err),
		apierrors.IsNotAcceptable(err), apierrors.IsUnsupportedMediaType(err), apierrors.IsRequestEntityTooLargeError(err):
		return outcome{kind: outcomeRefused, reason: reasonApplyFailed, message: err.Error()}, nil
	}
	if status, ok := err.(apierrors.APIStatus); ok && status.Status().Code >= 400 && status.Status().Code < 500 {
		return outcome{kind: outcomeRefused, reason: reasonApplyFailed, message: err.Error()}, nil // e.g. an admission webhook's denial
	}
	return outcome{}, fmt.Errorf("%s %s%s: %w", verbOf(p.Spec.Change), targetName(p.Spec.Target), cl.where(), err)
}

// live reads the proposal's target in the cluster; nil when it does not exist.
func (cl *cluster) live(ctx context.Context, p *crds.Proposal) (*unstructured.Unstructured, error) {
	gvr, err := gvrOf(p.Spec.Target)
	if err != nil {
		return nil, err
	}
	return cl.get(ctx, gvr, p.Spec.Target.Namespace, p.Spec.Target.Name)
}

// mayChange asks the cluster's apiserver whether the approver may make the proposal's change
// themselves, there.
func (cl *cluster) mayChange(ctx context.Context, who authenticationv1.UserInfo, p *crds.Proposal) (bool, string, error) {
	gvr, err := gvrOf(p.Spec.Target)
	if err != nil {
		return false, err.Error(), nil
	}
	return cl.review(ctx, who, &authorizationv1.ResourceAttributes{
		Namespace: p.Spec.Target.Namespace, Verb: verbOf(p.Spec.Change),
		Group: gvr.Group, Version: gvr.Version, Resource: gvr.Resource, Name: p.Spec.Target.Name,
	}, nil)
}

// review asks the cluster's apiserver (a SubjectAccessReview) whether who may do what resource,
// or else nonResource, says; why is its reason. In a RemoteCluster, who is the hub's user as
// approverIn names them there. It fails closed: an approval must not grant more than the approver
// has, so an unanswered review allows nothing, and its error is returned: the proposal keeps its
// decision and is tried again.
func (cl *cluster) review(ctx context.Context, who authenticationv1.UserInfo, resource *authorizationv1.ResourceAttributes,
	nonResource *authorizationv1.NonResourceAttributes) (allowed bool, why string, err error) {
	v := authz.Ask(ctx, cl.dyn, authz.Question{User: &who, Resource: resource, NonResource: nonResource}, authz.FailClosed)
	if v.Err != nil {
		return v.Allowed, "", fmt.Errorf("check an approval%s: %w", cl.where(), v.Err)
	}
	return v.Allowed, v.Reason, nil
}

// verbOf is the RBAC verb a change needs.
func verbOf(change crds.ProposalChange) string {
	switch change {
	case crds.ChangeCreate:
		return "create"
	case crds.ChangeDestroy:
		return "delete"
	}
	return "patch"
}

func gvrOf(t crds.ProposalTarget) (schema.GroupVersionResource, error) {
	gv, err := schema.ParseGroupVersion(t.APIVersion)
	if err != nil {
		return schema.GroupVersionResource{}, fmt.Errorf("target apiVersion %q: %w", t.APIVersion, err)
	}
	return gv.WithResource(t.Resource), nil
}
