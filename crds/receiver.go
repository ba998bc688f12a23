package crds

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A Receiver turns a verified webhook of a Git host (or a CDEvent) into "reconcile these
// destinations now", instead of waiting for the poll interval. A GitRepoConfig with
// spec.receiver has one generated for it, owned by the GitRepoConfig.

// KindReceiver is the kind name of a Receiver.
const KindReceiver = "Receiver"

// Receivers is the Receiver resource for the dynamic client.
var Receivers = GroupVersion.WithResource("receivers")

// Receiver types: the webhook format a Receiver verifies and parses (ReceiverSpec.Type).
const (
	ReceiverGitHub      = "github"
	ReceiverGitLab      = "gitlab"
	ReceiverGitea       = "gitea"
	ReceiverBitbucket   = "bitbucket"
	ReceiverGeneric     = "generic"
	ReceiverGenericHMAC = "generic-hmac"
	ReceiverCDEvents    = "cdevents"
)

// ReceiverTypes lists every valid ReceiverSpec.Type, in the order of the schema's enum.
var ReceiverTypes = []string{
	ReceiverGitHub, ReceiverGitLab, ReceiverGitea, ReceiverBitbucket,
	ReceiverGeneric, ReceiverGenericHMAC, ReceiverCDEvents,
}

// ReceiverTokenKey is the key of the Receiver's Secret that holds the shared token.
const ReceiverTokenKey = "token"

// Outcomes of the last event a Receiver handled (ReceiverStatus.LastOutcome).
const (
	// OutcomeTriggered: the event was verified and triggered at least one reconcile.
	OutcomeTriggered = "Triggered"
	// OutcomeRefused: verification failed or the repository did not match; nothing triggered.
	OutcomeRefused = "Refused"
	// OutcomeFiltered: verified, but spec.events does not list the event; nothing triggered.
	OutcomeFiltered = "Filtered"
)

// Receiver verifies webhooks posted to its secret path and makes the listed destinations
// reconcile now.
type Receiver struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   ReceiverSpec   `json:"spec"`
	Status ReceiverStatus `json:"status,omitzero"`
}

// ReceiverSpec is the desired state of a Receiver.
type ReceiverSpec struct {
	// Type is the webhook format: one of ReceiverTypes.
	Type string `json:"type"`
	// Events lists the events that trigger; empty means every valid event of the type.
	Events []string `json:"events,omitempty"`
	// SecretRef names a Secret in the Receiver's namespace whose key ReceiverTokenKey holds the
	// shared token; required for every type.
	SecretRef LocalReference `json:"secretRef"`
	// Resources lists what to reconcile (at least one).
	Resources []ReceiverResource `json:"resources"`
	// Suspend refuses every event (503) until it is false again.
	Suspend bool `json:"suspend,omitempty"`
}

// ReceiverResource is one thing a Receiver reconciles: a GitDestination, or a GitRepoConfig,
// which means all of its destinations.
type ReceiverResource struct {
	// Kind is KindGitDestination or KindGitRepoConfig.
	Kind string `json:"kind"`
	// Name of the object.
	Name string `json:"name"`
	// Namespace of the object; defaults to the Receiver's. Use NamespaceOr to resolve it.
	Namespace string `json:"namespace,omitempty"`
}

// NamespaceOr returns the resource's namespace, or def when it is empty.
func (r ReceiverResource) NamespaceOr(def string) string {
	if r.Namespace == "" {
		return def
	}
	return r.Namespace
}

// ReceiverStatus is the observed state of a Receiver.
type ReceiverStatus struct {
	// Status holds the Ready condition and observedGeneration.
	Status `json:",inline"`
	// WebhookPath is the path to post to: "/hook/" + hex(sha256(token + name + namespace)).
	WebhookPath string `json:"webhookPath,omitempty"`
	// LastEventTime is when the last event was received.
	LastEventTime *metav1.Time `json:"lastEventTime,omitempty"`
	// LastEvent describes the last event, e.g. "push from https://git.example.com/org/repo.git:
	// triggered 2 destinations".
	LastEvent string `json:"lastEvent,omitempty"`
	// LastOutcome is OutcomeTriggered, OutcomeRefused or OutcomeFiltered.
	LastOutcome string `json:"lastOutcome,omitempty"`
}

// GeneratedReceiver asks the daemon to create a Receiver and its Secret for all destinations of a
// GitRepoConfig (GitRepoConfigSpec.Receiver).
type GeneratedReceiver struct {
	// Type is the webhook format: one of ReceiverTypes.
	Type string `json:"type"`
	// Events lists the events that trigger; empty means every valid event of the type.
	Events []string `json:"events,omitempty"`
}

// GeneratedReceiverStatus reports the Receiver generated for a GitRepoConfig
// (GitRepoConfigStatus.Receiver).
type GeneratedReceiverStatus struct {
	// Name of the Receiver, in the GitRepoConfig's namespace.
	Name string `json:"name,omitempty"`
	// SecretName is the Secret, in the same namespace, whose key ReceiverTokenKey holds the token.
	SecretName string `json:"secretName,omitempty"`
	// WebhookPath is the Receiver's status.webhookPath.
	WebhookPath string `json:"webhookPath,omitempty"`
}
