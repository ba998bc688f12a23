package notify

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/configbutler/gitops-reverser/crds"
	"github.com/configbutler/gitops-reverser/kube"
)

// Ready reasons of the kinds.
const (
	ReasonSending         = "Sending"         // a channel that sent, or has not had to send yet
	ReasonSendFailing     = "SendFailing"     // a channel whose last message failed after every retry
	ReasonSecretNotFound  = "SecretNotFound"  // a channel's Secret is missing, unreadable, or lacks a key
	ReasonInvalidChannel  = "InvalidChannel"  // a channel's address or settings cannot be used
	ReasonSuspended       = "Suspended"       // spec.suspend
	ReasonMatching        = "Matching"        // a rule that matches Events
	ReasonChannelNotFound = "ChannelNotFound" // a rule's channel is missing
	ReasonInvalidRegexp   = "InvalidRegexp"   // a rule's include or exclude does not compile
)

// reconcileChannel builds, rebuilds or stops the outbox of the channel namespace/name and writes
// its status; statusOnly writes only the status of its sending.
func (n *Notifier) reconcileChannel(ctx context.Context, name string, statusOnly bool) (time.Duration, error) {
	obj, exists, err := n.channels.GetStore().GetByKey(name)
	if err != nil {
		return 0, err
	}
	if !exists {
		n.stopOutbox(name)
		namespace, channel, _ := strings.Cut(name, "/")
		n.queueRulesOf(namespace, channel)
		return 0, nil
	}
	ch, err := crds.FromUnstructured[crds.NotifyChannel](obj.(*unstructured.Unstructured))
	if err != nil {
		return 0, err
	}
	if statusOnly {
		return 0, n.writeChannelStatus(ctx, ch, "", "")
	}
	n.queueRulesOf(ch.Namespace, ch.Name) // their Ready says whether their channel exists
	reason, message := ReasonSuspended, "spec.suspend is true: nothing is sent"
	if ch.Spec.Suspend {
		n.stopOutbox(name)
	} else {
		reason, message = n.startOutbox(ctx, ch)
	}
	return secretRecheck, n.writeChannelStatus(ctx, ch, reason, message)
}

// queueRulesOf queues the rules of namespace that send to channel.
func (n *Notifier) queueRulesOf(namespace, channel string) {
	for _, obj := range n.rules.GetStore().List() {
		u := obj.(*unstructured.Unstructured)
		if ref, _, _ := unstructured.NestedString(u.Object, "spec", "channelRef", "name"); u.GetNamespace() == namespace && ref == channel {
			n.ctl.Add(kindRule + "/" + namespace + "/" + u.GetName())
		}
	}
}

// startOutbox makes sure the channel's outbox runs with its current spec and Secret; it returns
// the Ready reason and message when it cannot.
func (n *Notifier) startOutbox(ctx context.Context, ch *crds.NotifyChannel) (reason, message string) {
	key := ch.Namespace + "/" + ch.Name
	secret, err := kube.For(n.cfg.Dynamic, kube.Secrets, ch.Namespace).Get(ctx, ch.Spec.SecretRef.Name, metav1.GetOptions{})
	if err != nil {
		n.stopOutbox(key)
		return ReasonSecretNotFound, fmt.Sprintf("Secret %s/%s: %v", ch.Namespace, ch.Spec.SecretRef.Name, err)
	}
	version := versionOf(ch.Spec, secret.Data)
	n.mu.Lock()
	current := n.outboxes[key]
	n.mu.Unlock()
	if current != nil && current.version == version {
		return "", ""
	}
	sender, err := n.senderFor(ch, secret.Data)
	if err != nil {
		n.stopOutbox(key)
		reason := ReasonInvalidChannel
		if _, missing := err.(missingKey); missing {
			reason = ReasonSecretNotFound
		}
		return reason, err.Error()
	}
	how := sending{sender: sender, timeout: timeoutOf(ch.Spec), perMinute: perMinuteOf(ch.Spec)}
	if current != nil && current.box.typ == ch.Spec.Type {
		current.box.settings.Store(&how) // the queue and its counts go on
		n.mu.Lock()
		current.version = version
		n.mu.Unlock()
		return "", ""
	}
	n.stopOutbox(key)
	box := newOutbox(key, ch.Spec.Type, how, n.cfg.Metrics)
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.runCtx == nil {
		return "", "" // not running: nothing to start
	}
	boxCtx, cancel := context.WithCancel(n.runCtx)
	n.outboxes[key] = &running{box: box, version: version, cancel: cancel}
	n.wg.Go(func() { box.run(boxCtx) })
	return "", ""
}

func (n *Notifier) stopOutbox(key string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if r := n.outboxes[key]; r != nil {
		r.cancel()
		delete(n.outboxes, key)
	}
}

// versionOf identifies what an outbox is built from: a changed spec or Secret rebuilds it.
func versionOf(spec crds.NotifyChannelSpec, data map[string][]byte) string {
	h := sha256.New()
	b, _ := json.Marshal(spec)
	h.Write(b)
	for _, k := range slices.Sorted(maps.Keys(data)) {
		_, _ = fmt.Fprintf(h, "\x00%s\x00%x", k, sha256.Sum256(data[k]))
	}
	return hex.EncodeToString(h.Sum(nil))
}

func timeoutOf(spec crds.NotifyChannelSpec) time.Duration {
	if spec.Timeout == nil || spec.Timeout.Duration <= 0 {
		return DefaultTimeout
	}
	return min(spec.Timeout.Duration, MaxTimeout)
}

