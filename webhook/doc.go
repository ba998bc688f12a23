// Package webhook is the daemon's HTTPS side. Its admission handler records who changed an
// object (it always allows; it never decides anything), the correlation Store hands that name to
// the watch when the same change shows up there, and Registration keeps the cluster's
// ValidatingWebhookConfiguration pointing at the server with exactly the watched resources. For
// write-back the handler also records who set each Proposal's spec.decision (Decisions), so an
// approval is honoured only when its approver may make the change.
package webhook
