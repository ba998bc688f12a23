package webhook

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/prometheus/client_golang/prometheus/testutil"
	authenticationv1 "k8s.io/api/authentication/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	rbacv1client "k8s.io/client-go/kubernetes/typed/rbac/v1"
	"k8s.io/client-go/rest"

	"github.com/configbutler/gitops-reverser/metrics"
	"github.com/configbutler/gitops-reverser/testenv"
)

// installProposalCRD installs a minimal, permissive Proposal CRD (whatever spec holds is kept)
// and waits until it is established; it is removed when t ends. The real CRD is another
// package's; this one only has to carry spec.decision.
func installProposalCRD(t *testing.T) {
	t.Helper()
	ext, err := apiextensionsclient.NewForConfig(cp.AdminConfig())
	if err != nil {
		t.Fatal(err)
	}
	preserve := true
	crd := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: ProposalsResource.Resource + "." + ProposalsResource.Group},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: ProposalsResource.Group, Scope: apiextensionsv1.NamespaceScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "proposals", Singular: "proposal", Kind: "Proposal", ListKind: "ProposalList"},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{Name: ProposalsResource.Version, Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type: "object",
					Properties: map[string]apiextensionsv1.JSONSchemaProps{
						"spec": {Type: "object", XPreserveUnknownFields: &preserve},
					},
				}}}},
		},
	}
	ctx := context.Background()
	crds := ext.ApiextensionsV1().CustomResourceDefinitions()
	if _, err := crds.Create(ctx, crd, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create the proposal CRD: %v", err)
	}
	t.Cleanup(func() { _ = crds.Delete(context.Background(), crd.Name, metav1.DeleteOptions{}) })
	testenv.Eventually(t, time.Minute, "the proposal CRD established", func() (bool, string) {
		got, err := crds.Get(ctx, crd.Name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		for _, c := range got.Status.Conditions {
			if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
				return true, ""
			}
		}
		return false, "not established"
	})
}

// allowProposalPatches lets user get and patch proposals in namespace ns.
func allowProposalPatches(t *testing.T, ns, user string) {
	t.Helper()
	ctx := context.Background()
	rbac, err := rbacv1client.NewForConfig(cp.AdminConfig())
	if err != nil {
		t.Fatal(err)
	}
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "proposal-deciders"}, Rules: []rbacv1.PolicyRule{{
		APIGroups: []string{ProposalsResource.Group}, Resources: []string{ProposalsResource.Resource},
		Verbs: []string{"get", "patch"}}}}
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "proposal-deciders"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}}}
	if _, err := rbac.Roles(ns).Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create role: %v", err)
	}
	if _, err := rbac.RoleBindings(ns).Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create role binding: %v", err)
	}
}

// proposalsAs is the proposals of namespace ns through cfg's identity.
func proposalsAs(t *testing.T, cfg *rest.Config, ns string) dynamic.ResourceInterface {
	t.Helper()
	c, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c.Resource(ProposalsResource).Namespace(ns)
}

func newProposal(generateName, decision string) *unstructured.Unstructured {
	spec := map[string]any{"path": "team-a/configmaps/app.yaml"}
	if decision != "" {
		spec["decision"] = decision
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": ProposalsResource.GroupVersion().String(), "kind": "Proposal",
		"metadata": map[string]any{"generateName": generateName}, "spec": spec}}
}

// TestAPIServerReportsWhoDecidedAProposal: the apiserver calls the webhook for proposals, and the
// user it authenticated, impersonated or not, is who Who names; a change of other fields, or a dry
// run, leaves the setter of the decision alone.
func TestAPIServerReportsWhoDecidedAProposal(t *testing.T) {
	installProposalCRD(t)
	s, m, _ := newTestStore(t, StoreConfig{})
	d := NewDecisions(0, 0, nil)
	h := NewAdmissionHandler(s, &Watched{}, m, whLogger(), WithDecisions(d))
	_, ns := startWebhook(t, "webhook-proposal-decisions", h, func(string) []Resource { return WithProposals(nil) })
	allowProposalPatches(t, ns, "alice")
	ctx := context.Background()
	admin := proposalsAs(t, cp.AdminConfig(), ns)
	alice := proposalsAs(t, cp.ImpersonatingConfig("alice", "developers"), ns)

	// The apiserver picks up a new registration, and serves a new CRD, after a moment.
	testenv.Eventually(t, time.Minute, "the apiserver sends proposal reviews to the webhook", func() (bool, string) {
		probe, err := admin.Create(ctx, newProposal("probe-", "Ignore"), metav1.CreateOptions{})
		if err != nil {
			return false, err.Error()
		}
		got, ok := d.Who(probe.GetUID(), "Ignore")
		if ok && got.User.Username != testenv.AdminUser {
			t.Fatalf("probe decided by %q; want %q", got.User.Username, testenv.AdminUser)
		}
		return ok, "probe " + probe.GetName() + " not recorded"
	})

	created, err := admin.Create(ctx, newProposal("change-", ""), metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create proposal: %v", err)
	}
	uid := created.GetUID()
	patch := func(c dynamic.ResourceInterface, body string, dryRun bool) {
		t.Helper()
		opts := metav1.PatchOptions{}
		if dryRun {
			opts.DryRun = []string{metav1.DryRunAll}
		}
		if _, err := c.Patch(ctx, created.GetName(), types.MergePatchType, []byte(body), opts); err != nil {
			t.Fatalf("patch %s: %v", body, err)
		}
	}
	wantAlice := func(when string) {
		t.Helper()
		got, ok := d.Who(uid, "Approve")
		if !ok {
			t.Fatalf("%s: no one recorded as approving", when)
		}
		// Impersonated as she is, the apiserver authenticated alice with her groups, and no uid or extra.
		want := authenticationv1.UserInfo{Username: "alice", Groups: []string{"developers", "system:authenticated"}}
		if diff := cmp.Diff(want, got.User, cmpopts.EquateEmpty()); diff != "" || got.At.IsZero() {
			t.Fatalf("%s: Who = %+v (-want +got):\n%s", when, got, diff)
		}
	}
	reviews := func(result string) float64 { return testutil.ToFloat64(m.Reviews.WithLabelValues(result)) }

	patch(alice, `{"spec":{"decision":"Approve"}}`, false)
	wantAlice("after alice approved")

	ignored := reviews(metrics.ReviewIgnored)
	patch(admin, `{"metadata":{"labels":{"reviewed":"yes"}}}`, false)
	wantAlice("after the admin changed a label")
	if reviews(metrics.ReviewIgnored) == ignored {
		t.Fatal("the label patch never reached the webhook")
	}

	dryRuns := reviews(metrics.ReviewDryRun)
	patch(admin, `{"spec":{"decision":"Reject"}}`, true)
	wantAlice("after the admin's dry run")
	if reviews(metrics.ReviewDryRun) == dryRuns {
		t.Fatal("the dry-run patch never reached the webhook")
	}
	if got, ok := d.Who(uid, "Reject"); ok {
		t.Errorf("dry run recorded: %+v", got)
	}
	if errs := reviews(metrics.ReviewError); errs != 0 {
		t.Errorf("admission_reviews_total{result=error} = %v; want 0", errs)
	}
}
