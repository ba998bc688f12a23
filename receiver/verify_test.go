package receiver

import (
	"crypto/sha1" //nolint:gosec // generic-hmac accepts SHA-1 signatures.
	"crypto/sha256"
	"crypto/sha512"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
)

var (
	githubTestRepo = []string{
		"https://github.com/jessesuen/test-repo.git",
		"git@github.com:jessesuen/test-repo.git",
		"https://github.com/jessesuen/test-repo",
		"jessesuen/test-repo",
	}
	gitlabTestRepo = []string{
		"https://gitlab.com/group/name.git",
		"ssh://git@gitlab.com:2222/group/name.git",
		"https://gitlab.com/group/name",
		"group/name",
	}
	gogsTestRepo = []string{
		"http://gogs-server/john/repo-test.git",
		"git@gogs-server/repo-test.git",
		"http://gogs-server/john/repo-test",
		"john/repo-test",
	}
	bitbucketTestRepo = []string{
		"ssh://git@bitbucketserver:7999/myproject/test-repo.git",
		"https://bitbucketserver/scm/myproject/test-repo.git",
		"https://bitbucketserver/projects/MYPROJECT/repos/test-repo/browse",
		"MYPROJECT/test-repo",
	}
)

// recordedPayloads are the recorded payloads with the headers their host sends.
var recordedPayloads = []struct {
	name, file, typ, event string
	repo                   []string
	ping                   bool
	repoURL                string // a destination's repoUrl the payload must match
}{
	{"GitHubPush", "github-commit-event.json", TypeGitHub, "push", githubTestRepo, false, "git@github.com:jessesuen/test-repo.git"},
	{"GitHubTag", "github-tag-event.json", TypeGitHub, "push", githubTestRepo, false, "https://github.com/jessesuen/test-repo"},
	{"GitHubPing", "github-ping-event.json", TypeGitHub, "ping", []string{
		"https://github.com/Octocoders/Hello-World.git",
		"git@github.com:Octocoders/Hello-World.git",
		"https://github.com/Octocoders/Hello-World",
		"Octocoders/Hello-World",
	}, true, "https://github.com/Octocoders/Hello-World.git"},
	{"GitLabPush", "gitlab-event.json", TypeGitLab, "Push Hook", gitlabTestRepo, false, "https://GitLab.com/group/name/"},
	{"GiteaPush", "gogs-event.json", TypeGitea, "push", gogsTestRepo, false, "http://gogs-server/john/repo-test.git"},
	{"BitbucketServerPush", "bitbucket-server-event.json", TypeBitbucket, "repo:refs_changed", bitbucketTestRepo, false,
		"ssh://git@bitbucketserver:7999/myproject/test-repo.git"},
}

func TestRecordedPayloadsVerify(t *testing.T) {
	for _, tc := range recordedPayloads {
		t.Run(tc.name, func(t *testing.T) {
			body := mustPayload(t, tc.file)
			ev, err := Verify(tc.typ, testToken, signed(tc.typ, testToken, body, tc.event, "delivery-1"), body, nil)
			if err != nil {
				t.Fatalf("Verify: %v", err)
			}
			want := Event{Type: tc.typ, Name: tc.event, Delivery: "delivery-1", Repository: tc.repo, Ping: tc.ping}
			assertEvent(t, ev, want)
			if !MatchesRepository(ev, tc.repoURL) {
				t.Errorf("the event does not match its own repository %s", tc.repoURL)
			}
			if MatchesRepository(ev, "https://github.com/someone/else.git") {
				t.Error("the event matches another repository")
			}
		})
	}
}

func assertEvent(t *testing.T, got, want Event) {
	t.Helper()
	if got.Type != want.Type || got.Name != want.Name || got.Delivery != want.Delivery || got.Ping != want.Ping ||
		!slices.Equal(got.Repository, want.Repository) {
		t.Fatalf("event =\n  %+v\nwant\n  %+v", got, want)
	}
}

