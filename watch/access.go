package watch

import (
	"context"
	"fmt"
	"strings"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"

	"github.com/configbutler/gitops-reverser/authz"
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
	reviews *authz.Cache
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

// maxAccessAnswers bounds the answers kept: a rule asks two per resource it selects.
const maxAccessAnswers = 10000

func newAccess(dyn dynamic.Interface) *access {
	a := &access{dyn: dyn, now: time.Now, consents: map[crds.ServiceAccountReference]consentAnswer{}}
	a.reviews = authz.NewCache(dyn, authz.Keep{Allowed: accessRecheck, Refused: accessRecheck, Max: maxAccessAnswers,
		Now: func() time.Time { return a.now() }})
	return a
}

// used reports whether any rule acts as a ServiceAccount, so its rights (and consent) are worth
// asking again.
func (a *access) used() bool { return a.reviews.Len() > 0 || len(a.consents) > 0 }

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
// a condition message; "" when it may read them all. It fails closed: the ServiceAccount's rights
// bound what the daemon reads for the rule into Git, so a question the apiserver does not answer
// now is a refusal, never its last answer, and the rule mirrors nothing new until it answers (its
// files stay; the next recheck asks again).
func (a *access) unreadable(ctx context.Context, ns, sa string, sels []Selection) string {
	user := authenticationv1.UserInfo{Username: "system:serviceaccount:" + ns + ":" + sa,
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"}}
	var denied, unanswered []string
	var failure error
	for _, sel := range sels {
		for _, verb := range []string{"list", "watch"} {
			v := a.reviews.Ask(ctx, authz.Question{User: &user, Resource: &authorizationv1.ResourceAttributes{
				Namespace: sel.Namespace, Verb: verb, Group: sel.GVR.Group, Resource: sel.GVR.Resource,
			}}, authz.FailClosed)
			switch {
			case v.Err != nil:
				failure = v.Err
				unanswered = append(unanswered, verb+" "+sel.GVR.GroupResource().String())
			case !v.Allowed:
				denied = append(denied, verb+" "+sel.GVR.GroupResource().String())
			}
		}
	}
	var msg string
	if len(denied) > 0 {
		msg = fmt.Sprintf("ServiceAccount %s/%s (%s) may not %s in namespace %s: grant it list and watch there (a Role and RoleBinding), "+
			"or name another ServiceAccount in spec.serviceAccountName", ns, sa, user.Username, strings.Join(denied, ", "), ns)
	}
	if len(unanswered) > 0 {
		if msg != "" {
			msg += "; "
		}
		msg += fmt.Sprintf("the apiserver did not answer whether ServiceAccount %s/%s may %s (%v), so nothing new is mirrored for them "+
			"until it does (asked again within %s)", ns, sa, strings.Join(unanswered, ", "), failure, accessRecheck)
	}
	return msg
}

// forget drops the answers due to be asked again and the consents no rule read since two
// rechecks, so a rule removed costs nothing.
func (a *access) forget() {
	a.reviews.Prune()
	for sa, ans := range a.consents {
		if a.now().Sub(ans.at) >= 2*accessRecheck {
			delete(a.consents, sa)
		}
	}
}
