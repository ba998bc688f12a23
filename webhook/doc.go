// Package webhook is the daemon's admission side, served over TLS by httpserver with this
// package's ServerLimits. Its admission handler records who changed an object (it always allows;
// it never decides anything), the correlation Store hands that name to the watch when the same
// change shows up there, and Registration keeps the cluster's ValidatingWebhookConfiguration
// pointing at the server with exactly the watched resources. Its certificates are self-managed
// (SelfManaged) or httpserver.FileCerts. For write-back the handler also records who set each
// Proposal's spec.decision (Decisions), so an approval is honoured only when its approver may make
// the change. With several replicas, the one the apiserver calls hands each record to the others
// before it answers (Peers), so whichever replica's watch sees the change finds who made it.
package webhook
