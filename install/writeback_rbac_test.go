package install

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/configbutler/gitops-reverser/crds"
	"github.com/configbutler/gitops-reverser/testenv"
)

// writeBackRules are all the daemon holds for write-back, as deploy/write-back-rbac.yaml and the
// chart's writeBack.enabled grant it: acting as ServiceAccounts. Every write goes out as the
// rule's ServiceAccount, so the daemon holds no write right on any resource of its own.
var writeBackRules = []rbacv1.PolicyRule{
	{APIGroups: []string{""}, Resources: []string{"serviceaccounts"}, Verbs: []string{"impersonate"}},
}

// reviewerRules are what a reviewer of Proposals needs: read them and the SyncRuns, and set a
// decision; never their status, never create or delete them; and read the GitDestinations, for
// the CLI's status.
var reviewerRules = []rbacv1.PolicyRule{
	{APIGroups: []string{crds.Group}, Resources: []string{"proposals"}, Verbs: []string{"get", "list", "watch", "update", "patch"}},
	{APIGroups: []string{crds.Group}, Resources: []string{"syncruns"}, Verbs: []string{"get", "list", "watch"}},
	{APIGroups: []string{crds.Group}, Resources: []string{"gitdestinations"}, Verbs: []string{"get", "list", "watch"}},
}

// operatorRules are what the CLI's sync and status need of the GitDestinations.
var operatorRules = []rbacv1.PolicyRule{
	{APIGroups: []string{crds.Group}, Resources: []string{"gitdestinations"}, Verbs: []string{"get", "list", "watch", "patch"}},
}

// TestWriteBackManifestGrantsOnlyImpersonation: deploy/write-back-rbac.yaml, applied by hand next
// to deploy/, binds to the shipped ServiceAccount only the right to impersonate ServiceAccounts,
// no write right on any resource, and the apiserver accepts it.
func TestWriteBackManifestGrantsOnlyImpersonation(t *testing.T) {
	objs := readObjects(t, "write-back-rbac.yaml")
	var role rbacv1.ClusterRole
	var binding rbacv1.ClusterRoleBinding
	object(t, objs, "ClusterRole", "gitops-reverser-write-back", &role)
	object(t, objs, "ClusterRoleBinding", "gitops-reverser-write-back", &binding)
	if len(objs) != 2 {
		t.Errorf("deploy/write-back-rbac.yaml holds %d objects, want the ClusterRole and its binding", len(objs))
	}
	if diff := cmp.Diff(writeBackRules, role.Rules); diff != "" {
		t.Errorf("write-back rules (-want +got):\n%s", diff)
	}
	s := readShipped(t)
	want := rbacv1.Subject{Kind: "ServiceAccount", Name: s.serviceAccount.Name, Namespace: s.serviceAccount.Namespace}
	if !slices.Equal(binding.Subjects, []rbacv1.Subject{want}) || binding.RoleRef.Kind != "ClusterRole" || binding.RoleRef.Name != role.Name {
		t.Errorf("binding %+v to %+v, want the ClusterRole %s bound to %+v only", binding.RoleRef, binding.Subjects, role.Name, want)
	}
	if slices.Contains(readKustomization(t).Resources, "write-back-rbac.yaml") {
		t.Error("deploy/kustomization.yaml lists write-back-rbac.yaml: write-back must be installed deliberately")
	}

	stdout, stderr := kubectl(t, adminKubeconfig(t), nil, "apply", "--dry-run=server", "-f", deployPath("write-back-rbac.yaml"))
	checkDryRun(t, objs, stdout, stderr)
}

// TestChartWriteBackRoleOnlyWhenEnabled: the chart lets the daemon impersonate ServiceAccounts only
// with writeBack.enabled, exactly as deploy/write-back-rbac.yaml does, bound to its own
// ServiceAccount.
func TestChartWriteBackRoleOnlyWhenEnabled(t *testing.T) {
	for _, o := range renderChart(t).objs {
		if strings.HasSuffix(o.GetName(), "-write-back") {
			t.Errorf("the default values render %s %s", o.GetKind(), o.GetName())
		}
	}
	r := renderChart(t, "--set", "writeBack.enabled=true")
	var role rbacv1.ClusterRole
	var binding rbacv1.ClusterRoleBinding
	object(t, r.objs, "ClusterRole", chartRelease+"-write-back", &role)
	object(t, r.objs, "ClusterRoleBinding", chartRelease+"-write-back", &binding)
	want := []rbacv1.Subject{{Kind: "ServiceAccount", Name: r.deployment.Spec.Template.Spec.ServiceAccountName, Namespace: systemNamespace}}
	if !slices.Equal(binding.Subjects, want) || binding.RoleRef.Name != role.Name {
		t.Errorf("binding %+v to %+v, want %s bound to the daemon's ServiceAccount %+v", binding.RoleRef, binding.Subjects, role.Name, want)
	}
	if diff := cmp.Diff(writeBackRules, role.Rules); diff != "" {
		t.Errorf("the chart's write-back rules differ from deploy/write-back-rbac.yaml (-deploy +chart):\n%s", diff)
	}
	if _, err := runHelmTemplate(t, systemNamespace, "--set-json", `writeBack.resources=[{"apiGroups":[""],"resources":["configmaps"]}]`); err == nil {
		t.Error("the chart renders with writeBack.resources, which grants nothing any more: its schema must refuse it")
	}
}

