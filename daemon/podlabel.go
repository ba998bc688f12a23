package daemon

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/configbutler/gitops-reverser/kube"
)

// leaderLabel marks the Pod of the replica that leads; the webhook and receiver Services select it,
// so admission calls and Git host webhooks reach the process whose correlation store and workers
// matter.
const leaderLabel = "configbutler.ai/leader"

var (
	labelPatch   = []byte(`{"metadata":{"labels":{"` + leaderLabel + `":"true"}}}`)
	unlabelPatch = []byte(`{"metadata":{"labels":{"` + leaderLabel + `":null}}}`)
)

// podLabels puts the leader label on this replica's Pod and takes it off.
type podLabels struct {
	pods *kube.Client[corev1.Pod] // of the daemon's namespace
	own  string
}

// lead labels the own Pod, then takes the label off every other Pod of the namespace.
func (p *podLabels) lead(ctx context.Context) error {
	if _, err := p.pods.Patch(ctx, p.own, types.MergePatchType, labelPatch, metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("label pod: %w", err)
	}
	others, err := p.pods.List(ctx, metav1.ListOptions{LabelSelector: leaderLabel + "=true"})
	if err != nil {
		return fmt.Errorf("list labelled pods: %w", err)
	}
	var errs []error
	for _, pod := range others.Items {
		if pod.GetName() == p.own {
			continue
		}
		if err := p.unlabel(ctx, pod.GetName()); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// standBy takes the label off the own Pod.
func (p *podLabels) standBy(ctx context.Context) error { return p.unlabel(ctx, p.own) }

func (p *podLabels) unlabel(ctx context.Context, pod string) error {
	_, err := p.pods.Patch(ctx, pod, types.MergePatchType, unlabelPatch, metav1.PatchOptions{})
	if apierrors.IsNotFound(err) {
		return nil // a Pod that is gone receives nothing
	}
	if err != nil {
		return fmt.Errorf("remove the leader label from pod %s: %w", pod, err)
	}
	return nil
}
