// Package webhook is the daemon's HTTPS side. Its admission handler records who changed an
// object (it always allows; it never decides anything), the correlation Store hands that name to
// the watch when the same change shows up there, and Registration keeps the cluster's
// ValidatingWebhookConfiguration pointing at the server with exactly the watched resources.
package webhook
