// Package receiver serves the webhooks Git hosts and CI systems send and turns them into
// triggers. Verify and ParseCDEvent check a delivery against the Receiver's secret (always with a
// constant-time compare) and read the event, its delivery id and every form of the repository it
// names; SameRepository decides whether such a reference names a destination's repoUrl, so a token
// leaked for one repository can never make the daemon fetch another; Deliveries refuses replays.
// The Controller turns Receiver objects (and the receivers GitRepoConfigs ask for) into an Index by
// webhook path and reports their status; the Handler looks a request up in that Index, verifies it
// and calls its Trigger for the matching destinations; Server listens.
package receiver
