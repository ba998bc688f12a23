package watch

import (
	"context"
	"fmt"
	"strings"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"

	"github.com/configbutler/gitops-reverser/crds"
	"github.com/configbutler/gitops-reverser/kube"
)

// ReasonServiceAccountNotAllowed is the Ready reason of a WatchRule whose ServiceAccount may not
// read what it selects.
const ReasonServiceAccountNotAllowed = "ServiceAccountNotAllowed"

// ReasonServiceAccountConsentMissing is the Ready reason of a WatchRule naming a ServiceAccount
// whose annotation crds.AnnotationWatchRules does not list it.
const ReasonServiceAccountConsentMissing = "ServiceAccountConsentMissing"

// accessRecheck is how long an answer of the apiserver about a ServiceAccount's rights is used
// before it is asked again: a Role granted or taken away counts within it.
const accessRecheck = 30 * time.Second

// access remembers what the ServiceAccounts that WatchRules act as may read, as
// SubjectAccessReviews answered it. The watches stay shared: the daemon reads with its own rights
// and mirrors only what the ServiceAccount may list and watch. Touched only from Run.
type access struct {
	dyn     dynamic.Interface
	now     func() time.Time
	answers map[accessQuestion]accessAnswer
	// consents are the ServiceAccounts' annotations AnnotationWatchRules, as last read.
	consents map[crds.ServiceAccountReference]consentAnswer
}

// consentAnswer is a ServiceAccount's annotation crds.AnnotationWatchRules, as read at at;
// missing when the ServiceAccount does not exist.
type consentAnswer struct {
	annotations map[string]string
	missing     bool
	at          time.Time
}

// accessQuestion is whether user may verb resource (of group) in namespace.
type accessQuestion struct {
	user, verb, group, resource, namespace string
}

type accessAnswer struct {
	allowed bool
	at      time.Time
}

func newAccess(dyn dynamic.Interface) *access {
	return &access{dyn: dyn, now: time.Now, answers: map[accessQuestion]accessAnswer{},
		consents: map[crds.ServiceAccountReference]consentAnswer{}}
}

// used reports whether any rule acts as a ServiceAccount, so its rights (and consent) are worth
// asking again.
func (a *access) used() bool { return len(a.answers) > 0 || len(a.consents) > 0 }

// serviceAccountOf is the ServiceAccount a WatchRule acts as: its own, else the daemon's default;
// "" acts with the daemon's rights.
func (m *Manager) serviceAccountOf(r *crds.WatchRule) string {
	if r.Spec.ServiceAccountName != "" {
		return r.Spec.ServiceAccountName
	}
	return m.opts.DefaultServiceAccount
}

// consentMissing says, as a condition message, why the ServiceAccount sa does not let the
// WatchRule rule of its namespace act as it; "" when its annotation crds.AnnotationWatchRules
// lists the rule. The annotation is read again once accessRecheck passed, so consent given or
// taken back counts within it; an answer the apiserver cannot give now is the last one it gave,
// or a refusal when there is none.
func (a *access) consentMissing(ctx context.Context, sa crds.ServiceAccountReference, rule string) string {
	last, known := a.consents[sa]
	if !known || a.now().Sub(last.at) >= accessRecheck {
		obj, err := kube.For(a.dyn, kube.ServiceAccounts, sa.Namespace).Get(ctx, sa.Name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			last = consentAnswer{missing: true, at: a.now()}
		case err != nil && !known:
			return fmt.Sprintf("could not read ServiceAccount %s to see whether it lets WatchRule %s act as it: %v", sa, rule, err)
		case err == nil:
			last = consentAnswer{annotations: obj.Annotations, at: a.now()}
		}
		a.consents[sa] = last
	}
	switch {
	case last.missing:
		return fmt.Sprintf("ServiceAccount %s named in spec.serviceAccountName does not exist", sa)
	case crds.Consents(last.annotations, rule):
		return ""
	}
	return fmt.Sprintf("ServiceAccount %s has not agreed to act for WatchRule %s: someone who may edit ServiceAccounts in namespace %s "+
		"adds %s to its annotation %s (comma-separated WatchRule names, or *), e.g. kubectl annotate serviceaccount -n %s %s %s=%s",
		sa, rule, sa.Namespace, rule, crds.AnnotationWatchRules, sa.Namespace, sa.Name, crds.AnnotationWatchRules, rule)
}

// unreadable says which of sels the ServiceAccount sa of namespace ns may not list and watch, as
// a condition message; "" when it may read them all. An answer the apiserver cannot give now is
// the last one it gave, or a refusal when there is none.
func (a *access) unreadable(ctx context.Context, ns, sa string, sels []Selection) string {
	user := "system:serviceaccount:" + ns + ":" + sa
	var denied []string
	var failure error
	for _, sel := range sels {
		for _, verb := range []string{"list", "watch"} {
			q := accessQuestion{user: user, verb: verb, group: sel.GVR.Group, resource: sel.GVR.Resource, namespace: sel.Namespace}
			ok, err := a.may(ctx, q, ns)
			if err != nil {
				failure = err
			}
			if !ok {
				denied = append(denied, verb+" "+sel.GVR.GroupResource().String())
			}
		}
	}
	if len(denied) == 0 {
		return ""
	}
	msg := fmt.Sprintf("ServiceAccount %s/%s (%s) may not %s in namespace %s: grant it list and watch there (a Role and RoleBinding), "+
		"or name another ServiceAccount in spec.serviceAccountName", ns, sa, user, strings.Join(denied, ", "), ns)
	if failure != nil {
		msg += fmt.Sprintf(" (asking the apiserver failed: %v)", failure)
	}
	return msg
}

// may answers q from memory while it is fresh, else asks the apiserver.
func (a *access) may(ctx context.Context, q accessQuestion, ns string) (bool, error) {
	last, known := a.answers[q]
	if known && a.now().Sub(last.at) < accessRecheck {
		return last.allowed, nil
	}
	review := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User:   q.user,
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"},
		ResourceAttributes: &authorizationv1.ResourceAttributes{
			Namespace: q.namespace, Verb: q.verb, Group: q.group, Resource: q.resource,
		},
	}}
	res, err := kube.For(a.dyn, kube.SubjectAccessReviews, "").Create(ctx, review, metav1.CreateOptions{})
	if err != nil {
		return known && last.allowed, fmt.Errorf("check whether %s may %s %s: %w", q.user, q.verb, q.resource, err)
	}
	allowed := res.Status.Allowed && !res.Status.Denied
	a.answers[q] = accessAnswer{allowed: allowed, at: a.now()}
	return allowed, nil
}

// forget drops the answers no rule asked for since before the last recheck, so a rule removed
// costs nothing.
func (a *access) forget() {
	for q, ans := range a.answers {
		if a.now().Sub(ans.at) >= 2*accessRecheck {
			delete(a.answers, q)
		}
	}
	for sa, ans := range a.consents {
		if a.now().Sub(ans.at) >= 2*accessRecheck {
			delete(a.consents, sa)
		}
	}
}