func TestGogsHeadersVerify(t *testing.T) {
	body := mustPayload(t, "gogs-event.json")
	h := http.Header{}
	h.Set("X-Gogs-Signature", sha256Hex(testToken, body))
	h.Set("X-Gogs-Event", "push")
	h.Set("X-Gogs-Delivery", "gogs-1")
	ev, err := Verify(TypeGitea, testToken, h, body, []string{"push"})
	if err != nil {
		t.Fatalf("Verify: %v", err)
	}
	assertEvent(t, ev, Event{Type: TypeGitea, Name: "push", Delivery: "gogs-1", Repository: gogsTestRepo})
}

func TestGitLabDeliveryFallsBackToRequestID(t *testing.T) {
	body := mustPayload(t, "gitlab-event.json")
	h := signed(TypeGitLab, testToken, body, "Push Hook", "")
	h.Del("X-Gitlab-Event-UUID")
	h.Set("X-Request-Id", "req-7")
	ev, err := Verify(TypeGitLab, testToken, h, body, nil)
	if err != nil {
		t.Fatalf("Verify: %v", err)
	}
	if ev.Delivery != "req-7" {
		t.Errorf("delivery = %q, want req-7", ev.Delivery)
	}
}

func TestNoDeliveryIDIsEmpty(t *testing.T) {
	body := mustPayload(t, "github-commit-event.json")
	h := signed(TypeGitHub, testToken, body, "push", "")
	h.Del("X-GitHub-Delivery")
	ev, err := Verify(TypeGitHub, testToken, h, body, nil)
	if err != nil || ev.Delivery != "" {
		t.Fatalf("Verify = %+v, %v; want no delivery id and no error", ev, err)
	}
}

func TestBitbucketPingIsPing(t *testing.T) {
	body := []byte(`{"test": true}`)
	ev, err := Verify(TypeBitbucket, testToken, signed(TypeBitbucket, testToken, body, "diagnostics:ping", "p"), body,
		[]string{"repo:refs_changed"})
	if err != nil {
		t.Fatalf("Verify: %v", err)
	}
	if !ev.Ping || len(ev.Repository) != 0 {
		t.Errorf("event = %+v, want a ping with no repository", ev)
	}
}

func TestPingWithUnparseableBodyIsStillPing(t *testing.T) {
	body := []byte(`not json`)
	ev, err := Verify(TypeGitHub, testToken, signed(TypeGitHub, testToken, body, "ping", "p"), body, nil)
	if err != nil || !ev.Ping {
		t.Fatalf("Verify = %+v, %v; want a ping", ev, err)
	}
}

func TestGitHubFormEncodedPayload(t *testing.T) {
	body := []byte("payload=" + url.QueryEscape(string(mustPayload(t, "github-commit-event.json"))))
	h := signed(TypeGitHub, testToken, body, "push", "f")
	h.Set("Content-Type", "application/x-www-form-urlencoded")
	ev, err := Verify(TypeGitHub, testToken, h, body, nil)
	if err != nil {
		t.Fatalf("Verify: %v", err)
	}
	if !slices.Equal(ev.Repository, githubTestRepo) {
		t.Errorf("repository = %q, want %q", ev.Repository, githubTestRepo)
	}
}

func TestBitbucketCloudLinks(t *testing.T) {
	body := []byte(`{"repository":{"full_name":"team/repo","links":{"html":{"href":"https://bitbucket.org/team/repo"},` +
		`"self":{"href":"https://api.bitbucket.org/2.0/repositories/team/repo"}}}}`)
	ev, err := Verify(TypeBitbucket, testToken, signed(TypeBitbucket, testToken, body, "repo:push", "c"), body, nil)
	if err != nil {
		t.Fatalf("Verify: %v", err)
	}
	want := []string{"https://api.bitbucket.org/2.0/repositories/team/repo", "https://bitbucket.org/team/repo", "team/repo"}
	if !slices.Equal(ev.Repository, want) {
		t.Errorf("repository = %q, want %q", ev.Repository, want)
	}
	if !MatchesRepository(ev, "git@bitbucket.org:team/repo.git") {
		t.Error("the Cloud event does not match its repository")
	}
}

