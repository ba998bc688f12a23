package notify_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/configbutler/gitops-reverser/notify"
)

// channelRequest is one request a test channel received.
type channelRequest struct {
	header http.Header
	body   []byte
}

// MustChannel starts a loopback channel that answers every request with status and answer, and
// hands each request it read to the returned channel (buffered: a Send returns after the request
// is in it).
func MustChannel(tb testing.TB, status int, answer string) (*httptest.Server, <-chan channelRequest) {
	tb.Helper()
	got := make(chan channelRequest, 16)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		got <- channelRequest{header: r.Header.Clone(), body: body}
		w.WriteHeader(status)
		_, _ = io.WriteString(w, answer)
	}))
	tb.Cleanup(srv.Close)
	return srv, got
}

// MustReceive returns the request the channel received.
func MustReceive(tb testing.TB, got <-chan channelRequest) channelRequest {
	tb.Helper()
	select {
	case r := <-got:
		return r
	default:
		tb.Fatal("the channel received no request")
		return channelRequest{}
	}
}

// Secrets in a channel's URL, as a Slack or Teams webhook's URL carries them: no error may
// show them.
const (
	secretPath  = "/services/T0000/B0000/pathsecret"
	secretQuery = "sig=querysecret"
	secretUser  = "usersecret"
)

// secretURL is srv's URL with a secret userinfo, path and query.
func secretURL(srv *httptest.Server) string {
	u, _ := url.Parse(srv.URL)
	u.User = url.UserPassword(secretUser, "passwordsecret")
	return u.String() + secretPath + "?" + secretQuery
}

// assertNoSecret fails when err's message shows any part of the URL but its scheme and host.
func assertNoSecret(t *testing.T, err error) {
	t.Helper()
	for _, s := range []string{"secret", "/services", "sig="} {
		if strings.Contains(err.Error(), s) {
			t.Errorf("the error shows %q of the URL: %v", s, err)
		}
	}
}

// channelKinds builds each kind of Sender for a URL.
var channelKinds = []struct {
	name      string
	newSender func(url string, client *http.Client) notify.Sender
}{
	{"slack", notify.NewSlack},
	{"teams", notify.NewTeams},
	{"webhook", func(u string, c *http.Client) notify.Sender { return notify.NewWebhook(u, []byte("key"), c) }},
	{"cloudevents", func(u string, c *http.Client) notify.Sender {
		return notify.NewCloudEvents(u, "gitops-reverser/team-a/ops", c)
	}},
}

// sampleNotice has every field set, with characters each channel must escape.
func sampleNotice() notify.Notice {
	return notify.Notice{
		Time:        time.Date(2026, 3, 14, 15, 9, 26, 0, time.UTC),
		Severity:    notify.SeverityInfo,
		Reason:      "Opened",
		Message:     "Deployment team-a/web: spec.replicas 2 → 3 <!channel> & more",
		Object:      notify.Ref{APIVersion: "configbutler.ai/v1alpha1", Kind: "Proposal", Namespace: "team-a", Name: "web-3f2a9c"},
		Destination: "prod",
		Repository:  "https://git.example/org/fleet.git",
		Commit:      "0123456789abcdef0123456789abcdef01234567",
		Author:      "Jane Doe <jane@example.com>",
		File:        "apps/web/deployment.yaml",
		Diff:        "- replicas: 2\n+ replicas: 3\n* image: <same>",
		Link:        "https://ops.example/proposals/team-a/web-3f2a9c?tab=diff&line=1",
		Summary:     "production",
	}
}

