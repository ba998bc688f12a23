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
	admissionv1ac "k8s.io/client-go/applyconfigurations/admissionregistration/v1"
	admissionregistrationv1client "k8s.io/client-go/kubernetes/typed/admissionregistration/v1"
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
	// Admission is the typed admissionregistration client (not the full clientset).
	Admission admissionregistrationv1client.AdmissionregistrationV1Interface
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
	client := r.cfg.Admission.ValidatingWebhookConfigurations()
	_, err := client.Apply(ctx, r.desired(rs), metav1.ApplyOptions{FieldManager: registrationManager, Force: true})
	if err != nil {
		return fmt.Errorf("apply validating webhook configuration %s: %w", r.cfg.Name, err)
	}
	return nil
}

// Delete removes the configuration; a configuration already gone is not an error.
func (r *Registration) Delete(ctx context.Context) error {
	err := r.cfg.Admission.ValidatingWebhookConfigurations().Delete(ctx, r.cfg.Name, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete validating webhook configuration %s: %w", r.cfg.Name, err)
	}
	return nil
}

func (r *Registration) desired(rs []Resource) *admissionv1ac.ValidatingWebhookConfigurationApplyConfiguration {
	client := admissionv1ac.WebhookClientConfig()
	if r.cfg.URL != "" {
		client.WithURL(strings.TrimSuffix(r.cfg.URL, "/") + r.cfg.Path)
	} else {
		client.WithService(admissionv1ac.ServiceReference().
			WithNamespace(r.cfg.ServiceNamespace).WithName(r.cfg.ServiceName).
			WithPath(cmp.Or(r.cfg.Path, "/")).WithPort(r.cfg.ServicePort))
	}
	if r.cfg.CABundle != nil {
		if ca := r.cfg.CABundle(); len(ca) > 0 {
			client.WithCABundle(ca...)
		}
	}
	hook := admissionv1ac.ValidatingWebhook().
		WithName(webhookName).
		WithClientConfig(client).
		WithRules(rules(rs)...).
		WithFailurePolicy(admissionregistrationv1.Ignore).
		WithSideEffects(admissionregistrationv1.SideEffectClassNone).
		WithTimeoutSeconds(r.cfg.TimeoutSeconds).
		WithAdmissionReviewVersions("v1").
		WithMatchPolicy(admissionregistrationv1.Equivalent)
	return admissionv1ac.ValidatingWebhookConfiguration(r.cfg.Name).WithWebhooks(hook)
}

// rules merges rs into one rule per GVR with the union of its operations, in a stable order so
// that the same set of resources always yields the same object.
func rules(rs []Resource) []*admissionv1ac.RuleWithOperationsApplyConfiguration {
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
	out := make([]*admissionv1ac.RuleWithOperationsApplyConfiguration, 0, len(gvrs))
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
		out = append(out, admissionv1ac.RuleWithOperations().
			WithAPIGroups(gvr.Group).WithAPIVersions(gvr.Version).WithResources(gvr.Resource).
			WithOperations(ops...).WithScope(scope))
	}
	return out
}
