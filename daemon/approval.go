package daemon

import (
	"context"
	"fmt"
	"sync"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/configbutler/gitops-reverser/crds"
	"github.com/configbutler/gitops-reverser/kube"
	"github.com/configbutler/gitops-reverser/writeback"
)

// whoAmITimeout bounds the one request that asks the apiserver who the daemon is.
const whoAmITimeout = 15 * time.Second

// whoAmI is the daemon's own user as the apiserver authenticates it (a SelfSubjectReview, which
// every authenticated user may create): the only one its policies let create Proposals, and never
// an approver.
func whoAmI(ctx context.Context, dyn dynamic.Interface) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, whoAmITimeout)
	defer cancel()
	review, err := kube.For(dyn, kube.SelfSubjectReviews, "").Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("ask the apiserver who the daemon is (SelfSubjectReview): %w", err)
	}
	name := review.Status.UserInfo.Username
	if name == "" {
		return "", fmt.Errorf("the SelfSubjectReview names no user")
	}
	return name, nil
}

// daemonUser is the daemon's own user, asked of the apiserver (whoAmI) until it answers, then
// remembered: the policies' installer and write-back share one answer.
type daemonUser struct {
	dyn  dynamic.Interface
	mu   sync.Mutex
	name string
}

func (u *daemonUser) get(ctx context.Context) (string, error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.name != "" {
		return u.name, nil
	}
	name, err := whoAmI(ctx, u.dyn)
	if err == nil {
		u.name = name
	}
	return name, err
}

// approval is how write-back learns who approved: the policies mode installs, of the kinds the
// apiserver serves, watched and put back; nil for --approver-policy=none.
func approval(ctx context.Context, s shared, mode crds.ApproverPolicy) *writeback.Approval {
	if mode == crds.ApproverPolicyNone {
		return nil
	}
	kinds := crds.PolicyResources[:2]
	if mode == crds.ApproverPolicyMutating && served(ctx, s.dyn, crds.MutatingAdmissionPolicies) {
		kinds = crds.PolicyResources
	}
	return &writeback.Approval{
		Namespace: s.namespace, Resources: kinds,
		Reinstall: func(ctx context.Context) error {
			daemon, err := s.self.get(ctx)
			if err != nil {
				return err
			}
			if _, _, err := crds.InstallApproverPolicies(ctx, s.dyn, mode, crds.ApproverParams{Namespace: s.namespace, Daemon: daemon}); err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(ctx, policyInstallTimeout)
			defer cancel()
			return crds.WaitApproverPolicies(ctx, s.dyn, mode, s.namespace)
		},
	}
}

// served reports whether the daemon can list gvr: false when the apiserver does not serve it
// (before 1.36 for the mutating policies), and also when it cannot tell, so that write-back never
// waits for a cache that cannot fill.
func served(ctx context.Context, dyn dynamic.Interface, gvr schema.GroupVersionResource) bool {
	ctx, cancel := context.WithTimeout(ctx, whoAmITimeout)
	defer cancel()
	_, err := dyn.Resource(gvr).List(ctx, metav1.ListOptions{Limit: 1})
	return err == nil
}

// sealKey reads (or creates) the key of the seals of the daemon's Proposals, in the Secret
// <webhook-service-name>-proposal-seal of its namespace: every replica uses the same.
func sealKey(s shared, name string) func(ctx context.Context) ([]byte, error) {
	secrets := kube.For(s.dyn, kube.Secrets, s.namespace)
	return func(ctx context.Context) ([]byte, error) {
		ctx, cancel := context.WithTimeout(ctx, digestKeyTimeout)
		defer cancel()
		key, err := digestKey(ctx, secrets, name)
		if err != nil {
			return nil, fmt.Errorf("the Secret %s of the daemon's namespace: %w; grant the daemon get and create on Secrets there", name, err)
		}
		return key, nil
	}
}
