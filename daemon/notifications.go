package daemon

import (
	"context"
	"errors"

	"github.com/configbutler/gitops-reverser/controller"
	"github.com/configbutler/gitops-reverser/metrics"
	"github.com/configbutler/gitops-reverser/notify"
	"github.com/configbutler/gitops-reverser/pullrequest"
)

// NotifyConfig is the notifications' (NotifyRules sending the daemon's Events to NotifyChannels).
type NotifyConfig struct {
	Enabled bool
	// PageURL is the operator page as people reach it, for the links of messages and statuses.
	PageURL string
}

// notifications tells people what the daemon's Events say, through the NotifyChannels the
// NotifyRules name. It reads the Events as they are recorded (a tap on each part's recorder),
// so it is never in their way: a full intake drops, counted.
type notifications struct {
	n *notify.Notifier
}

// newNotifications builds the notifier and taps recorders; it starts nothing.
func newNotifications(s shared, cfg NotifyConfig, consent notify.Consent, recorders ...*controller.Events) (*notifications, error) {
	n, err := notify.New(notify.Config{
		Dynamic: s.dyn, Home: s.namespace, PageURL: cfg.PageURL, Consent: consent, PushFailingAfter: notify.DefaultPushFailingAfter,
		Statuses: commitStatus(s.reg.Requests), Metrics: s.reg.Notify, Log: s.log.With("part", metrics.PartNotify),
	})
	if err != nil {
		return nil, err
	}
	for _, r := range append(recorders, n.Recorder()) {
		r.Tap(n.Offer)
	}
	return &notifications{n: n}, nil
}

func (p *notifications) Run(ctx context.Context) error { return p.n.Run(ctx) }

// commitStatus sets commit statuses through the Git hosts' clients of pull requests, counted
// with their calls.
func commitStatus(m *metrics.PullRequests) notify.StatusHosts {
	return func(ctx context.Context, provider, repoURL, api, token string, st notify.CommitStatus) error {
		host, err := pullrequest.New(pullrequest.Settings{
			Kind: provider, Repository: repoURL, API: api, Token: token, UserAgent: "gitops-reverser/" + Version, OnCall: countCalls(m),
		})
		if err != nil {
			return &notify.SendError{Err: err}
		}
		err = host.SetStatus(ctx, st.SHA, pullrequest.Status{State: st.State, Context: st.Context, Description: st.Description, TargetURL: st.TargetURL})
		if err != nil {
			return statusError(err)
		}
		return nil
	}
}

// statusError is a host's answer as a notify.SendError: a host that answered 4xx (but 429) will
// not take the same status on a retry.
func statusError(err error) error {
	var perr *pullrequest.Error
	if errors.As(err, &perr) && perr.Status >= 400 && perr.Status < 500 && perr.Status != 429 {
		return &notify.SendError{Status: perr.Status, Retry: false, Err: err}
	}
	return &notify.SendError{Retry: true, Err: err}
}
