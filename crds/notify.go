package crds

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// A NotifyChannel is where messages go (a Slack or Teams webhook, a generic webhook, a CloudEvents
// sink, commit statuses on a Git host); a NotifyRule says which of the daemon's Events go to a
// channel of its namespace. They are not named Provider and Alert: Flux's notification-controller
// has kinds of those names in the clusters this daemon runs in, and `kubectl get alerts` should
// not mean two things.

// Kind names.
const (
	KindNotifyChannel = "NotifyChannel"
	KindNotifyRule    = "NotifyRule"
)

// Resources of the kinds, for the dynamic client.
var (
	NotifyChannels = GroupVersion.WithResource("notifychannels")
	NotifyRules    = GroupVersion.WithResource("notifyrules")
)

// Types of a NotifyChannel (NotifyChannelSpec.Type).
const (
	ChannelSlack        = "slack"        // a Slack incoming webhook
	ChannelTeams        = "teams"        // a Microsoft Teams workflow webhook (an Adaptive Card)
	ChannelWebhook      = "webhook"      // a generic JSON webhook, signed with HMAC-SHA256 when the Secret has an hmacKey
	ChannelCloudEvents  = "cloudevents"  // CloudEvents over HTTP (CDEvents types where one fits)
	ChannelCommitStatus = "commitstatus" // a status on the commit a person pushed, through the Git host's API
)

// ChannelTypes lists every valid NotifyChannelSpec.Type, in the order of the schema's enum.
var ChannelTypes = []string{ChannelSlack, ChannelTeams, ChannelWebhook, ChannelCloudEvents, ChannelCommitStatus}

// Keys of a NotifyChannel's Secret.
const (
	ChannelAddressKey = "address" // the URL to post to (every type but commitstatus)
	ChannelHMACKey    = "hmacKey" // webhook: the key of the X-Signature HMAC-SHA256
	ChannelTokenKey   = "token"   // commitstatus: the Git host's API token
)

// CommitStatusContext is the context (GitHub), name (GitLab) or context (Gitea) of the status a
// commitstatus channel sets on the commit of a person's edit.
const CommitStatusContext = "gitops-reverser/proposal"

// NotifyChannel is where notifications go.
type NotifyChannel struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   NotifyChannelSpec   `json:"spec"`
	Status NotifyChannelStatus `json:"status,omitzero"`
}

// NotifyChannelSpec is the desired state of a NotifyChannel.
type NotifyChannelSpec struct {
	// Type is one of ChannelTypes.
	Type string `json:"type"`
	// SecretRef names a Secret in the channel's namespace: key ChannelAddressKey holds the URL
	// (a webhook's URL is a secret: whoever has it can post), ChannelHMACKey a webhook's signing
	// key, ChannelTokenKey a commitstatus channel's API token.
	SecretRef LocalReference `json:"secretRef"`
	// Provider is the Git host of a commitstatus channel (Provider* constants).
	Provider string `json:"provider,omitempty"`
	// APIURL is a commitstatus channel's API; empty derives it from the repository's URL.
	APIURL string `json:"apiURL,omitempty"`
	// Timeout bounds each send; 10s when unset, at most 1m.
	Timeout *metav1.Duration `json:"timeout,omitempty"`
	// PerMinute caps the messages sent a minute; beyond it messages are dropped and counted.
	// 60 when unset.
	PerMinute int32 `json:"perMinute,omitempty"`
	// Suspend sends nothing (and drops nothing) until it is false again.
	Suspend bool `json:"suspend,omitempty"`
}

// NotifyChannelStatus is what the daemon last saw of sending to the channel.
type NotifyChannelStatus struct {
	// Status holds the Ready condition: False with the last failure's reason while sends fail.
	Status `json:",inline"`
	// LastSentTime is when a message was last accepted by the channel.
	LastSentTime *metav1.Time `json:"lastSentTime,omitempty"`
	// Sent, Failed and Dropped count messages since the daemon started: accepted, refused after
	// every retry, and dropped over the cap or a full queue.
	Sent    int64 `json:"sent,omitempty"`
	Failed  int64 `json:"failed,omitempty"`
	Dropped int64 `json:"dropped,omitempty"`
}

// Severities a NotifyRule selects (NotifyRuleSpec.Severity).
const (
	SeverityInfo  = "info"  // every Event
	SeverityError = "error" // Warning Events only
)

// NotifyRule sends the daemon's Events that it selects to a NotifyChannel of its namespace.
type NotifyRule struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   NotifyRuleSpec   `json:"spec"`
	Status NotifyRuleStatus `json:"status,omitzero"`
}

// NotifyRuleSpec is the desired state of a NotifyRule.
type NotifyRuleSpec struct {
	// ChannelRef names the NotifyChannel, in the rule's namespace, that messages go to.
	ChannelRef LocalReference `json:"channelRef"`
	// Events selects by the Event's object kind and reasons; empty selects every Event.
	Events []NotifyEventSelector `json:"events,omitempty"`
	// Severity is SeverityInfo (every Event, the default) or SeverityError (Warnings only).
	Severity string `json:"severity,omitempty"`
	// Destinations selects the Events that concern these GitDestinations (by name, in each
	// namespace the rule reads); empty selects all.
	Destinations []string `json:"destinations,omitempty"`
	// Namespaces are the namespaces whose Events the rule reads; empty is the rule's own. Another
	// namespace's Event counts only when the GitDestination it concerns admits the rule's
	// namespace (its spec.accessPolicy), as a reference across namespaces does.
	Namespaces []string `json:"namespaces,omitempty"`
	// Include: when set, an Event's message must match one of these regular expressions.
	Include []string `json:"include,omitempty"`
	// Exclude: an Event whose message matches one of these regular expressions is not sent.
	Exclude []string `json:"exclude,omitempty"`
	// Summary leads every message of the rule (e.g. "production").
	Summary string `json:"summary,omitempty"`
	// DuplicateWindow: the same Event (object, reason, message and commit) is sent once within
	// it; 5m when unset.
	DuplicateWindow *metav1.Duration `json:"duplicateWindow,omitempty"`
	// Suspend sends nothing until it is false again.
	Suspend bool `json:"suspend,omitempty"`
}

// NotifyEventSelector selects Events by their object's kind and their reasons.
type NotifyEventSelector struct {
	// Kind is the kind of the Event's object: Proposal, SyncRun, GitDestination, WatchRule,
	// ClusterWatchRule, GitRepoConfig, Receiver or RemoteCluster.
	Kind string `json:"kind"`
	// Reasons are the Event reasons selected (Opened, Applied, PushFailing, ...); empty selects all.
	Reasons []string `json:"reasons,omitempty"`
}

// NotifyRuleStatus is what the daemon last saw of the rule.
type NotifyRuleStatus struct {
	// Status holds the Ready condition: False when the channel is missing or a regex is invalid.
	Status `json:",inline"`
	// LastMatchTime is when an Event last matched the rule.
	LastMatchTime *metav1.Time `json:"lastMatchTime,omitempty"`
}
