package daemon

import (
	"fmt"
	"strconv"

	"github.com/configbutler/gitops-reverser/gitops"
	"github.com/configbutler/gitops-reverser/metrics"
	"github.com/configbutler/gitops-reverser/pullrequest"
)

// deliveries builds the Delivery of each branch that delivers by pull request: its Git host's
// API, reached with the token of its GitRepoConfig's Secret, every call counted by host,
// operation and, when it failed, status code.
func deliveries(m *metrics.PullRequests) func(gitops.Repository, gitops.Branch) (gitops.Delivery, error) {
	onCall := countCalls(m)
	return func(r gitops.Repository, b gitops.Branch) (gitops.Delivery, error) {
		if r.Credentials.APIToken == "" {
			return nil, fmt.Errorf("GitRepoConfig %s has no API token for pull requests: give its Secret a key token (or password)", r.Name)
		}
		host, err := pullrequest.New(pullrequest.Settings{
			Kind: b.Request.Provider, Repository: r.URL, API: b.Request.APIURL, Token: r.Credentials.APIToken,
			UserAgent: "gitops-reverser/" + Version, OnCall: onCall,
		})
		if err != nil {
			return nil, fmt.Errorf("pull requests of %s: %w", r.Name, err)
		}
		return pullrequest.NewDelivery(host, *b.Request), nil
	}
}

// countCalls counts every call of a Git host's API by host and operation and, when it failed, by
// status code.
func countCalls(m *metrics.PullRequests) func(host, op string, status int) {
	return func(host, op string, status int) {
		m.Calls.WithLabelValues(host, op).Inc()
		if status < 200 || status > 299 {
			m.Errors.WithLabelValues(host, strconv.Itoa(status)).Inc()
		}
	}
}
