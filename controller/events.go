package controller

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	"github.com/configbutler/gitops-reverser/kube"
)

// Component is the source of every Event the daemon records.
const Component = "gitops-reverser"

// Bounds of the Event sender.
const (
	maxQueuedEvents  = 1000 // beyond, an Event is dropped (and logged) rather than block its caller
	maxTriesPerEvent = 12
	eventRetryDelay  = 10 * time.Second
)

// Events records Kubernetes Events (it is what client-go calls an EventRecorder). Recording never
// blocks: an Event is queued, and Run sends it, correlated as client-go's recorder does (repeats
// counted on one Event, floods of one object throttled). Unlike client-go's broadcaster, the one
// goroutine that sends is Run's own, so it ends when Run returns. Events recorded before Run
// wait for it; those recorded after it ended are dropped.
type Events struct {
	client dynamic.Interface // nil: nothing is sent
	log    *slog.Logger
	queue  chan *corev1.Event
	tap    atomic.Pointer[func(*corev1.Event)]
}

// NewEvents builds a recorder that sends through client; Run sends.
func NewEvents(client dynamic.Interface, log *slog.Logger) *Events {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Events{client: client, log: log, queue: make(chan *corev1.Event, maxQueuedEvents)}
}

// Tap has f see a copy of every Event recorded from now on, as it is recorded (before it is
// sent). f must not block: it runs in the recording goroutine (notify.Notifier.Offer queues).
func (e *Events) Tap(f func(*corev1.Event)) { e.tap.Store(&f) }

// Event records an Event about object (a *corev1.ObjectReference, or an object that carries its
// apiVersion and kind).
func (e *Events) Event(object runtime.Object, eventtype, reason, message string) {
	e.record(object, nil, eventtype, reason, message)
}

// Eventf is Event with a formatted message.
func (e *Events) Eventf(object runtime.Object, eventtype, reason, messageFmt string, args ...any) {
	e.record(object, nil, eventtype, reason, fmt.Sprintf(messageFmt, args...))
}

// AnnotatedEventf is Eventf with annotations on the Event.
func (e *Events) AnnotatedEventf(object runtime.Object, annotations map[string]string, eventtype, reason, messageFmt string, args ...any) {
	e.record(object, annotations, eventtype, reason, fmt.Sprintf(messageFmt, args...))
}

func (e *Events) record(object runtime.Object, annotations map[string]string, eventtype, reason, message string) {
	ref, err := referenceTo(object)
	if err != nil {
		e.log.Error("event not recorded: no reference to its object", "reason", reason, "err", err)
		return
	}
	now := metav1.Now()
	namespace := ref.Namespace
	if namespace == "" {
		namespace = metav1.NamespaceDefault
	}
	ev := &corev1.Event{
		ObjectMeta: metav1.ObjectMeta{
			Name: fmt.Sprintf("%v.%x", ref.Name, now.UnixNano()), Namespace: namespace, Annotations: annotations,
		},
		InvolvedObject: *ref, Reason: reason, Message: message, Type: eventtype,
		FirstTimestamp: now, LastTimestamp: now, Count: 1,
		Source:              corev1.EventSource{Component: Component},
		ReportingController: Component,
	}
	if tap := e.tap.Load(); tap != nil {
		(*tap)(ev.DeepCopy())
	}
	select {
	case e.queue <- ev:
	default:
		e.log.Error("event dropped: too many queued", "object", ref.Namespace+"/"+ref.Name, "reason", reason)
	}
}

// Run sends the recorded Events until ctx ends.
func (e *Events) Run(ctx context.Context) error {
	correlator := newCorrelator()
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev := <-e.queue:
			if e.client != nil {
				e.send(ctx, correlator, ev)
			}
		}
	}
}

// send writes one Event, or counts it on the Event it repeats; a failure to reach the apiserver
// is retried a while, a refusal is not.
func (e *Events) send(ctx context.Context, correlator *correlator, ev *corev1.Event) {
	out, repeat, skip := correlator.correlate(ev)
	if skip {
		e.log.Debug("event not written: its object has too many", "object", ev.InvolvedObject.Name, "reason", ev.Reason)
		return
	}
	for tries := 1; ; tries++ {
		written, err := e.write(ctx, out, repeat)
		if err == nil {
			correlator.remember(written)
			return
		}
		// An answer of the apiserver is a refusal that retrying would not change; a failure to
		// reach it is retried a while.
		var refused apierrors.APIStatus
		if ctx.Err() != nil || tries >= maxTriesPerEvent || errors.As(err, &refused) {
			e.log.Debug("event not written", "object", ev.InvolvedObject.Name, "reason", ev.Reason, "err", err)
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(eventRetryDelay):
		}
	}
}

// write counts ev on the Event it repeats, or creates ev when it is the first (or that one is gone).
func (e *Events) write(ctx context.Context, ev *corev1.Event, repeat bool) (*corev1.Event, error) {
	client := kube.For(e.client, kube.Events, ev.Namespace)
	if repeat {
		written, err := client.Patch(ctx, ev.Name, types.MergePatchType, countPatch(ev), metav1.PatchOptions{})
		if !apierrors.IsNotFound(err) {
			return written, err
		}
	}
	fresh := ev.DeepCopy()
	fresh.ResourceVersion = ""
	return client.Create(ctx, fresh, metav1.CreateOptions{})
}

// referenceTo is the reference an Event names its object by.
func referenceTo(object runtime.Object) (*corev1.ObjectReference, error) {
	if ref, ok := object.(*corev1.ObjectReference); ok {
		return ref, nil
	}
	m, err := meta.Accessor(object)
	if err != nil {
		return nil, fmt.Errorf("read the object's metadata: %w", err)
	}
	apiVersion, kind := object.GetObjectKind().GroupVersionKind().ToAPIVersionAndKind()
	if kind == "" {
		return nil, fmt.Errorf("object %s/%s does not say its kind", m.GetNamespace(), m.GetName())
	}
	return &corev1.ObjectReference{APIVersion: apiVersion, Kind: kind, Namespace: m.GetNamespace(), Name: m.GetName(),
		UID: m.GetUID(), ResourceVersion: m.GetResourceVersion()}, nil
}