// TestChartReviewerRoleMatchesDeploy: the reviewer and destination operator ClusterRoles are
// always rendered, equal to deploy/rbac.yaml's, and granted only explicitly (no aggregation into
// admin/edit/view).
func TestChartReviewerRoleMatchesDeploy(t *testing.T) {
	for suffix, rules := range map[string][]rbacv1.PolicyRule{"proposal-reviewer": reviewerRules, "destination-operator": operatorRules} {
		checkPeopleRole(t, suffix, rules)
	}
}

// checkPeopleRole checks the ClusterRole gitops-reverser-suffix of deploy/ and the chart.
func checkPeopleRole(t *testing.T, suffix string, rules []rbacv1.PolicyRule) {
	var deployRole, chartRole rbacv1.ClusterRole
	object(t, readObjects(t, "rbac.yaml"), "ClusterRole", "gitops-reverser-"+suffix, &deployRole)
	object(t, renderChart(t).objs, "ClusterRole", chartRelease+"-"+suffix, &chartRole)
	for name, role := range map[string]rbacv1.ClusterRole{"deploy/rbac.yaml": deployRole, "the chart": chartRole} {
		if diff := cmp.Diff(rules, role.Rules); diff != "" {
			t.Errorf("%s: %s rules (-want +got):\n%s", name, suffix, diff)
		}
		if role.AggregationRule != nil {
			t.Errorf("%s: the reviewer role aggregates %+v", name, role.AggregationRule)
		}
		for k := range role.Labels {
			if strings.HasPrefix(k, "rbac.authorization.k8s.io/aggregate-to-") {
				t.Errorf("%s: the reviewer role carries %s: reviewers must be granted explicitly", name, k)
			}
		}
	}
}

// permitCase is one request a user bound to a shipped role makes, and whether it is allowed.
type permitCase struct {
	name    string
	attr    authorizationv1.ResourceAttributes
	allowed bool
}

// bindAndAsk binds the shipped ClusterRole role to user in the daemon's namespace (deploy/'s
// manifests applied), then asks the apiserver each case as that user; the first case must be
// allowed, as it tells the binding reached the authorizer.
func bindAndAsk(t *testing.T, user, role string, cases []permitCase) {
	ctx := context.Background()
	admin := adminKubeconfig(t)
	kube := kubernetes.NewForConfigOrDie(cp.AdminConfig())
	kubectl(t, admin, nil, "apply", "-f", deployPath("namespace.yaml"), "-f", deployPath("rbac.yaml"))
	ensureNamespace(t, kube, workloadNamespace)
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: user + "-" + role, Namespace: systemNamespace},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
		Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: "User", Name: user}}}
	if _, err := kube.RbacV1().RoleBindings(systemNamespace).Create(ctx, binding, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = kube.RbacV1().RoleBindings(systemNamespace).Delete(ctx, binding.Name, metav1.DeleteOptions{})
	})
	may := func(a authorizationv1.ResourceAttributes) bool {
		review := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User: user, Groups: []string{"system:authenticated"}, ResourceAttributes: &a}}
		got, err := kube.AuthorizationV1().SubjectAccessReviews().Create(ctx, review, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return got.Status.Allowed
	}
	testenv.Eventually(t, time.Minute, user+"'s RoleBinding reaches the authorizer", func() (bool, string) {
		return may(cases[0].attr), ""
	})
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := may(tc.attr); got != tc.allowed {
				t.Errorf("allowed = %t, want %t for %s", got, tc.allowed, fmt.Sprintf("%+v", tc.attr))
			}
		})
	}
}

