package pullrequest

import (
	"fmt"
	"net/http"
	"strings"
	"time"
)

// Kinds of host, as Settings.Kind and Error.Host.
const (
	KindGitea  = "gitea"
	KindGitHub = "github"
	KindGitLab = "gitlab"
	// KindForgejo is accepted as an alias of KindGitea: Forgejo serves Gitea's API.
	KindForgejo = "forgejo"
)

// DefaultTimeout bounds each API call when Settings.HTTPClient is nil.
const DefaultTimeout = 30 * time.Second

// Settings says which host and repository a Host talks to, and how.
type Settings struct {
	Kind string // KindGitea (or KindForgejo), KindGitHub or KindGitLab
	// Repository is the repository's clone URL: https://host/owner/repo(.git),
	// ssh://git@host/owner/repo.git or git@host:owner/repo.git. GitLab's project path keeps
	// its subgroups (group/sub/project); Gitea may be served under a path prefix
	// (https://host/git/owner/repo).
	Repository string
	// API is the API's base URL. Empty derives it from Repository: for Gitea the scheme, host
	// and path prefix (the client adds /api/v1); for GitHub https://api.github.com/ when the
	// host is github.com, else https://HOST/api/v3/ (GitHub Enterprise Server); for GitLab
	// https://HOST/api/v4. Set it when the web UI of an SSH remote is not https://HOST/.
	API string
	// Token authenticates every call (a personal, project or app access token).
	Token string
	// HTTPClient sends the calls; nil uses one with DefaultTimeout.
	HTTPClient *http.Client
	// UserAgent is sent with every call when set.
	UserAgent string
	// OnCall, when set, is called after every API call with the host's kind, the operation
	// (OpFind, ...) and the HTTP status (0 when no answer came: a transport error or timeout),
	// so the daemon can count calls and errors by host and code. It must be quick.
	OnCall func(host, op string, status int)
}

// New returns the Host of s. It makes no call: a wrong token or repository shows in the first
// call's *Error.
func New(s Settings) (Host, error) {
	kind := strings.ToLower(strings.TrimSpace(s.Kind))
	switch kind {
	case KindGitea, KindForgejo, KindGitHub, KindGitLab:
	case "bitbucket", "azure", "azuredevops", "azure-devops":
		return nil, fmt.Errorf("pull request host %q is not supported yet (supported: gitea, forgejo, github, gitlab)", s.Kind)
	default:
		return nil, fmt.Errorf("unknown pull request host %q (supported: gitea, forgejo, github, gitlab)", s.Kind)
	}
	if kind == KindForgejo {
		kind = KindGitea
	}
	ep, err := resolve(kind, s.Repository, s.API)
	if err != nil {
		return nil, err
	}
	hc := s.HTTPClient
	if hc == nil {
		hc = &http.Client{Timeout: DefaultTimeout}
	}
	c := caller{kind: kind, onCall: s.OnCall, now: time.Now}
	switch kind {
	case KindGitHub:
		return newGitHub(c, ep, s.Token, s.UserAgent, hc)
	case KindGitLab:
		return newGitLab(c, ep, s.Token, s.UserAgent, hc)
	default:
		return newGitea(c, ep, s.Token, s.UserAgent, hc), nil
	}
}