func TestChannelAnswersSayWhetherToRetry(t *testing.T) {
	cases := []struct {
		name      string
		status    int
		wantRetry bool
	}{
		{"a 500 may succeed later", http.StatusInternalServerError, true},
		{"a 503 may succeed later", http.StatusServiceUnavailable, true},
		{"a 429 may succeed later", http.StatusTooManyRequests, true},
		{"a 400 never will", http.StatusBadRequest, false},
		{"a 404 never will", http.StatusNotFound, false},
		{"a 410 never will", http.StatusGone, false},
	}
	for _, kind := range channelKinds {
		for _, tc := range cases {
			t.Run(kind.name+"/"+tc.name, func(t *testing.T) {
				srv, _ := MustChannel(t, tc.status, "boom: invalid_payload\n")
				err := kind.newSender(secretURL(srv), srv.Client()).Send(t.Context(), sampleNotice())
				se, ok := errors.AsType[*notify.SendError](err)
				if !ok {
					t.Fatalf("Send = %v, want a *SendError", err)
				}
				if se.Status != tc.status || se.Retry != tc.wantRetry {
					t.Errorf("Status %d Retry %v, want %d %v", se.Status, se.Retry, tc.status, tc.wantRetry)
				}
				if !strings.Contains(err.Error(), "boom: invalid_payload") {
					t.Errorf("the error does not quote the answer: %v", err)
				}
				assertNoSecret(t, err)
			})
		}
	}
}

func TestChannelAcceptsEvery2xx(t *testing.T) {
	for _, kind := range channelKinds {
		for _, status := range []int{http.StatusOK, http.StatusAccepted, http.StatusNoContent} {
			t.Run(kind.name+"/"+http.StatusText(status), func(t *testing.T) {
				srv, got := MustChannel(t, status, "")
				if err := kind.newSender(secretURL(srv), srv.Client()).Send(t.Context(), sampleNotice()); err != nil {
					t.Fatalf("Send = %v", err)
				}
				if ua := MustReceive(t, got).header.Get("User-Agent"); ua != "gitops-reverser" {
					t.Errorf("User-Agent %q, want gitops-reverser", ua)
				}
			})
		}
	}
}

func TestNoAnswerMayBeRetried(t *testing.T) {
	stop := make(chan struct{})
	silent := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select { // never answers: waits for the client to give up
		case <-r.Context().Done():
		case <-stop:
		}
	}))
	t.Cleanup(silent.Close)
	t.Cleanup(func() { close(stop) })
	refused := httptest.NewServer(http.NotFoundHandler())
	refused.Close() // nothing listens on its address any more

	cases := []struct {
		name string
		srv  *httptest.Server
		want error // what the error must wrap, when it must
	}{
		{"a channel that never answers, until the deadline", silent, context.DeadlineExceeded},
		{"a channel that refuses the connection", refused, nil},
	}
	for _, kind := range channelKinds {
		for _, tc := range cases {
			t.Run(kind.name+"/"+tc.name, func(t *testing.T) {
				ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
				defer cancel()
				err := kind.newSender(secretURL(tc.srv), silent.Client()).Send(ctx, sampleNotice())
				se, ok := errors.AsType[*notify.SendError](err)
				if !ok {
					t.Fatalf("Send = %v, want a *SendError", err)
				}
				if se.Status != 0 || !se.Retry {
					t.Errorf("Status %d Retry %v, want 0 true", se.Status, se.Retry)
				}
				if tc.want != nil && !errors.Is(err, tc.want) {
					t.Errorf("Send = %v, want it to wrap %v", err, tc.want)
				}
				assertNoSecret(t, err)
			})
		}
	}
}

func TestURLThatIsNotHTTPIsFinal(t *testing.T) {
	for _, kind := range channelKinds {
		for _, raw := range []string{
			"ftp://hooks.example" + secretPath + "?" + secretQuery,
			"hooks.example" + secretPath + "?" + secretQuery,
			"https://%zz" + secretPath + "?" + secretQuery,
		} {
			t.Run(kind.name+"/"+raw, func(t *testing.T) {
				err := kind.newSender(raw, nil).Send(t.Context(), sampleNotice())
				se, ok := errors.AsType[*notify.SendError](err)
				if !ok {
					t.Fatalf("Send = %v, want a *SendError", err)
				}
				if se.Retry {
					t.Errorf("Retry is true for a URL that will never work: %v", err)
				}
				assertNoSecret(t, err)
			})
		}
	}
}
