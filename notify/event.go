package notify

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// noticeOf is what an Event says, before anything is looked up; home is the daemon's namespace,
// the scope of a cluster-scoped object's Events.
func noticeOf(ev *corev1.Event, home string) *Notice {
	o := ev.InvolvedObject
	n := &Notice{
		Time: ev.LastTimestamp.Time, Severity: SeverityInfo, Reason: ev.Reason, Message: ev.Message,
		Object: Ref{APIVersion: o.APIVersion, Kind: o.Kind, Namespace: o.Namespace, Name: o.Name},
		scope:  o.Namespace,
	}
	if n.Time.IsZero() {
		n.Time = ev.EventTime.Time
	}
	if ev.Type == corev1.EventTypeWarning {
		n.Severity = SeverityError
	}
	if n.scope == "" {
		n.scope = home
	}
	if o.Kind == "GitDestination" {
		n.Destination = o.Name
	}
	return n
}

// dedupeKey is what makes two notices the same for a rule's duplicate window: the object, the
// reason, the message and the commit.
func (n *Notice) dedupeKey() string {
	return strings.Join([]string{n.Object.Kind, n.Object.Namespace, n.Object.Name, n.Reason, n.Message, n.Commit}, "\x00")
}
