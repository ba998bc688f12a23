// Package ui is the operator page: what people would rather look at than read with kubectl. It
// shows each GitRepoConfig and GitDestination with its Ready condition and Git progress, each
// RemoteCluster (when there is any) with what the daemon last saw of it, the last SyncRuns of
// each destination, and the Proposals waiting for review with their diffs, and lets a reviewer
// approve or reject one.
//
// The page is rendered on the server with html/template; its script and style are embedded and
// served from the same origin under a strict Content-Security-Policy. Who is looking is decided
// by Kubernetes, never by the page: the bearer token a person signs in with is checked with a
// TokenReview, each namespace is shown only if a SubjectAccessReview says that user may list
// Proposals there, and a decision is patched onto the Proposal with the person's own token, so
// RBAC, admission and write-back's own check of the approver all apply to that person.
package ui
