// Package receiver verifies the webhooks Git hosts and CI systems send and turns them into triggers:
// Verify checks a delivery's signature or token against the Receiver's secret (always with a
// constant-time compare) and reads the event name, the delivery id and every form of the repository
// the payload names; SameRepository decides whether such a reference names a destination's repoUrl,
// so a token leaked for one repository can never make the daemon fetch another; Deliveries refuses
// replayed delivery ids; WebhookPath derives a Receiver's secret URL path. Everything here is a pure
// function of its inputs (Deliveries takes its clock): the HTTP server, the Receiver kind and the
// wiring to destinations live elsewhere.
package receiver
