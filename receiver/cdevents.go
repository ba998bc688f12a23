package receiver

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/cloudevents/sdk-go/v2/binding"
)

// cdeventsTypePrefix starts every CDEvents type; any other CloudEvent is not a CDEvent.
const cdeventsTypePrefix = "dev.cdevents."

// Reasons a CDEvents delivery is refused (CDEventRefusal.Reason), reported
// to the sender and counted.
const (
	cdeventUnparseable   = "Unparseable"
	cdeventMissingField  = "MissingField"
	cdeventTypeMismatch  = "TypeMismatch"
	cdeventNotACDEvent   = "NotACDEvent"
	cdeventEventFiltered = "EventFiltered"
)

// CDEvent is a verified CDEvents delivery.
type CDEvent struct {
	// ID, Type and Source are the CDEvent's context.id, context.type
	// (e.g. dev.cdevents.change.merged.0.2.0) and context.source.
	ID, Type, Source string
	// SubjectID is subject.id.
	SubjectID string
	// Repository lists the repository references the event names (URLs,
	// project paths), for the repository check; empty when it names none.
	Repository []string
}

// CDEventRefusal says why a CDEvents delivery triggers nothing, and with
// which HTTP status to answer. Status 200 means the event was valid but
// not wanted.
type CDEventRefusal struct {
	Status  int
	Reason  string
	Message string

	err error // the parser's error behind the refusal, if any
}

// Error implements error.
func (r *CDEventRefusal) Error() string {
	return fmt.Sprintf("cdevent refused (%d %s): %s", r.Status, r.Reason, r.Message)
}

// Unwrap returns the parser's error behind the refusal, if any.
func (r *CDEventRefusal) Unwrap() error { return r.err }

// cdeventRefuseErr builds a refusal caused by err, which it wraps.
func cdeventRefuseErr(status int, reason, what string, err error) *CDEventRefusal {
	return &CDEventRefusal{Status: status, Reason: reason, Message: fmt.Sprintf("%s: %v", what, err), err: err}
}

// cdeventRefuse builds the refusal ParseCDEvent returns.
func cdeventRefuse(status int, reason, format string, args ...any) *CDEventRefusal {
	return &CDEventRefusal{Status: status, Reason: reason, Message: fmt.Sprintf(format, args...)}
}

// cdeventBody is the part of a CDEvent the receiver checks. A missing
// string field and an empty one read alike (both refused); content stays
// raw so that its shape (an object) can be checked without knowing the
// event type.
type cdeventBody struct {
	Context *struct {
		ID          string `json:"id"`
		Type        string `json:"type"`
		Source      string `json:"source"`
		Timestamp   string `json:"timestamp"`
		SpecVersion string `json:"specversion"`
		// Version is the spec version's name up to CDEvents v0.4
		// (renamed specversion in v0.5); either one is accepted.
		Version string `json:"version"`
	} `json:"context"`
	Subject *struct {
		ID      string          `json:"id"`
		Content json.RawMessage `json:"content"`
	} `json:"subject"`
}

// ParseCDEvent reads a CloudEvents HTTP request whose body the caller has
// already read (and limited) into body, in binary mode (ce-* headers, the
// CDEvent as data) or structured mode (Content-Type
// application/cloudevents+json), and checks the CDEvent it carries: its
// required context and subject fields are present, its context.type equals
// the CloudEvent's type and starts with "dev.cdevents.". events filters by
// type as TypeMatches does; empty accepts every type.
//
// Authentication is not checked here: the server verifies the token or HMAC
// before calling. Every error is a *CDEventRefusal.
func ParseCDEvent(r *http.Request, body []byte, events []string) (CDEvent, error) {
	if isCloudEventBatch(r.Header) {
		return CDEvent{}, cdeventRefuse(http.StatusBadRequest, cdeventUnparseable, "batched CloudEvents are not accepted")
	}
	ev, err := binding.ToEvent(r.Context(), newRequestMessage(r.Header, body))
	if err != nil {
		if errors.Is(err, binding.ErrUnknownEncoding) {
			return CDEvent{}, cdeventRefuse(http.StatusBadRequest, cdeventUnparseable,
				"not a CloudEvent: neither ce-specversion headers nor Content-Type application/cloudevents+json")
		}
		return CDEvent{}, cdeventRefuseErr(http.StatusBadRequest, cdeventUnparseable, "reading the CloudEvent", err)
	}
	if err := ev.Validate(); err != nil {
		return CDEvent{}, cdeventRefuseErr(http.StatusBadRequest, cdeventUnparseable, "invalid CloudEvent", err)
	}
	if !strings.HasPrefix(ev.Type(), cdeventsTypePrefix) {
		return CDEvent{}, cdeventRefuse(http.StatusBadRequest, cdeventNotACDEvent,
			"CloudEvent type %q does not start with %q", ev.Type(), cdeventsTypePrefix)
	}
	data := bytes.TrimSpace(ev.Data())
	if len(data) == 0 {
		return CDEvent{}, cdeventRefuse(http.StatusBadRequest, cdeventMissingField, "the CloudEvent carries no data")
	}
	cde, err := checkCDEvent(data)
	if err != nil {
		return CDEvent{}, err
	}
	if cde.Type != ev.Type() {
		return CDEvent{}, cdeventRefuse(http.StatusBadRequest, cdeventTypeMismatch,
			"context.type %q differs from the CloudEvent type %q", cde.Type, ev.Type())
	}
	if !cdeventTypeWanted(events, cde.Type) {
		return CDEvent{}, cdeventRefuse(http.StatusOK, cdeventEventFiltered, "event type %q is not in the receiver's events", cde.Type)
	}
	return cde, nil
}

