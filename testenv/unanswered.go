package testenv

import (
	"io"
	"net/http"
	"strings"
	"sync/atomic"

	"k8s.io/client-go/rest"
)

// Unanswered stands between a client and the apiserver and, while it is on, answers the requests
// it matches as an apiserver that cannot serve them does (503, without Retry-After, so client-go
// does not retry): for tests of what a part does when one kind of request goes unanswered while
// the rest of the apiserver works.
type Unanswered struct {
	match func(*http.Request) bool
	on    atomic.Bool
}

// Unanswer makes an Unanswered for the requests match selects; it starts off.
func Unanswer(match func(*http.Request) bool) *Unanswered { return &Unanswered{match: match} }

// Reviews selects the SubjectAccessReviews and SelfSubjectAccessReviews a client creates.
func Reviews(r *http.Request) bool { return strings.HasSuffix(r.URL.Path, "subjectaccessreviews") }

// Set turns it on or off.
func (u *Unanswered) Set(on bool) { u.on.Store(on) }

// Config is a copy of cfg whose requests pass through u.
func (u *Unanswered) Config(cfg *rest.Config) *rest.Config {
	c := rest.CopyConfig(cfg)
	c.Wrap(func(next http.RoundTripper) http.RoundTripper {
		return roundTripper(func(r *http.Request) (*http.Response, error) {
			if !u.on.Load() || !u.match(r) {
				return next.RoundTrip(r)
			}
			if r.Body != nil {
				_ = r.Body.Close()
			}
			body := `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"ServiceUnavailable","code":503,` +
				`"message":"the apiserver cannot answer this now (testenv.Unanswered)"}`
			return &http.Response{StatusCode: http.StatusServiceUnavailable, Status: "503 Service Unavailable", Proto: "HTTP/1.1",
				ProtoMajor: 1, ProtoMinor: 1, Header: http.Header{"Content-Type": {"application/json"}},
				Body: io.NopCloser(strings.NewReader(body)), ContentLength: int64(len(body)), Request: r}, nil
		})
	})
	return c
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
