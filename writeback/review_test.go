package writeback

import (
	"context"
	"strings"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	"k8s.io/client-go/dynamic"

	"github.com/configbutler/gitops-reverser/crds"
	"github.com/configbutler/gitops-reverser/testenv"
)

// TestAnUnansweredApprovalCheckAllowsNothing: the reviews that gate an approval fail closed, in
// the daemon's cluster and in a RemoteCluster. Answered, a cluster admin may patch the object and
// the RemoteCluster's identity may ask; unanswered, nobody may, and the error (which has the
// proposal kept with its decision and tried again) says who and what was asked.
func TestAnUnansweredApprovalCheckAllowsNothing(t *testing.T) {
	outage := testenv.Unanswer(testenv.Reviews)
	dyn, err := dynamic.NewForConfig(outage.Config(cp.AdminConfig()))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	root := authenticationv1.UserInfo{Username: "root", Groups: []string{"system:masters"}}
	p := &crds.Proposal{Spec: crds.ProposalSpec{Change: crds.ChangeUpdate,
		Target: crds.ProposalTarget{APIVersion: "v1", Kind: "ConfigMap", Resource: "configmaps", Namespace: "default", Name: "app"}}}
	for _, cl := range []*cluster{{dyn: dyn}, {name: "hub/far", dyn: dyn}} {
		outage.Set(false)
		if ok, why, err := cl.mayChange(ctx, root, p); !ok || err != nil {
			t.Fatalf("answered%s: allowed %v (%s), %v; want allowed", cl.where(), ok, why, err)
		}
		if missing, err := cl.missingRights(ctx, crds.ServiceAccountReference{}); missing != "" || err != nil {
			t.Fatalf("answered%s: missing %q, %v", cl.where(), missing, err)
		}
		outage.Set(true)
		ok, _, err := cl.mayChange(ctx, root, p)
		if ok || err == nil || !strings.Contains(err.Error(), "root may patch configmaps app in namespace default") {
			t.Errorf("unanswered%s: allowed %v, %v; want refused with an error naming the question", cl.where(), ok, err)
		}
		if missing, err := cl.missingRights(ctx, crds.ServiceAccountReference{}); cl.remote() && err == nil {
			t.Errorf("unanswered%s: what its identity may do is taken as known (missing %q)", cl.where(), missing)
		}
	}
}