func perMinuteOf(spec crds.NotifyChannelSpec) int {
	if spec.PerMinute <= 0 {
		return DefaultPerMinute
	}
	return int(spec.PerMinute)
}

// writeChannelStatus writes the channel's Ready condition (reason "" takes it from its sending)
// and its counts, when they changed.
func (n *Notifier) writeChannelStatus(ctx context.Context, ch *crds.NotifyChannel, reason, message string) error {
	st := map[string]any{"observedGeneration": ch.Generation}
	n.mu.Lock()
	r := n.outboxes[ch.Namespace+"/"+ch.Name]
	n.mu.Unlock()
	same := true // the counts are those the status says
	if r != nil {
		s, _ := r.box.state()
		st["sent"], st["failed"], st["dropped"] = s.sent, s.failed, s.dropped
		old := ch.Status
		same = old.Sent == s.sent && old.Failed == s.failed && old.Dropped == s.dropped
		if !s.lastSent.IsZero() {
			st["lastSentTime"] = metav1.NewTime(s.lastSent.Truncate(time.Second))
		}
		if reason == "" {
			reason, message = ReasonSending, "messages go to the channel's "+describe(ch.Spec.Type)
			if s.lastErr != "" {
				reason, message = ReasonSendFailing, "the last message failed after every retry: "+s.lastErr
			}
		}
	}
	if reason == "" {
		return nil // no outbox (stopped meanwhile): the channel's own reconcile says why
	}
	cond := metav1.Condition{Type: crds.ConditionReady, Status: metav1.ConditionFalse, Reason: reason, Message: message, ObservedGeneration: ch.Generation}
	if reason == ReasonSending {
		cond.Status = metav1.ConditionTrue
	}
	return n.writeStatus(ctx, crds.NotifyChannels, crds.KindNotifyChannel, ch, ch.Status.Conditions, cond, st, same)
}

// describe names a channel type for a message.
func describe(typ string) string {
	switch typ {
	case crds.ChannelCommitStatus:
		return "Git host, as commit statuses"
	case crds.ChannelCloudEvents:
		return "CloudEvents sink"
	}
	return typ + " webhook"
}

// reconcileRule compiles every rule again (a rule's change may be its channel's too) and writes
// this rule's status.
func (n *Notifier) reconcileRule(ctx context.Context, name string) error {
	var ready []*rule
	var this *crds.NotifyRule
	var thisErr error
	for _, obj := range n.rules.GetStore().List() {
		r, err := crds.FromUnstructured[crds.NotifyRule](obj.(*unstructured.Unstructured))
		if err != nil {
			continue
		}
		c, err := compile(r)
		if r.Namespace+"/"+r.Name == name {
			this, thisErr = r, err
		}
		if err == nil && !r.Spec.Suspend {
			ready = append(ready, c)
		}
	}
	n.compiled.Store(&ready)
	if this == nil {
		return nil
	}
	cond := metav1.Condition{Type: crds.ConditionReady, Status: metav1.ConditionTrue, Reason: ReasonMatching,
		Message: "Events it selects go to NotifyChannel " + this.Spec.ChannelRef.Name, ObservedGeneration: this.Generation}
	_, channel, _ := n.channels.GetStore().GetByKey(this.Namespace + "/" + this.Spec.ChannelRef.Name)
	switch {
	case thisErr != nil:
		cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, ReasonInvalidRegexp, thisErr.Error()
	case this.Spec.Suspend:
		cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, ReasonSuspended, "spec.suspend is true: nothing is sent"
	case !channel:
		cond.Status, cond.Reason = metav1.ConditionFalse, ReasonChannelNotFound
		cond.Message = "no NotifyChannel " + this.Spec.ChannelRef.Name + " in namespace " + this.Namespace + ": nothing is sent until it exists"
	}
	st := map[string]any{"observedGeneration": this.Generation}
	same := true // the last match is the one the status says
	if at := n.lastMatch(name); !at.IsZero() {
		t := metav1.NewTime(at.Truncate(time.Second))
		st["lastMatchTime"] = t
		same = this.Status.LastMatchTime != nil && this.Status.LastMatchTime.Equal(&t)
	}
	return n.writeStatus(ctx, crds.NotifyRules, crds.KindNotifyRule, this, this.Status.Conditions, cond, st, same)
}

// writeStatus merges cond and fields into obj's status unless neither the condition nor the
// fields changed (same), and records an Event when the Ready condition's status or reason
// changed.
func (n *Notifier) writeStatus(ctx context.Context, gvr schema.GroupVersionResource, kind string, obj metav1.Object,
	old []metav1.Condition, cond metav1.Condition, fields map[string]any, same bool) error {
	conds := append([]metav1.Condition(nil), old...)
	if !meta.SetStatusCondition(&conds, cond) && same {
		return nil
	}
	fields["conditions"] = conds
	body, err := json.Marshal(map[string]any{"status": fields})
	if err != nil {
		return err
	}
	_, err = n.cfg.Dynamic.Resource(gvr).Namespace(obj.GetNamespace()).Patch(ctx, obj.GetName(), types.MergePatchType, body, metav1.PatchOptions{}, "status")
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("status of %s %s/%s: %w", kind, obj.GetNamespace(), obj.GetName(), err)
	}
	was := meta.FindStatusCondition(old, crds.ConditionReady)
	if was == nil || was.Status != cond.Status || was.Reason != cond.Reason {
		typ := corev1.EventTypeNormal
		if cond.Status != metav1.ConditionTrue {
			typ = corev1.EventTypeWarning
		}
		n.ctl.Recorder().Event(crds.ObjectReference(kind, obj), typ, cond.Reason, strings.TrimSpace(cond.Message))
	}
	return nil
}