// TestReviewerRoleMayDecideButNotForgeStatus binds the shipped reviewer role to bob in one
// namespace and asks the apiserver what bob may do: decide Proposals there, read SyncRuns and the
// GitDestinations (the CLI's status), but not mark a Proposal applied, open or delete one, open
// or touch a SyncRun, change a GitDestination, or act elsewhere.
func TestReviewerRoleMayDecideButNotForgeStatus(t *testing.T) {
	type attr = authorizationv1.ResourceAttributes
	bindAndAsk(t, "bob", "gitops-reverser-proposal-reviewer", []permitCase{
		{"decides a Proposal", attr{Verb: "patch", Group: crds.Group, Resource: "proposals", Namespace: systemNamespace}, true},
		{"updates a Proposal", attr{Verb: "update", Group: crds.Group, Resource: "proposals", Namespace: systemNamespace}, true},
		{"lists Proposals", attr{Verb: "list", Group: crds.Group, Resource: "proposals", Namespace: systemNamespace}, true},
		{"watches SyncRuns", attr{Verb: "watch", Group: crds.Group, Resource: "syncruns", Namespace: systemNamespace}, true},
		{"cannot mark a Proposal applied", attr{Verb: "patch", Group: crds.Group, Resource: "proposals", Subresource: "status", Namespace: systemNamespace}, false},
		{"cannot update a Proposal's status", attr{Verb: "update", Group: crds.Group, Resource: "proposals", Subresource: "status", Namespace: systemNamespace}, false},
		{"cannot open a Proposal", attr{Verb: "create", Group: crds.Group, Resource: "proposals", Namespace: systemNamespace}, false},
		{"cannot delete a Proposal", attr{Verb: "delete", Group: crds.Group, Resource: "proposals", Namespace: systemNamespace}, false},
		{"cannot open a SyncRun", attr{Verb: "create", Group: crds.Group, Resource: "syncruns", Namespace: systemNamespace}, false},
		{"cannot rewrite a SyncRun", attr{Verb: "update", Group: crds.Group, Resource: "syncruns", Namespace: systemNamespace}, false},
		{"cannot delete a SyncRun", attr{Verb: "delete", Group: crds.Group, Resource: "syncruns", Namespace: systemNamespace}, false},
		{"cannot decide elsewhere", attr{Verb: "patch", Group: crds.Group, Resource: "proposals", Namespace: workloadNamespace}, false},
		{"reads the GitDestinations (status)", attr{Verb: "list", Group: crds.Group, Resource: "gitdestinations", Namespace: systemNamespace}, true},
		{"gets a GitDestination (status NAME)", attr{Verb: "get", Group: crds.Group, Resource: "gitdestinations", Namespace: systemNamespace}, true},
		{"cannot change a GitDestination", attr{Verb: "patch", Group: crds.Group, Resource: "gitdestinations", Namespace: systemNamespace}, false},
	})
}

// TestDestinationOperatorRoleMaySyncButNotMore binds the shipped destination operator role to
// carol: she may ask a GitDestination for a sync (patch) and read it (the CLI's sync and status),
// but not its status, not create or delete one, not decide Proposals, not act elsewhere.
func TestDestinationOperatorRoleMaySyncButNotMore(t *testing.T) {
	type attr = authorizationv1.ResourceAttributes
	bindAndAsk(t, "carol", "gitops-reverser-destination-operator", []permitCase{
		{"syncs a GitDestination", attr{Verb: "patch", Group: crds.Group, Resource: "gitdestinations", Namespace: systemNamespace}, true},
		{"lists the GitDestinations", attr{Verb: "list", Group: crds.Group, Resource: "gitdestinations", Namespace: systemNamespace}, true},
		{"gets a GitDestination", attr{Verb: "get", Group: crds.Group, Resource: "gitdestinations", Namespace: systemNamespace}, true},
		{"cannot write a GitDestination's status", attr{Verb: "patch", Group: crds.Group, Resource: "gitdestinations", Subresource: "status", Namespace: systemNamespace}, false},
		{"cannot create a GitDestination", attr{Verb: "create", Group: crds.Group, Resource: "gitdestinations", Namespace: systemNamespace}, false},
		{"cannot delete a GitDestination", attr{Verb: "delete", Group: crds.Group, Resource: "gitdestinations", Namespace: systemNamespace}, false},
		{"cannot decide a Proposal", attr{Verb: "patch", Group: crds.Group, Resource: "proposals", Namespace: systemNamespace}, false},
		{"cannot sync elsewhere", attr{Verb: "patch", Group: crds.Group, Resource: "gitdestinations", Namespace: workloadNamespace}, false},
	})
}
