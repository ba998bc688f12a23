package notify

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"

	"github.com/configbutler/gitops-reverser/crds"
)

// CDEvents (spec v0.4.1, https://cdevents.dev) describes a Proposal's life as a "change": a
// change to a repository's content under review. The versions are those of the spec's v0.4.1
// schemas (change.created moved to 0.3.0 in v0.4; merged and abandoned are 0.2.0), the version
// this daemon's own cdevents Receiver is tested with (testdata/cdevents/v0.4.1).
const (
	cdeventsSpecVersion    = "0.4.1"
	cdeventChangeCreated   = "dev.cdevents.change.created.0.3.0"
	cdeventChangeMerged    = "dev.cdevents.change.merged.0.2.0"
	cdeventChangeAbandoned = "dev.cdevents.change.abandoned.0.2.0"
)

// ownEventTypePrefix starts the type of every other Event's CloudEvent: no CDEvents type fits a
// push failing, a destination not Ready or a proposal held for a missing right (CDEvents has no
// subject for a mirror or its destination, and a change that waits is neither merged nor
// abandoned), so those are our own types, ai.configbutler.gitops-reverser.<reason>.v1.
const ownEventTypePrefix = "ai.configbutler.gitops-reverser."

// cdeventAbandoned are the reasons of a Proposal's Events that end it without applying it:
// rejected by a reviewer, ignored, stale (the live object moved), superseded, or never the
// daemon's. A refusal that leaves it pending (an approver without the right, a missing
// ServiceAccount, a failed apply to retry) does not abandon the change.
var cdeventAbandoned = map[string]bool{
	"Rejected":          true,
	"Ignored":           true,
	"Stale":             true,
	"Superseded":        true,
	"NotOpenedByDaemon": true,
}

// cloudEvents posts CloudEvents in HTTP binary mode.
type cloudEvents struct {
	url, source string
	client      *http.Client
}

// NewCloudEvents returns a Sender that posts each Notice to url as a CloudEvent in HTTP binary
// mode (ce-* headers, JSON data) with client (nil: http.DefaultClient). source is the events'
// source, e.g. "gitops-reverser/<namespace>/<channel>". A Proposal opened, applied or ended
// unapplied is a CDEvents change event whose customData is the Notice; any other Event is of type
// ai.configbutler.gitops-reverser.<reason lowercased>.v1 with the Notice as its data.
func NewCloudEvents(url, source string, client *http.Client) Sender {
	return &cloudEvents{url: url, source: source, client: client}
}

// Send posts n as one CloudEvent.
func (c *cloudEvents) Send(ctx context.Context, n Notice) error {
	ev, err := c.event(n)
	if err != nil {
		return &SendError{Err: fmt.Errorf("building the CloudEvent for %s: %w", redactURL(c.url), err)}
	}
	req, err := newRequest(ctx, c.url, bytes.NewReader(ev.Data()))
	if err != nil {
		return err
	}
	binaryHeaders(req.Header, &ev)
	return send(c.client, req)
}

// binaryHeaders writes ev's attributes as the headers of the HTTP binding's binary mode: ce-
// and the attribute's name, and Content-Type for datacontenttype. (The SDK's HTTP protocol would
// write the same; it is kept out of the binary, which it would grow by its client and transport.)
// Every value set here is printable ASCII without a '%' (hex ids, URLs and paths of names, RFC
// 3339 times), which the binding carries as it is.
func binaryHeaders(h http.Header, ev *event.Event) {
	h.Set("ce-specversion", ev.SpecVersion())
	h.Set("ce-id", ev.ID())
	h.Set("ce-source", ev.Source())
	h.Set("ce-type", ev.Type())
	h.Set("ce-time", ev.Time().UTC().Format(time.RFC3339Nano))
	if s := ev.Subject(); s != "" {
		h.Set("ce-subject", s)
	}
	h.Set("Content-Type", ev.DataContentType())
}

