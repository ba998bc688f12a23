package notify

import (
	"context"
	"fmt"
	"net/url"
	"strings"

	"github.com/configbutler/gitops-reverser/crds"
)

// missingKey is a channel's Secret without a key its type needs (Ready reason SecretNotFound).
type missingKey struct{ secret, key, typ string }

func (m missingKey) Error() string {
	return fmt.Sprintf("Secret %s has no key %q, which a %s channel needs", m.secret, m.key, m.typ)
}

// senderFor builds the Sender of ch from its Secret's data. An address must be an absolute
// http(s) URL: it is only ever read from the channel's own namespace's Secret.
func (n *Notifier) senderFor(ch *crds.NotifyChannel, data map[string][]byte) (Sender, error) {
	secret := ch.Namespace + "/" + ch.Spec.SecretRef.Name
	if ch.Spec.Type == crds.ChannelCommitStatus {
		token := strings.TrimSpace(string(data[crds.ChannelTokenKey]))
		if token == "" {
			return nil, missingKey{secret, crds.ChannelTokenKey, ch.Spec.Type}
		}
		if n.cfg.Statuses == nil {
			return nil, fmt.Errorf("this daemon sets no commit statuses")
		}
		return &commitStatuses{hosts: n.cfg.Statuses, provider: ch.Spec.Provider, api: ch.Spec.APIURL, token: token}, nil
	}
	address := strings.TrimSpace(string(data[crds.ChannelAddressKey]))
	if address == "" {
		return nil, missingKey{secret, crds.ChannelAddressKey, ch.Spec.Type}
	}
	if u, err := url.Parse(address); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return nil, fmt.Errorf("key %q of Secret %s is not an http(s) URL", crds.ChannelAddressKey, secret)
	}
	switch ch.Spec.Type {
	case crds.ChannelSlack:
		return NewSlack(address, n.cfg.Client), nil
	case crds.ChannelTeams:
		return NewTeams(address, n.cfg.Client), nil
	case crds.ChannelWebhook:
		return NewWebhook(address, data[crds.ChannelHMACKey], n.cfg.Client), nil
	case crds.ChannelCloudEvents:
		return NewCloudEvents(address, "gitops-reverser/"+ch.Namespace+"/"+ch.Name, n.cfg.Client), nil
	}
	return nil, fmt.Errorf("unknown channel type %q", ch.Spec.Type)
}

// Commit status states.
const (
	StatusPending = "pending"
	StatusSuccess = "success"
	StatusFailure = "failure"
)

// CommitStatus is one status on a commit.
type CommitStatus struct {
	SHA         string
	State       string // StatusPending, StatusSuccess or StatusFailure
	Context     string // crds.CommitStatusContext
	Description string
	TargetURL   string
}

// StatusHosts sets a status on a commit of the repository repoURL through its Git host's API
// (provider as in crds.Provider*, api "" to derive it from repoURL).
type StatusHosts func(ctx context.Context, provider, repoURL, api, token string, s CommitStatus) error

// commitStatuses is the Sender of a commitstatus channel: a proposal's notice becomes a status on
// the commit of the person's edit; other notices have no commit of a person to mark.
type commitStatuses struct {
	hosts                StatusHosts
	provider, api, token string
}

func (c *commitStatuses) Send(ctx context.Context, n Notice) error {
	state := proposalState(n)
	if state == "" || n.Commit == "" || n.Repository == "" {
		return nil
	}
	return c.hosts(ctx, c.provider, n.Repository, c.api, c.token, // the host's client cuts the description to its limit
		CommitStatus{SHA: n.Commit, State: state, Context: crds.CommitStatusContext, Description: n.Reason + ": " + n.Message, TargetURL: n.Link})
}

// proposalState is the commit status a proposal's notice means: pending while it waits, success
// once applied, failure when it is rejected or refused; "" for any other notice.
func proposalState(n Notice) string {
	if n.Object.Kind != crds.KindProposal {
		return ""
	}
	switch {
	case n.Reason == "Opened":
		return StatusPending
	case n.Reason == "Applied":
		return StatusSuccess
	case n.Severity == SeverityError || n.Reason == "Rejected":
		return StatusFailure
	}
	return ""
}