func TestGenericTypesCarryNoRepository(t *testing.T) {
	body := mustPayload(t, "github-commit-event.json")
	for _, typ := range []string{TypeGeneric, TypeGenericHMAC} {
		ev, err := Verify(typ, testToken, signed(typ, testToken, body, "", "g-1"), body, nil)
		if err != nil {
			t.Fatalf("%s: Verify: %v", typ, err)
		}
		assertEvent(t, ev, Event{Type: typ, Delivery: "g-1"})
	}
	// generic checks nothing in the request: the secret path is the credential.
	ev, err := Verify(TypeGeneric, testToken, http.Header{"X-Event": {"build"}}, []byte("anything"), []string{"build"})
	if err != nil || ev.Name != "build" {
		t.Fatalf("generic: Verify = %+v, %v", ev, err)
	}
}

func TestGenericHMACAlgorithms(t *testing.T) {
	body := []byte(`{"any":"thing"}`)
	for _, tc := range []struct {
		sig    string
		status int
		reason string
	}{
		{"sha256=" + sign(sha256.New, testToken, body), 0, ""},
		{"sha1=" + sign(sha1.New, testToken, body), 0, ""},
		{"sha512=" + sign(sha512.New, testToken, body), 0, ""},
		{"SHA256=" + sign(sha256.New, testToken, body), 0, ""},
		{"md5=" + sign(sha256.New, testToken, body), http.StatusForbidden, ReasonUnsupportedAlgorithm},
		{"sha384=" + sign(sha512.New, testToken, body), http.StatusForbidden, ReasonUnsupportedAlgorithm},
		{"sha1=" + sign(sha256.New, testToken, body), http.StatusForbidden, ReasonBadSignature},
		{"sha512=" + sign(sha512.New, []byte("wrong"), body), http.StatusForbidden, ReasonBadSignature},
		{sign(sha256.New, testToken, body), http.StatusForbidden, ReasonBadSignature},
		{"sha256=zz", http.StatusForbidden, ReasonBadSignature},
		{"", http.StatusUnauthorized, ReasonMissingSignature},
	} {
		h := http.Header{}
		h.Set("X-Signature", tc.sig)
		h.Set("X-Event", "deploy")
		ev, err := Verify(TypeGenericHMAC, testToken, h, body, nil)
		if tc.status == 0 {
			if err != nil || ev.Name != "deploy" {
				t.Errorf("%.12s…: Verify = %+v, %v", tc.sig, ev, err)
			}
			continue
		}
		mustRefusal(t, err, tc.status, tc.reason)
	}
}

