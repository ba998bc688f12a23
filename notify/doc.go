// Package notify tells the people who must act what the daemon did and met: a proposal waiting
// for review, one applied or refused, a push failing, a destination not Ready. It owns the
// NotifyChannel and NotifyRule kinds' work: which Event a rule selects (and may see: its own
// namespace, or a destination's accessPolicy consent), the message of each channel type (Slack,
// Microsoft Teams, a signed generic webhook, CloudEvents, a commit status on the Git host), and
// sending it without ever being in the mirror's way: one bounded queue and one goroutine per
// channel, a timeout per send, retries with backoff, a cap per minute, duplicates sent once.
//
// It reads the daemon's own Events as they are recorded (controller.Events' tap), never the
// apiserver's, so a daemon that runs no NotifyRule spends nothing on it.
package notify
