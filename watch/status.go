package watch

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	"github.com/configbutler/gitops-reverser/controller"
	"github.com/configbutler/gitops-reverser/crds"
	"github.com/configbutler/gitops-reverser/gitops"
)

// reporter writes the Ready condition of the daemon's objects and records an Event whenever
// readiness changes, so `kubectl get` and `kubectl describe` tell the user what is wrong. The
// manager's Run runs the Event sender (recorder).
type reporter struct {
	dyn      dynamic.Interface
	recorder *controller.Events
}

// ourKind is a kind of ours whose status the reporter writes.
type ourKind struct {
	gvr  schema.GroupVersionResource
	name string
}

var (
	repoConfigKind       = ourKind{crds.GitRepoConfigs, crds.KindGitRepoConfig}
	destinationKind      = ourKind{crds.GitDestinations, crds.KindGitDestination}
	watchRuleKind        = ourKind{crds.WatchRules, crds.KindWatchRule}
	clusterWatchRuleKind = ourKind{crds.ClusterWatchRules, crds.KindClusterWatchRule}
)

// report patches status when the Ready condition or the observed generation changed. A changed
// condition also becomes an Event: Normal when ready or waiting for a step of every start,
// Warning otherwise.
func (r *reporter) report(ctx context.Context, k ourKind, obj metav1.Object, status crds.Status, cond condition) error {
	gvr, kind := k.gvr, k.name
	want := metav1.Condition{
		Type:               crds.ConditionReady,
		Status:             metav1.ConditionFalse,
		Reason:             cond.reason,
		Message:            cond.message,
		ObservedGeneration: obj.GetGeneration(),
	}
	if cond.ready {
		want.Status = metav1.ConditionTrue
	}
	current := meta.FindStatusCondition(status.Conditions, crds.ConditionReady)
	if current != nil && current.Status == want.Status && current.Reason == want.Reason &&
		current.Message == want.Message && current.ObservedGeneration == want.ObservedGeneration &&
		status.ObservedGeneration == obj.GetGeneration() {
		return nil
	}
	conditions := append([]metav1.Condition(nil), status.Conditions...)
	meta.SetStatusCondition(&conditions, want)
	body, err := json.Marshal(map[string]any{"status": crds.Status{Conditions: conditions, ObservedGeneration: obj.GetGeneration()}})
	if err != nil {
		return fmt.Errorf("encode status: %w", err)
	}
	client := r.dyn.Resource(gvr).Namespace(obj.GetNamespace())
	if _, err := client.Patch(ctx, obj.GetName(), types.MergePatchType, body, metav1.PatchOptions{}, "status"); err != nil {
		return fmt.Errorf("update status of %s %s: %w", kind, obj.GetName(), err)
	}
	if current == nil || current.Status != want.Status || current.Reason != want.Reason || current.Message != want.Message {
		ref := crds.ObjectReference(kind, obj)
		eventType := corev1.EventTypeWarning
		if cond.ready || cond.waiting {
			eventType = corev1.EventTypeNormal
		}
		r.recorder.Event(ref, eventType, cond.reason, cond.message)
	}
	return nil
}

// reportSigningKey makes status.signingKey of a GitRepoConfig say key (removing it when key is
// nil), with a merge patch of that field alone, sent only when obj's status says otherwise.
func (r *reporter) reportSigningKey(ctx context.Context, obj *crds.GitRepoConfig, key *gitops.SigningKey) error {
	var want *crds.SigningKeyStatus
	if key != nil {
		want = &crds.SigningKeyStatus{Format: key.Format, PublicKey: key.PublicKey, Fingerprint: key.Fingerprint}
	}
	current := obj.Status.SigningKey
	if (want == nil && current == nil) || (want != nil && current != nil && *want == *current) {
		return nil
	}
	return r.patchStatusField(ctx, repoConfigKind, obj, "signingKey", want)
}

// reportSkipped sets a GitDestination's status.skipped when it differs from what it holds.
func (r *reporter) reportSkipped(ctx context.Context, obj *crds.GitDestination, want []crds.SkipCount) error {
	if slices.Equal(want, obj.Status.Skipped) {
		return nil
	}
	return r.patchStatusField(ctx, destinationKind, obj, "skipped", want)
}

// patchStatusFields merge-patches fields into obj's status (a nil value removes the field).
func (r *reporter) patchStatusFields(ctx context.Context, k ourKind, obj metav1.Object, fields map[string]any) error {
	body, err := json.Marshal(map[string]any{"status": fields})
	if err != nil {
		return fmt.Errorf("encode status: %w", err)
	}
	client := r.dyn.Resource(k.gvr).Namespace(obj.GetNamespace())
	if _, err := client.Patch(ctx, obj.GetName(), types.MergePatchType, body, metav1.PatchOptions{}, "status"); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("update status of %s %s/%s: %w", k.name, obj.GetNamespace(), obj.GetName(), err)
	}
	return nil
}

// patchStatusField merge-patches one field of an object's status (nil removes it), touching
// nothing else there: the conditions are reported on their own. An object gone meanwhile is fine.
func (r *reporter) patchStatusField(ctx context.Context, k ourKind, obj metav1.Object, field string, value any) error {
	gvr, kind := k.gvr, k.name
	body, err := json.Marshal(map[string]any{"status": map[string]any{field: value}})
	if err != nil {
		return fmt.Errorf("encode status.%s: %w", field, err)
	}
	client := r.dyn.Resource(gvr).Namespace(obj.GetNamespace())
	if _, err := client.Patch(ctx, obj.GetName(), types.MergePatchType, body, metav1.PatchOptions{}, "status"); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("update status.%s of %s %s/%s: %w", field, kind, obj.GetNamespace(), obj.GetName(), err)
	}
	return nil
}