// event builds n's CloudEvent. Its id is a hash of the source and the Notice, so that a retry of
// the same Notice carries the same id and a receiver can drop it as a replay.
func (c *cloudEvents) event(n Notice) (event.Event, error) {
	notice, err := json.Marshal(n)
	if err != nil {
		return event.Event{}, fmt.Errorf("encoding the notice: %w", err)
	}
	sum := sha256.Sum256(append([]byte(c.source+"\x00"), notice...))
	id := hex.EncodeToString(sum[:16])
	when := n.Time
	if when.IsZero() {
		when = time.Now()
	}
	typ := cdeventType(n)
	var data any = json.RawMessage(notice)
	if typ == "" {
		typ = ownEventTypePrefix + typeWord(n.Reason) + ".v1"
	} else {
		data = changeEvent(n, typ, id, c.source, when)
	}
	ev := event.New()
	ev.SetID(id)
	ev.SetSource(c.source)
	ev.SetType(typ)
	ev.SetTime(when)
	if subject := subjectOf(n.Object); subject != "" {
		ev.SetSubject(subject)
	}
	if err := ev.SetData(event.ApplicationJSON, data); err != nil {
		return event.Event{}, fmt.Errorf("encoding the data: %w", err)
	}
	if err := ev.Validate(); err != nil {
		return event.Event{}, fmt.Errorf("invalid CloudEvent: %w", err)
	}
	return ev, nil
}

// cdeventType is the CDEvents type of n, or "" when none fits.
func cdeventType(n Notice) string {
	if n.Object.Kind != crds.KindProposal {
		return ""
	}
	switch {
	case n.Reason == "Opened":
		return cdeventChangeCreated
	case n.Reason == "Applied":
		return cdeventChangeMerged
	case cdeventAbandoned[n.Reason]:
		return cdeventChangeAbandoned
	}
	return ""
}

// cdevent is a CDEvent of the change subject (spec v0.4.1): the context and subject every
// CDEvent has, and the Notice as customData.
type cdevent struct {
	Context               cdeventContext `json:"context"`
	Subject               cdeventSubject `json:"subject"`
	CustomData            Notice         `json:"customData"`
	CustomDataContentType string         `json:"customDataContentType"`
}

// cdeventContext is a CDEvent's context; Version is the spec's version (specversion from v0.5).
type cdeventContext struct {
	Version   string `json:"version"`
	ID        string `json:"id"`
	Source    string `json:"source"`
	Type      string `json:"type"`
	Timestamp string `json:"timestamp"`
}

// cdeventSubject is the change a CDEvent is about: the Proposal.
type cdeventSubject struct {
	ID      string        `json:"id"`
	Source  string        `json:"source"`
	Type    string        `json:"type"` // always "change"
	Content changeContent `json:"content"`
}

// changeContent is a change's content; only change.created has a description.
type changeContent struct {
	Description string            `json:"description,omitempty"`
	Repository  *changeRepository `json:"repository,omitempty"`
}

// changeRepository names the repository the change is proposed to (its URL), which a cdevents
// Receiver matches against its destinations.
type changeRepository struct {
	ID string `json:"id"`
}

// changeEvent is n as a CDEvent of type typ, with the CloudEvent's id and source.
func changeEvent(n Notice, typ, id, source string, when time.Time) cdevent {
	ce := cdevent{
		Context: cdeventContext{
			Version:   cdeventsSpecVersion,
			ID:        id,
			Source:    source,
			Type:      typ,
			Timestamp: when.UTC().Format(time.RFC3339Nano),
		},
		Subject:               cdeventSubject{ID: subjectOf(n.Object), Source: source, Type: "change"},
		CustomData:            n,
		CustomDataContentType: event.ApplicationJSON,
	}
	if typ == cdeventChangeCreated {
		ce.Subject.Content.Description = n.Message
	}
	if n.Repository != "" {
		ce.Subject.Content.Repository = &changeRepository{ID: n.Repository}
	}
	return ce
}

// subjectOf names an object as a CloudEvent's subject: Kind/namespace/name, or Kind/name.
func subjectOf(r Ref) string {
	parts := make([]string, 0, 3)
	for _, p := range []string{r.Kind, r.Namespace, r.Name} {
		if p != "" {
			parts = append(parts, p)
		}
	}
	return strings.Join(parts, "/")
}

// typeWord is an Event's reason as a word of an event type: lowercased, letters and digits only.
func typeWord(reason string) string {
	w := strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			return r
		case r >= 'A' && r <= 'Z':
			return r + 'a' - 'A'
		}
		return -1
	}, reason)
	if w == "" {
		return "event"
	}
	return w
}