// TestForgedDeliveriesAreRefused covers every host: a flipped byte, a wrong secret, no header, a
// wrong prefix.
func TestForgedDeliveriesAreRefused(t *testing.T) {
	for _, rc := range recordedPayloads {
		body := mustPayload(t, rc.file)
		sigHeader := map[string]string{TypeGitHub: "X-Hub-Signature-256", TypeGitea: "X-Gitea-Signature",
			TypeGitLab: "X-Gitlab-Token", TypeBitbucket: "X-Hub-Signature"}[rc.typ]
		missing, bad := ReasonMissingSignature, ReasonBadSignature
		if rc.typ == TypeGitLab {
			missing, bad = ReasonMissingToken, ReasonBadToken
		}
		t.Run(rc.name+"/TamperedBody", func(t *testing.T) {
			h := signed(rc.typ, testToken, body, rc.event, "d")
			tampered := slices.Clone(body)
			tampered[len(tampered)/2] ^= 0x01
			_, err := Verify(rc.typ, testToken, h, tampered, nil)
			if rc.typ == TypeGitLab {
				// GitLab sends the token itself, not a signature: the body is not covered.
				if err == nil {
					return
				}
				mustRefusal(t, err, http.StatusBadRequest, ReasonUnparseable)
				return
			}
			mustRefusal(t, err, http.StatusForbidden, bad)
		})
		t.Run(rc.name+"/WrongSecret", func(t *testing.T) {
			h := signed(rc.typ, []byte("not-the-token"), body, rc.event, "d")
			_, err := Verify(rc.typ, testToken, h, body, nil)
			mustRefusal(t, err, http.StatusForbidden, bad)
		})
		t.Run(rc.name+"/MissingHeader", func(t *testing.T) {
			h := signed(rc.typ, testToken, body, rc.event, "d")
			h.Del(sigHeader)
			_, err := Verify(rc.typ, testToken, h, body, nil)
			mustRefusal(t, err, http.StatusUnauthorized, missing)
		})
		t.Run(rc.name+"/WrongPrefix", func(t *testing.T) {
			h := signed(rc.typ, testToken, body, rc.event, "d")
			switch rc.typ {
			case TypeGitLab:
				h.Set(sigHeader, "Bearer "+string(testToken))
			case TypeGitea:
				h.Set(sigHeader, "sha256="+sha256Hex(testToken, body))
			default:
				h.Set(sigHeader, "sha1="+strings.TrimPrefix(h.Get(sigHeader), "sha256="))
			}
			_, err := Verify(rc.typ, testToken, h, body, nil)
			mustRefusal(t, err, http.StatusForbidden, bad)
		})
	}
}

func TestGitHubRejectsSHA1Signature(t *testing.T) {
	body := mustPayload(t, "github-commit-event.json")
	h := signed(TypeGitHub, testToken, body, "push", "d")
	h.Del("X-Hub-Signature-256")
	h.Set("X-Hub-Signature", "sha1="+sign(sha1.New, testToken, body))
	_, err := Verify(TypeGitHub, testToken, h, body, nil)
	mustRefusal(t, err, http.StatusUnauthorized, ReasonMissingSignature)
}

func TestUppercaseHexSignatureVerifies(t *testing.T) {
	body := mustPayload(t, "github-commit-event.json")
	h := signed(TypeGitHub, testToken, body, "push", "d")
	h.Set("X-Hub-Signature-256", "sha256="+strings.ToUpper(sha256Hex(testToken, body)))
	if _, err := Verify(TypeGitHub, testToken, h, body, nil); err != nil {
		t.Fatalf("Verify: %v", err)
	}
}

func TestEventFilter(t *testing.T) {
	body := mustPayload(t, "github-commit-event.json")
	h := signed(TypeGitHub, testToken, body, "push", "d")
	if _, err := Verify(TypeGitHub, testToken, h, body, []string{"push"}); err != nil {
		t.Fatalf("push with [push]: %v", err)
	}
	if _, err := Verify(TypeGitHub, testToken, h, body, []string{"release", "PUSH"}); err != nil {
		t.Fatalf("push with [release PUSH]: %v", err)
	}
	ev, err := Verify(TypeGitHub, testToken, h, body, []string{"release"})
	mustRefusal(t, err, http.StatusOK, ReasonEventFiltered)
	if ev.Name != "push" || ev.Delivery != "d" {
		t.Errorf("a filtered event comes back as %+v, want its name and delivery", ev)
	}

	ping := mustPayload(t, "github-ping-event.json")
	if ev, err := Verify(TypeGitHub, testToken, signed(TypeGitHub, testToken, ping, "ping", "p"), ping,
		[]string{"release"}); err != nil || !ev.Ping {
		t.Fatalf("a ping is never filtered: %+v, %v", ev, err)
	}
	// A filter that names no event lets nothing with a name through, generic ones included.
	_, err = Verify(TypeGeneric, testToken, http.Header{}, nil, []string{"deploy"})
	mustRefusal(t, err, http.StatusOK, ReasonEventFiltered)
}

func TestFilteredEventIsNotParsed(t *testing.T) {
	body := []byte("not json")
	_, err := Verify(TypeGitHub, testToken, signed(TypeGitHub, testToken, body, "issues", "d"), body, []string{"push"})
	mustRefusal(t, err, http.StatusOK, ReasonEventFiltered)
}

