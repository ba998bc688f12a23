package ui

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/jellydator/ttlcache/v3"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"

	"github.com/configbutler/gitops-reverser/authz"
	"github.com/configbutler/gitops-reverser/crds"
	"github.com/configbutler/gitops-reverser/kube"
)

// Auth says who may see the page.
type Auth string

// The ways the page decides who may see it.
const (
	// AuthToken: a bearer token, checked with a TokenReview; each namespace is shown only if a
	// SubjectAccessReview lets its user list Proposals there.
	AuthToken Auth = "token"
	// AuthNone: everything is shown, read-only, to whoever reaches the page. The daemon allows it
	// on loopback addresses only.
	AuthNone Auth = "none"
)

// How long the answers of the apiserver are reused: a page load asks once per namespace, and
// a revoked token or binding is honoured within these bounds.
const (
	reviewTTL       = 30 * time.Second
	refusalTTL      = 5 * time.Second
	reviewCacheSize = 10000
	reviewTimeout   = 10 * time.Second
	// maxTokenBytes bounds a bearer token; service account tokens are about 1 KiB.
	maxTokenBytes = 16 << 10
)

// errNoToken and errBadToken are why a request is shown the sign-in form.
var (
	errNoToken  = errors.New("sign in with a Kubernetes bearer token")
	errBadToken = errors.New("the token was not accepted by the Kubernetes API (expired, revoked or mistyped?)")
)

// viewer is who is looking at the page.
type viewer struct {
	user  authenticationv1.UserInfo
	token string // the bearer token; "" with AuthNone
}

// readOnly reports whether the viewer may only look: nobody signed in (AuthNone).
func (v *viewer) readOnly() bool { return v.token == "" }

// authenticator asks the apiserver who a token belongs to and what its user may see, and
// remembers the answers for a short while.
type authenticator struct {
	mode  Auth
	dyn   dynamic.Interface
	users *ttlcache.Cache[[sha256.Size]byte, authenticationv1.UserInfo]
	lists *authz.Cache
}

func newAuthenticator(mode Auth, dyn dynamic.Interface) *authenticator {
	return &authenticator{
		mode: mode,
		dyn:  dyn,
		users: ttlcache.New(ttlcache.WithTTL[[sha256.Size]byte, authenticationv1.UserInfo](reviewTTL),
			ttlcache.WithCapacity[[sha256.Size]byte, authenticationv1.UserInfo](reviewCacheSize)),
		lists: authz.NewCache(dyn, authz.Keep{Allowed: reviewTTL, Refused: refusalTTL, Max: reviewCacheSize}),
	}
}

// bearerToken is the request's token: "Authorization: Bearer <token>" and nothing else, so a
// browser never sends it by itself (no cookie, no basic auth) and a page of another origin
// cannot make it send one.
func bearerToken(r *http.Request) (string, error) {
	h := r.Header.Get("Authorization")
	if h == "" {
		return "", errNoToken
	}
	scheme, token, ok := strings.Cut(h, " ")
	token = strings.TrimSpace(token)
	if !ok || !strings.EqualFold(scheme, "Bearer") || token == "" || len(token) > maxTokenBytes {
		return "", errBadToken
	}
	return token, nil
}

// viewer authenticates the request. With AuthNone everyone is an anonymous, read-only viewer.
func (a *authenticator) viewer(r *http.Request) (*viewer, error) {
	if a.mode == AuthNone {
		return &viewer{user: authenticationv1.UserInfo{Username: "anonymous (--ui-auth=none)"}}, nil
	}
	token, err := bearerToken(r)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256([]byte(token))
	if item := a.users.Get(sum); item != nil {
		if item.Value().Username == "" {
			return nil, errBadToken
		}
		return &viewer{user: item.Value(), token: token}, nil
	}
	ctx, cancel := context.WithTimeout(r.Context(), reviewTimeout)
	defer cancel()
	review, err := kube.For(a.dyn, kube.TokenReviews, "").Create(ctx,
		&authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: token}}, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("check the token with a TokenReview: %w", err)
	}
	if !review.Status.Authenticated || review.Status.User.Username == "" {
		a.users.Set(sum, authenticationv1.UserInfo{}, refusalTTL)
		return nil, errBadToken
	}
	a.users.Set(sum, review.Status.User, ttlcache.DefaultTTL)
	return &viewer{user: review.Status.User, token: token}, nil
}

// visible returns the namespaces, of those given, in which the viewer may list Proposals.
func (a *authenticator) visible(ctx context.Context, v *viewer, namespaces []string) ([]string, error) {
	if v.readOnly() {
		return namespaces, nil
	}
	allowed := make([]bool, len(namespaces))
	errs := make([]error, len(namespaces))
	var wg sync.WaitGroup
	limit := make(chan struct{}, 8) // SubjectAccessReviews in flight at once
	for i, ns := range namespaces {
		wg.Go(func() {
			limit <- struct{}{}
			defer func() { <-limit }()
			allowed[i], errs[i] = a.mayList(ctx, v, ns)
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	var out []string
	for i, ns := range namespaces {
		if allowed[i] {
			out = append(out, ns)
		}
	}
	return out, nil
}

// mayList asks whether the viewer's user may list Proposals in namespace. It fails closed: the
// page shows a namespace only to whom the apiserver says may see it, and an unanswered review is
// an error the page shows, never a namespace shown.
func (a *authenticator) mayList(ctx context.Context, v *viewer, namespace string) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, reviewTimeout)
	defer cancel()
	verdict := a.lists.Ask(ctx, authz.Question{User: &v.user, Resource: &authorizationv1.ResourceAttributes{
		Namespace: namespace, Verb: "list", Group: crds.Group, Resource: crds.Proposals.Resource,
	}}, authz.FailClosed)
	return verdict.Allowed, verdict.Err
}
