package webhook

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/utils/ptr"

	"github.com/configbutler/gitops-reverser/kube"
)

// Names the daemon uses in the cluster for its webhook registration.
const (
	DefaultRegistrationName = "gitops-reverser"
	registrationManager     = "gitops-reverser"
	webhookName             = "gitops-reverser.configbutler.ai"
	defaultServicePort      = 9443
	defaultWebhookTimeout   = 2
)

// RegistrationConfig says how the apiserver reaches the webhook server.
type RegistrationConfig struct {
	// Dynamic writes the configuration.
	Dynamic dynamic.Interface
	// Name of the ValidatingWebhookConfiguration; empty means DefaultRegistrationName.
	Name string
	// URL is the server's base https://host:port when the daemon runs outside the cluster; when
	// empty the apiserver calls the Service below.
	URL string
	// ServiceNamespace, ServiceName and ServicePort (0 means 9443) locate the in-cluster Service.
	ServiceNamespace, ServiceName string
	ServicePort                   int32
	// Path of the admission handler on the server.
	Path string
	// CABundle returns the PEM CA the apiserver must trust; read on every Update. May be nil.
	CABundle func() []byte
	// TimeoutSeconds bounds each admission call; 0 means 2.
	TimeoutSeconds int32
}

// Registration keeps the daemon's ValidatingWebhookConfiguration in line with the resources it
// watches. It owns the whole object: other writers of the same fields are overridden.
type Registration struct {
	cfg RegistrationConfig
}

// NewRegistration fills in the defaults of cfg.
func NewRegistration(cfg RegistrationConfig) *Registration {
	cfg.Name = cmp.Or(cfg.Name, DefaultRegistrationName)
	cfg.ServicePort = cmp.Or(cfg.ServicePort, defaultServicePort)
	cfg.TimeoutSeconds = cmp.Or(cfg.TimeoutSeconds, defaultWebhookTimeout)
	return &Registration{cfg: cfg}
}

// Update server-side applies the configuration with one rule per resource in rs. Namespaces are
// not filtered here (the handler does that), so a namespace-bound Resource registers its whole
// resource. With no resources the webhook stays, with no rules, and matches nothing. Applying
// unchanged content is a no-op in the apiserver: nothing is written and resourceVersion stays.
func (r *Registration) Update(ctx context.Context, rs []Resource) error {
	client := kube.For(r.cfg.Dynamic, kube.ValidatingWebhookConfigurations, "")
	_, err := client.Apply(ctx, r.desired(rs), metav1.ApplyOptions{FieldManager: registrationManager, Force: true})
	if err != nil {
		return fmt.Errorf("apply validating webhook configuration %s: %w", r.cfg.Name, err)
	}
	return nil
}

// Delete removes the configuration; a configuration already gone is not an error.
func (r *Registration) Delete(ctx context.Context) error {
	err := kube.For(r.cfg.Dynamic, kube.ValidatingWebhookConfigurations, "").Delete(ctx, r.cfg.Name, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete validating webhook configuration %s: %w", r.cfg.Name, err)
	}
	return nil
}

func (r *Registration) desired(rs []Resource) *admissionregistrationv1.ValidatingWebhookConfiguration {
	var client admissionregistrationv1.WebhookClientConfig
	if r.cfg.URL != "" {
		client.URL = ptr.To(strings.TrimSuffix(r.cfg.URL, "/") + r.cfg.Path)
	} else {
		client.Service = &admissionregistrationv1.ServiceReference{Namespace: r.cfg.ServiceNamespace, Name: r.cfg.ServiceName,
			Path: ptr.To(cmp.Or(r.cfg.Path, "/")), Port: ptr.To(r.cfg.ServicePort)}
	}
	if r.cfg.CABundle != nil {
		client.CABundle = r.cfg.CABundle()
	}
	hook := admissionregistrationv1.ValidatingWebhook{
		Name:                    webhookName,
		ClientConfig:            client,
		Rules:                   rules(rs),
		FailurePolicy:           ptr.To(admissionregistrationv1.Ignore),
		SideEffects:             ptr.To(admissionregistrationv1.SideEffectClassNone),
		TimeoutSeconds:          ptr.To(r.cfg.TimeoutSeconds),
		AdmissionReviewVersions: []string{"v1"},
		MatchPolicy:             ptr.To(admissionregistrationv1.Equivalent),
	}
	return &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: r.cfg.Name},
		Webhooks:   []admissionregistrationv1.ValidatingWebhook{hook},
	}
}

// rules merges rs into one rule per GVR with the union of its operations, in a stable order so
// that the same set of resources always yields the same object.
func rules(rs []Resource) []admissionregistrationv1.RuleWithOperations {
	type merged struct {
		namespaced bool
		ops        []string
	}
	byGVR := map[schema.GroupVersionResource]*merged{}
	for _, res := range rs {
		m := byGVR[res.GVR]
		if m == nil {
			m = &merged{namespaced: res.Namespaced}
			byGVR[res.GVR] = m
		}
		m.ops = append(m.ops, res.operations()...)
	}
	gvrs := make([]schema.GroupVersionResource, 0, len(byGVR))
	for gvr := range byGVR {
		gvrs = append(gvrs, gvr)
	}
	slices.SortFunc(gvrs, func(a, b schema.GroupVersionResource) int {
		return cmp.Or(cmp.Compare(a.Group, b.Group), cmp.Compare(a.Resource, b.Resource), cmp.Compare(a.Version, b.Version))
	})
	out := make([]admissionregistrationv1.RuleWithOperations, 0, len(gvrs))
	for _, gvr := range gvrs {
		m := byGVR[gvr]
		slices.Sort(m.ops)
		ops := make([]admissionregistrationv1.OperationType, 0, len(m.ops))
		for _, op := range slices.Compact(m.ops) {
			ops = append(ops, admissionregistrationv1.OperationType(op))
		}
		scope := admissionregistrationv1.ClusterScope
		if m.namespaced {
			scope = admissionregistrationv1.NamespacedScope
		}
		out = append(out, admissionregistrationv1.RuleWithOperations{
			Operations: ops,
			Rule: admissionregistrationv1.Rule{APIGroups: []string{gvr.Group}, APIVersions: []string{gvr.Version},
				Resources: []string{gvr.Resource}, Scope: ptr.To(scope)},
		})
	}
	return out
}
