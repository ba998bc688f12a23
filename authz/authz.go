// Package authz asks the apiserver whether someone may do something: a SubjectAccessReview about
// a user, or a SelfSubjectAccessReview about the client's own identity. It is the one place that
// builds such a review, sends it, remembers answers where a caller asks often (Cache), and turns a
// review the apiserver did not answer into a verdict. That last step is not a default: every
// call names its Failure rule, so that whoever reads a check sees whether it fails closed or open.
package authz

import (
	"context"
	"fmt"
	"strings"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"

	"github.com/configbutler/gitops-reverser/kube"
)

// Failure is what a question the apiserver did not answer (a timeout, a lost connection, the
// review refused) counts as.
type Failure int

const (
	// FailClosed: unanswered is refused. Every check that stands in for the apiserver, for
	// someone the daemon acts for (a read it mirrors, a write it makes, a page it shows), fails so.
	FailClosed Failure = iota + 1
	// FailOpen: unanswered is allowed. Only for a check that merely words, in advance, a refusal
	// the apiserver makes itself on the act that follows, as the same identity: the caller says
	// why at its call.
	FailOpen
)

// Question is whether User may do what Resource, or else NonResource, says.
type Question struct {
	// User is who is asked about, with their groups and extra; nil asks about the identity of the
	// client that asks (a SelfSubjectAccessReview).
	User        *authenticationv1.UserInfo
	Resource    *authorizationv1.ResourceAttributes
	NonResource *authorizationv1.NonResourceAttributes
}

// Verdict is the apiserver's answer to a Question, or the Failure rule's when it gave none.
type Verdict struct {
	Allowed bool
	Reason  string // the authorizer's reason, when it gave one
	Err     error  // why the apiserver did not answer; Allowed is then the Failure rule's
}

// Ask asks dyn's apiserver q; unanswered, rule decides. It remembers nothing (see Cache).
func Ask(ctx context.Context, dyn dynamic.Interface, q Question, rule Failure) Verdict {
	status, err := send(ctx, dyn, q)
	if err != nil {
		return Verdict{Allowed: rule == FailOpen, Err: fmt.Errorf("ask whether %s may %s: %w", q.who(), q.what(), err)}
	}
	// Denied is the authorizer's firm no; Allowed false without it is "no opinion": both refuse.
	return Verdict{Allowed: status.Allowed && !status.Denied, Reason: status.Reason}
}

// send creates the review q asks for and returns its status.
func send(ctx context.Context, dyn dynamic.Interface, q Question) (authorizationv1.SubjectAccessReviewStatus, error) {
	if q.User == nil {
		res, err := kube.For(dyn, kube.SelfSubjectAccessReviews, "").Create(ctx, &authorizationv1.SelfSubjectAccessReview{
			Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: q.Resource, NonResourceAttributes: q.NonResource},
		}, metav1.CreateOptions{})
		if err != nil {
			return authorizationv1.SubjectAccessReviewStatus{}, err
		}
		return res.Status, nil
	}
	extra := make(map[string]authorizationv1.ExtraValue, len(q.User.Extra))
	for k, v := range q.User.Extra {
		extra[k] = authorizationv1.ExtraValue(v)
	}
	res, err := kube.For(dyn, kube.SubjectAccessReviews, "").Create(ctx, &authorizationv1.SubjectAccessReview{
		Spec: authorizationv1.SubjectAccessReviewSpec{
			User: q.User.Username, UID: q.User.UID, Groups: q.User.Groups, Extra: extra,
			ResourceAttributes: q.Resource, NonResourceAttributes: q.NonResource,
		},
	}, metav1.CreateOptions{})
	if err != nil {
		return authorizationv1.SubjectAccessReviewStatus{}, err
	}
	return res.Status, nil
}

// who names the user asked about, for messages.
func (q Question) who() string {
	if q.User == nil {
		return "this client's identity"
	}
	return q.User.Username
}

// what says the permission asked about as RBAC says it: "list secrets in namespace team-a",
// "get /healthz".
func (q Question) what() string {
	if r := q.Resource; r != nil {
		what := r.Resource
		if r.Group != "" {
			what += "." + r.Group
		}
		if r.Subresource != "" {
			what += "/" + r.Subresource
		}
		if r.Name != "" {
			what += " " + r.Name
		}
		if r.Namespace != "" {
			what += " in namespace " + r.Namespace
		}
		return strings.TrimSpace(r.Verb + " " + what)
	}
	if n := q.NonResource; n != nil {
		return n.Verb + " " + n.Path
	}
	return "anything"
}
