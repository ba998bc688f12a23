package receiver

import "fmt"

// Reasons a delivery is refused. They are stable words, used as a metric label, so they never
// carry anything from the request.
const (
	// ReasonMissingSignature: the signature header is absent or empty.
	ReasonMissingSignature = "MissingSignature"
	// ReasonBadSignature: the signature is malformed (prefix, hex) or does not match the body.
	ReasonBadSignature = "BadSignature"
	// ReasonUnsupportedAlgorithm: a generic-hmac signature names an algorithm other than
	// sha1, sha256 or sha512.
	ReasonUnsupportedAlgorithm = "UnsupportedAlgorithm"
	// ReasonMissingToken: GitLab's X-Gitlab-Token header is absent or empty.
	ReasonMissingToken = "MissingToken"
	// ReasonBadToken: GitLab's X-Gitlab-Token header is not the token.
	ReasonBadToken = "BadToken"
	// ReasonMissingEvent: a git host's event header is absent.
	ReasonMissingEvent = "MissingEvent"
	// ReasonUnparseable: the body of an event is not the JSON the host sends.
	ReasonUnparseable = "Unparseable"
	// ReasonEventFiltered: the event is valid but not one the Receiver's events list asks for.
	// Its status is 200: the sender did nothing wrong, the daemon just triggers nothing.
	ReasonEventFiltered = "EventFiltered"
	// ReasonBodyTooLarge: the body is over MaxBodyBytes.
	ReasonBodyTooLarge = "BodyTooLarge"
	// ReasonNoToken: the Receiver has no token (its Secret is empty), so nothing can be verified.
	ReasonNoToken = "NoToken"
	// ReasonUnknownType: the receiver type is not one Verify handles.
	ReasonUnknownType = "UnknownType"
)

// Refusal is why a delivery is refused, with the HTTP status to answer.
type Refusal struct {
	// Status is the HTTP status code to answer with.
	Status int
	// Reason is one of the Reason* constants.
	Reason string
	// Message says what was wrong, for the response body and the log.
	Message string
}

// Error implements error.
func (r *Refusal) Error() string {
	return fmt.Sprintf("delivery refused (%d %s): %s", r.Status, r.Reason, r.Message)
}

func refuse(status int, reason, format string, args ...any) *Refusal {
	return &Refusal{Status: status, Reason: reason, Message: fmt.Sprintf(format, args...)}
}
