package receiver

import (
	"net/http"
	"strings"

	"github.com/configbutler/gitops-reverser/crds"
)

// Types of receivers: the values of a Receiver's spec.type.
const (
	TypeGitHub      = crds.ReceiverGitHub
	TypeGitLab      = crds.ReceiverGitLab
	TypeGitea       = crds.ReceiverGitea
	TypeBitbucket   = crds.ReceiverBitbucket
	TypeGeneric     = crds.ReceiverGeneric
	TypeGenericHMAC = crds.ReceiverGenericHMAC
	TypeCDEvents    = crds.ReceiverCDEvents
)

// MaxBodyBytes caps a webhook body (3 MiB); larger → 413 by the server.
const MaxBodyBytes = 3 << 20

// Event is a verified delivery.
type Event struct {
	// Type is the receiver type.
	Type string
	// Name is the event name as the sender spells it: "push", "ping", "Push Hook",
	// "repo:refs_changed", ... ("" for a generic delivery without an X-Event header).
	Name string
	// Delivery is the delivery id for replay protection ("" when the sender sends none).
	Delivery string
	// Repository is every URL or path form of the repository the payload names (clone, ssh,
	// html/web, path_with_namespace, ...), empty when none (always for generic types).
	Repository []string
	// Ping is a ping or test delivery: answer 200, trigger nothing.
	Ping bool
}

// delivery is what a type's rules make of the headers, before the body is read.
type delivery struct {
	event     Event
	ping      bool
	repos     func(body []byte) ([]string, error) // nil: the body is not read
	needEvent bool                                // a git host always names its event
}

// Verify checks one delivery of a git-host or generic receiver against its token (constant-time
// compares: hmac.Equal) and extracts the event. events filters by event name, ignoring case
// (empty = every valid event); a ping is never filtered.
//
// The error is always a *Refusal. A filtered event is refused with status 200 and
// ReasonEventFiltered, and its Event is returned too so the caller can log what it skipped.
// A ping's body is read on a best-effort basis: one that does not parse still answers 200.
// cdevents deliveries are not handled here (ReasonUnknownType).
func Verify(typ string, token []byte, header http.Header, body []byte, events []string) (Event, error) {
	if len(token) == 0 {
		return Event{}, refuse(http.StatusServiceUnavailable, ReasonNoToken, "the receiver has no token")
	}
	if len(body) > MaxBodyBytes {
		return Event{}, refuse(http.StatusRequestEntityTooLarge, ReasonBodyTooLarge,
			"the body is over %d bytes", MaxBodyBytes)
	}
	d, r := authenticate(typ, token, header, body)
	if r != nil {
		return Event{}, r
	}
	ev := d.event
	ev.Type = typ
	ev.Ping = d.ping
	if d.needEvent && ev.Name == "" {
		return Event{}, refuse(http.StatusBadRequest, ReasonMissingEvent, "the delivery names no event")
	}
	if !ev.Ping && !wanted(ev.Name, events) {
		return ev, refuse(http.StatusOK, ReasonEventFiltered, "event %q is not in the receiver's events", short(ev.Name))
	}
	if d.repos == nil {
		return ev, nil
	}
	repos, err := d.repos(payload(header, body))
	switch {
	case err == nil:
		ev.Repository = repos
	case !ev.Ping:
		return Event{}, refuse(http.StatusBadRequest, ReasonUnparseable, "the body of event %q: %v", short(ev.Name), err)
	}
	return ev, nil
}

// authenticate applies the rules of one receiver type: it checks the signature or token and reads
// the event name, the delivery id and how to find the repository.
func authenticate(typ string, token []byte, h http.Header, body []byte) (delivery, *Refusal) {
	var (
		d delivery
		r *Refusal
	)
	switch typ {
	case TypeGitHub:
		r = checkPrefixedHMAC(h, "X-Hub-Signature-256", "sha256=", token, body)
		d = delivery{event: Event{Name: h.Get("X-GitHub-Event"), Delivery: h.Get("X-GitHub-Delivery")},
			repos: githubRepositories, needEvent: true}
		d.ping = d.event.Name == "ping"
	case TypeGitea:
		r = checkPrefixedHMAC(h, first(h, "X-Gitea-Signature", "X-Gogs-Signature"), "", token, body)
		d = delivery{event: Event{
			Name:     h.Get(first(h, "X-Gitea-Event", "X-Gogs-Event")),
			Delivery: h.Get(first(h, "X-Gitea-Delivery", "X-Gogs-Delivery")),
		}, repos: githubRepositories, needEvent: true}
	case TypeGitLab:
		r = checkToken(h.Get("X-Gitlab-Token"), token)
		d = delivery{event: Event{
			Name:     h.Get("X-Gitlab-Event"),
			Delivery: h.Get(first(h, "X-Gitlab-Event-UUID", "X-Request-Id")),
		}, repos: gitlabRepositories, needEvent: true}
	case TypeBitbucket:
		r = checkPrefixedHMAC(h, "X-Hub-Signature", "sha256=", token, body)
		d = delivery{event: Event{Name: h.Get("X-Event-Key"), Delivery: h.Get("X-Request-Id")},
			repos: bitbucketRepositories, needEvent: true}
		d.ping = d.event.Name == "diagnostics:ping"
	case TypeGenericHMAC:
		r = checkGenericHMAC(h.Get("X-Signature"), token, body)
		d = delivery{event: Event{Name: h.Get("X-Event"), Delivery: h.Get("X-Request-Id")}}
	case TypeGeneric:
		// The secret path is the credential: nothing in the request to check.
		d = delivery{event: Event{Name: h.Get("X-Event"), Delivery: h.Get("X-Request-Id")}}
	default:
		r = refuse(http.StatusInternalServerError, ReasonUnknownType, "receiver type %q is not verified here", typ)
	}
	return d, r
}

// namesRepository reports whether every event of a receiver type names its repository: the Git
// hosts' payloads always do, so one that names none is refused rather than trusted for every
// destination. Generic deliveries never name one; a CDEvent names one only for some event types.
func namesRepository(typ string) bool {
	switch typ {
	case TypeGitHub, TypeGitLab, TypeGitea, TypeBitbucket:
		return true
	}
	return false
}

// first is the first of names present in h, or names[0] when none is (so a refusal names it).
func first(h http.Header, names ...string) string {
	for _, n := range names {
		if h.Get(n) != "" {
			return n
		}
	}
	return names[0]
}

// wanted reports whether the events filter lets name through.
func wanted(name string, events []string) bool {
	if len(events) == 0 {
		return true
	}
	for _, e := range events {
		if strings.EqualFold(e, name) {
			return true
		}
	}
	return false
}

// short caps a sender's value quoted in a refusal's message.
func short(s string) string {
	const limit = 64
	if len(s) <= limit {
		return s
	}
	return s[:limit] + "…"
}