// checkCDEvent decodes a CDEvent and checks the fields every CDEvent must
// carry, whatever its type: context id, type, source, timestamp and spec
// version, subject id, and subject content (an object).
func checkCDEvent(data []byte) (CDEvent, error) {
	if data[0] != '{' {
		return CDEvent{}, cdeventRefuse(http.StatusBadRequest, cdeventUnparseable, "the CloudEvent data is not a JSON object")
	}
	var b cdeventBody
	if err := json.Unmarshal(data, &b); err != nil {
		return CDEvent{}, cdeventRefuseErr(http.StatusBadRequest, cdeventUnparseable, "decoding the CDEvent", err)
	}
	if b.Context == nil {
		return CDEvent{}, cdeventRefuse(http.StatusBadRequest, cdeventMissingField, "context is missing")
	}
	c := b.Context
	for _, f := range []struct{ name, value string }{
		{"context.id", c.ID},
		{"context.type", c.Type},
		{"context.source", c.Source},
		{"context.timestamp", c.Timestamp},
		{"context.specversion", c.SpecVersion + c.Version},
	} {
		if f.value == "" {
			return CDEvent{}, cdeventRefuse(http.StatusBadRequest, cdeventMissingField, "%s is missing or empty", f.name)
		}
	}
	if !strings.HasPrefix(c.Type, cdeventsTypePrefix) {
		return CDEvent{}, cdeventRefuse(http.StatusBadRequest, cdeventNotACDEvent,
			"context.type %q does not start with %q", c.Type, cdeventsTypePrefix)
	}
	if b.Subject == nil {
		return CDEvent{}, cdeventRefuse(http.StatusBadRequest, cdeventMissingField, "subject is missing")
	}
	if b.Subject.ID == "" {
		return CDEvent{}, cdeventRefuse(http.StatusBadRequest, cdeventMissingField, "subject.id is missing or empty")
	}
	var content map[string]json.RawMessage
	if raw := bytes.TrimSpace(b.Subject.Content); len(raw) == 0 || raw[0] != '{' || json.Unmarshal(raw, &content) != nil {
		return CDEvent{}, cdeventRefuse(http.StatusBadRequest, cdeventMissingField, "subject.content is missing or not an object")
	}
	return CDEvent{
		ID:         c.ID,
		Type:       c.Type,
		Source:     c.Source,
		SubjectID:  b.Subject.ID,
		Repository: cdeventRepositoryRefs(c.Type, content),
	}, nil
}

// cdeventRepositoryRefs collects the repository references an event names: the
// subject.content.repository object of change and branch events, or, for
// repository events (whose subject is the repository), the content's URLs
// and owner/name path. Values that are not strings are skipped: the
// reference is only a hint for the repository check, never required.
func cdeventRepositoryRefs(typ string, content map[string]json.RawMessage) []string {
	var refs []string
	add := func(fields map[string]json.RawMessage, keys ...string) {
		for _, k := range keys {
			var s string
			if json.Unmarshal(fields[k], &s) == nil && s != "" {
				refs = append(refs, s)
			}
		}
	}
	var repo map[string]json.RawMessage
	if json.Unmarshal(content["repository"], &repo) == nil && repo != nil {
		add(repo, "id", "source", "url", "uri", "viewUrl")
	}
	if strings.HasPrefix(typ, cdeventsTypePrefix+"repository.") {
		add(content, "uri", "url", "viewUrl")
		var owner, name string
		_ = json.Unmarshal(content["owner"], &owner)
		_ = json.Unmarshal(content["name"], &name)
		switch {
		case owner != "" && name != "":
			refs = append(refs, owner+"/"+name)
		case name != "":
			refs = append(refs, name)
		}
	}
	return refs
}

// cdeventTypeWanted reports whether typ passes the events filter; an empty filter
// passes every type.
func cdeventTypeWanted(events []string, typ string) bool {
	if len(events) == 0 {
		return true
	}
	for _, f := range events {
		if TypeMatches(f, typ) {
			return true
		}
	}
	return false
}

// TypeMatches reports whether a CDEvents type matches a filter entry. An
// entry names a type with or without its version suffix:
// "dev.cdevents.change.merged" matches "dev.cdevents.change.merged.0.2.0",
// while "dev.cdevents.change.merged.0.2.0" matches only itself. An entry
// never matches a longer type name ("dev.cdevents.change" does not match
// "dev.cdevents.change.merged.0.2.0").
func TypeMatches(filter, typ string) bool {
	if filter == typ {
		return true
	}
	rest, ok := strings.CutPrefix(typ, filter+".")
	return ok && isCDEventVersion(rest)
}

// isCDEventVersion reports whether s is a dotted version such as "0.2.0" or
// "0.6.0-draft": it starts with a digit and has three dot-separated parts.
func isCDEventVersion(s string) bool {
	parts := strings.Split(s, ".")
	if len(parts) != 3 {
		return false
	}
	for _, p := range parts {
		if p == "" || p[0] < '0' || p[0] > '9' {
			return false
		}
	}
	return true
}
