package writeback

import (
	"context"
	"fmt"
	"strings"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/configbutler/gitops-reverser/crds"
)

// Why an approval of an RBAC object asks more than one SubjectAccessReview: the apiserver lets a
// person create a Role, or a binding to one, only when they hold every permission it grants, or
// may escalate (a Role) or bind (a binding) it. The change itself goes out as the rule's
// ServiceAccount, which the apiserver checks so; an approver whose own rights are narrower would
// otherwise grant more than they have. So their escalation is checked here the same way, through
// SubjectAccessReviews: the verb escalate or bind first, else each permission of the Role.

// maxEscalationReviews bounds the reviews one approval of an RBAC object asks: a Role with more
// permissions than this needs an approver who may escalate or bind it.
const maxEscalationReviews = 200

// mayEscalate says whether the approver who may already make p's change in the cluster may also
// grant what it grants there (RBAC's escalation rules, for Roles, ClusterRoles and their
// bindings); why is the reason when not. Other kinds, and destroys, grant nothing.
func (cl *cluster) mayEscalate(ctx context.Context, who authenticationv1.UserInfo, p *crds.Proposal) (bool, string, error) {
	gv, _ := schema.ParseGroupVersion(p.Spec.Target.APIVersion)
	if gv.Group != rbacv1.GroupName || p.Spec.Change == crds.ChangeDestroy {
		return true, "", nil
	}
	doc, err := ParseDocument([]byte(p.Spec.Desired))
	if err != nil {
		return false, err.Error(), nil
	}
	ns := p.Spec.Target.Namespace
	switch p.Spec.Target.Kind {
	case "Role", "ClusterRole":
		var role rbacv1.ClusterRole // a Role's fields are a ClusterRole's without aggregationRule
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(doc.Object.Object, &role); err != nil {
			return false, err.Error(), nil
		}
		resource := "roles"
		if p.Spec.Target.Kind == "ClusterRole" {
			resource = "clusterroles"
		}
		return cl.holdsOrMay(ctx, who, "escalate", resource, p.Spec.Target.Name, ns, role.Rules, role.AggregationRule != nil)
	case "RoleBinding", "ClusterRoleBinding":
		var binding rbacv1.RoleBinding
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(doc.Object.Object, &binding); err != nil {
			return false, err.Error(), nil
		}
		return cl.mayBind(ctx, who, binding.RoleRef, ns)
	}
	return true, "", nil
}

// mayBind says whether who may bind the role ref names in namespace ns ("" for a
// ClusterRoleBinding).
func (cl *cluster) mayBind(ctx context.Context, who authenticationv1.UserInfo, ref rbacv1.RoleRef, ns string) (bool, string, error) {
	resource, roleNS := "clusterroles", ""
	if ref.Kind == "Role" {
		resource, roleNS = "roles", ns
	}
	gvr := rbacv1.SchemeGroupVersion.WithResource(resource)
	role, err := cl.get(ctx, gvr, roleNS, ref.Name)
	if err != nil {
		return false, "", err
	}
	var rules rbacv1.ClusterRole // a Role's rules read as a ClusterRole's
	if role != nil {
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(role.Object, &rules); err != nil {
			return false, err.Error(), nil
		}
	}
	// A Role that does not exist grants nothing yet; binding it still needs bind, as the
	// apiserver asks when it cannot read the Role's rules.
	return cl.holdsOrMay(ctx, who, "bind", resource, ref.Name, ns, rules.Rules, role == nil)
}

// holdsOrMay says whether who may verb (escalate or bind) the role name of resource, or, unless
// only that verb will do (needVerb), holds every permission of rules in namespace ns.
func (cl *cluster) holdsOrMay(ctx context.Context, who authenticationv1.UserInfo, verb, resource, name, ns string, rules []rbacv1.PolicyRule, needVerb bool) (bool, string, error) {
	ok, _, err := cl.review(ctx, who, &authorizationv1.ResourceAttributes{Namespace: ns, Verb: verb,
		Group: rbacv1.GroupName, Resource: resource, Name: name}, nil)
	if err != nil || ok {
		return ok, "", err
	}
	refusal := fmt.Sprintf("it grants what %s may not grant: %s may neither %s %s %s nor hold", who.Username, who.Username, verb, resource, name)
	if needVerb {
		return false, fmt.Sprintf("%s may not %s %s %s", who.Username, verb, resource, name), nil
	}
	questions := permissions(rules, ns)
	if len(questions) > maxEscalationReviews {
		return false, fmt.Sprintf("%s may not %s %s %s, and its %d permissions are too many to check one by one", who.Username, verb, resource, name, len(questions)), nil
	}
	for _, q := range questions {
		ok, _, err := cl.review(ctx, who, q.resource, q.nonResource)
		if err != nil {
			return false, "", err
		}
		if !ok {
			return false, fmt.Sprintf("%s every permission in it (not: %s)", refusal, q), nil
		}
	}
	return true, "", nil
}

// permission is one permission a Role grants, as a SubjectAccessReview asks it.
type permission struct {
	resource    *authorizationv1.ResourceAttributes
	nonResource *authorizationv1.NonResourceAttributes
}

func (q permission) String() string {
	if q.nonResource != nil {
		return q.nonResource.Verb + " " + q.nonResource.Path
	}
	r := q.resource
	s := r.Verb + " " + schema.GroupResource{Group: r.Group, Resource: r.Resource}.String()
	if r.Subresource != "" {
		s += "/" + r.Subresource
	}
	if r.Name != "" {
		s += "/" + r.Name
	}
	return s
}

// permissions spells rules out one verb, group, resource and name at a time ("*" stays "*",
// which RBAC's authorizer matches only against a rule that grants "*"), in namespace ns. Bound in a
// namespace, a ClusterRole's non-resource URLs grant nothing, so they are asked only cluster-wide.
func permissions(rules []rbacv1.PolicyRule, ns string) []permission {
	var out []permission
	for _, r := range rules {
		for _, verb := range r.Verbs {
			for _, url := range r.NonResourceURLs {
				if ns == "" {
					out = append(out, permission{nonResource: &authorizationv1.NonResourceAttributes{Path: url, Verb: verb}})
				}
			}
			names := r.ResourceNames
			if len(names) == 0 {
				names = []string{""}
			}
			for _, group := range r.APIGroups {
				for _, res := range r.Resources {
					res, sub, _ := strings.Cut(res, "/")
					for _, name := range names {
						out = append(out, permission{resource: &authorizationv1.ResourceAttributes{
							Namespace: ns, Verb: verb, Group: group, Resource: res, Subresource: sub, Name: name}})
					}
				}
			}
		}
	}
	return out
}