func TestRefusals(t *testing.T) {
	push := mustPayload(t, "github-commit-event.json")
	for _, tc := range []struct {
		name   string
		typ    string
		token  []byte
		header http.Header
		body   []byte
		status int
		reason string
	}{
		{"UnparseablePush", TypeGitHub, testToken, signed(TypeGitHub, testToken, []byte("{"), "push", "d"), []byte("{"),
			http.StatusBadRequest, ReasonUnparseable},
		{"EmptyPush", TypeGitLab, testToken, signed(TypeGitLab, testToken, nil, "Push Hook", "d"), nil,
			http.StatusBadRequest, ReasonUnparseable},
		{"ArrayBody", TypeGitea, testToken, signed(TypeGitea, testToken, []byte("[]"), "push", "d"), []byte("[]"),
			http.StatusBadRequest, ReasonUnparseable},
		{"MissingEvent", TypeGitHub, testToken, signed(TypeGitHub, testToken, push, "", "d"), push,
			http.StatusBadRequest, ReasonMissingEvent},
		{"NoToken", TypeGitHub, nil, signed(TypeGitHub, nil, push, "push", "d"), push,
			http.StatusServiceUnavailable, ReasonNoToken},
		{"NoTokenGeneric", TypeGeneric, []byte{}, http.Header{}, push, http.StatusServiceUnavailable, ReasonNoToken},
		{"TooLarge", TypeGeneric, testToken, http.Header{}, make([]byte, MaxBodyBytes+1),
			http.StatusRequestEntityTooLarge, ReasonBodyTooLarge},
		{"CDEventsNotHere", TypeCDEvents, testToken, http.Header{}, push, http.StatusInternalServerError, ReasonUnknownType},
		{"UnknownType", "svn", testToken, http.Header{}, push, http.StatusInternalServerError, ReasonUnknownType},
		{"NotHex", TypeGitea, testToken, http.Header{"X-Gitea-Signature": {"xyz"}, "X-Gitea-Event": {"push"}}, push,
			http.StatusForbidden, ReasonBadSignature},
		{"TruncatedSignature", TypeGitHub, testToken,
			http.Header{"X-Hub-Signature-256": {"sha256=" + sha256Hex(testToken, push)[:62]}, "X-Github-Event": {"push"}},
			push, http.StatusForbidden, ReasonBadSignature},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ev, err := Verify(tc.typ, tc.token, tc.header, tc.body, nil)
			mustRefusal(t, err, tc.status, tc.reason)
			if tc.reason != ReasonEventFiltered && (ev.Type != "" || ev.Repository != nil) {
				t.Errorf("a refusal comes with an event: %+v", ev)
			}
			var r *Refusal
			if !errors.As(err, &r) || !strings.Contains(err.Error(), tc.reason) {
				t.Errorf("Error() = %q, want it to name %s", err, tc.reason)
			}
		})
	}
}

func TestMaxBodyVerifies(t *testing.T) {
	body := make([]byte, MaxBodyBytes)
	if _, err := Verify(TypeGenericHMAC, testToken, signed(TypeGenericHMAC, testToken, body, "", ""), body, nil); err != nil {
		t.Fatalf("a body of exactly MaxBodyBytes: %v", err)
	}
}

func TestWebhookPath(t *testing.T) {
	got := WebhookPath([]byte("token"), "name", "namespace")
	sum := sha256.Sum256([]byte("tokennamenamespace"))
	if want := "/hook/" + hexString(sum[:]); got != want {
		t.Fatalf("WebhookPath = %s, want %s", got, want)
	}
	if WebhookPath([]byte("token2"), "name", "namespace") == got || WebhookPath([]byte("token"), "name", "other") == got {
		t.Error("the path does not change with the token or the namespace")
	}
	if len(got) != len("/hook/")+64 {
		t.Errorf("path %q is not /hook/ + 64 hex digits", got)
	}
}
